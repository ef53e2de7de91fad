"""Why a job failed, in the terms the retry policy needs. Pure: text in, a verdict out."""

from __future__ import annotations

import re
from pathlib import Path

from ._settings import LauncherSettings

# Out of GPU (or host) memory, as TensorFlow, CUDA, PyTorch, JAX/XLA and cuDNN word it.
_OOM = re.compile(
    r"ResourceExhaustedError|RESOURCE_EXHAUSTED|OOM when allocating|out of memory|"
    r"CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED|MemoryError",
    re.IGNORECASE,
)
STDERR_TAIL_BYTES = 64 * 1024


def is_out_of_memory(reason: str, stderr_tail: str = "") -> bool:
    """A failure caused by memory: the error says so, the job's last output says so, or the
    process was SIGKILLed by someone other than hpsearch (on Linux, most often the OOM killer)."""
    return bool(_OOM.search(reason) or _OOM.search(stderr_tail) or "killed by SIGKILL" in reason)


def stderr_tail(run_dir: Path) -> str:
    """The end of a job's stderr.log, where CUDA and TensorFlow print before a crash."""
    path = run_dir / "stderr.log"
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - STDERR_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def retry_kind(
    status: str, oom: bool, attempts: int, oom_attempts: int, settings: LauncherSettings
) -> str | None:
    """'oom' (again, alone on a whole GPU), 'plain' (again, as before) or None (give up).

    `attempts` counts every run of the job so far; `oom_attempts` those that ran out of memory.
    Interrupted jobs are never retried here: a resumed sweep runs them again.
    """
    if status not in ("failed", "timeout"):
        return None
    if oom and status == "failed":
        return "oom" if oom_attempts <= settings.max_oom_retries else None
    if attempts - oom_attempts <= settings.max_retries:
        return "plain"
    return None
