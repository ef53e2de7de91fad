"""Why a job failed, in the terms the retry policy needs. Pure: an outcome in, a verdict out."""

from __future__ import annotations

import enum
import re
import signal

from ..outcome import Ending, Outcome
from ..plan.settings import LauncherSettings
from ..plan.slots import CPU


class Retry(enum.Enum):
    """How a failed job runs again."""

    ALONE = "alone"  # after running out of memory: alone on its device (see alone_words)
    AGAIN = "again"  # as before, on any free slot


MAX_LOST_RETRIES = 3  # runs again of a job whose node was lost
REQUEUED = (Ending.TIME_LIMIT, Ending.PREEMPTED)  # the scheduler's doing: run again as SLURM's

# Out of GPU (or host) memory, as TensorFlow, CUDA, PyTorch, JAX/XLA and cuDNN word it.
_OOM = re.compile(
    r"ResourceExhaustedError|RESOURCE_EXHAUSTED|OOM when allocating|out of memory|"
    r"CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED|MemoryError",
    re.IGNORECASE,
)


def alone_words(group: str) -> tuple[str, str]:
    """How a job retried alone on `group` runs, and what its running out of memory there
    again says, in words. A GPU it has alone, with the whole memory; the CPU (a sweep without
    GPUs) it has with no other job running beside it, and the host's memory is all there is."""
    if group == CPU:
        return (
            "alone, with no other job running beside it",
            "the job needs more memory than this machine has free",
        )
    return "alone on its GPU with the whole memory", "the job needs more than one GPU holds"


def is_out_of_memory(outcome: Outcome, stderr_tail: str = "") -> bool:
    """A failure caused by memory: the task raised a memory error, the job's last output says
    so, or its process was SIGKILLed by someone outside the sweep while the kernel's OOM killer
    struck (where the kernel cannot say: any such SIGKILL, most often the OOM killer's; the
    sweep's own kills are TIMED_OUT or INTERRUPTED, never KILLED)."""
    if outcome.ending not in (Ending.RAISED, Ending.EXITED, Ending.KILLED, Ending.CRASHED):
        return False
    if outcome.ending is Ending.KILLED and outcome.code == signal.SIGKILL:
        return outcome.oom_killer is not False
    return bool(_OOM.search(outcome.detail) or _OOM.search(stderr_tail))


def retry_kind(
    outcome: Outcome,
    oom: bool,
    attempts: int,
    oom_attempts: int,
    settings: LauncherSettings,
    lost_attempts: int = 0,
    requeues: tuple[int, int] = (0, 0),
) -> Retry | None:
    """How the job runs again, or None: give up.

    `attempts` counts every run of the job so far; `oom_attempts` those that ran out of memory,
    `lost_attempts` those whose node left the cluster: not the job's failure, so retried up to
    MAX_LOST_RETRIES times (Ray's own default for system failures) on top of max_retries;
    `requeues`: (those the cluster's scheduler ended at its time limit or preempted, the most
    it may: SLURM's max_num_timeout, as hydra-submitit-launcher requeues them). Interrupted jobs are
    never retried here: a resumed sweep runs them again.
    """
    if outcome.ending in (Ending.RETURNED, Ending.INTERRUPTED, Ending.PRUNED):
        return None
    if outcome.ending is Ending.LOST:
        return Retry.AGAIN if lost_attempts <= MAX_LOST_RETRIES else None
    if outcome.ending in REQUEUED:
        return Retry.AGAIN if requeues[0] <= requeues[1] else None
    if oom:
        return Retry.ALONE if oom_attempts <= settings.max_oom_retries else None
    if attempts - oom_attempts - lost_attempts - requeues[0] <= settings.max_retries:
        return Retry.AGAIN
    return None
