"""The SLURM backend: each job one SLURM job, submitted through submitit (the library
hydra-submitit-launcher uses) as a slot frees, never as an array: a search streams to SLURM as
it does locally, and nothing depends on the cluster's MaxArraySize. A job's process, started by
srun, runs the job as a local job's child does (worker.py): its environment contract, its
reports and stop file on the sweep dir, which every node must see at the same path.

Here the sweep's side: `slurm_execution` checks the cluster answers and makes a `SlurmBackend`,
whose slots are hydra.launcher.slurm.array_parallelism (the most jobs queued or running at
once), one per slot group; one `Watcher` reads every job's state (watcher.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import wait
from dataclasses import dataclass
from pathlib import Path

from ...outcome import Ending
from ...plan.settings import LauncherSettings, LauncherSettingsError
from ...plan.slots import CPU
from ...plan.slurm_settings import asks_gpus, slurm_of
from ..backend import Ahead, Execution, JobHandle, JobSpec
from ..job.remote import write_mark
from ..remote_handle import RemoteJobs
from .handle import SlurmHandle
from .ledger import Ledger
from .sbatch import Submitter
from .watcher import Watcher, run, still_queued
from .worker import run_in_slurm

log = logging.getLogger("hpsearch.launcher")

END_WAIT_S = 30.0  # after scancel, how long to wait for SLURM to be done with the jobs
SLURM_SLOT = "slurm:"  # the sweep's slot groups: "slurm:0" .. one per job queued at once
SLURM_GPUS = "slurm:gpu"  # where a job's environment is made when jobs ask SLURM for GPUs
TASK_FILE = ".hpsearch-task"  # in the sweep dir: the pickled task, read by each job


class SlurmBackend:
    """Each job `run_in_slurm(...)` in a SLURM job of its own, submitted by `start`."""

    def __init__(self, settings: LauncherSettings, task: bytes, sweep_dir: Path) -> None:
        folder = slurm_of(settings).submitit_folder or str(sweep_dir / ".submitit" / "%j")
        self.submitter = Submitter(slurm_of(settings), Path(folder))
        self.on_gpus = asks_gpus(slurm_of(settings))
        self.jobs = RemoteJobs(write_mark(sweep_dir))
        self.task_file = Path(self.jobs.mark[0]).with_name(TASK_FILE)
        self.task_file.write_bytes(task)  # before any job is submitted: read whole
        self.watcher = Watcher()
        self.ledger = Ledger(sweep_dir)
        self.ledger.cancel_left(still_queued, scancel)

    def start(self, spec: JobSpec, env: Mapping[str, str]) -> SlurmHandle:
        """sbatch the job (raises, the job not started, if sbatch refuses it)."""
        jobs = self.jobs
        ticket, shipped = jobs.ticket(spec).to_dict(), jobs.shipped(env)
        job_id, result = self.submitter.submit(
            run_in_slurm, str(self.task_file), ticket, shipped, jobs.mark, self.on_gpus
        )
        self.ledger.add(job_id)
        handle = SlurmHandle(job_id, result, spec, jobs.started_file(spec))
        handle.outcome.add_done_callback(lambda _: self._after(handle))
        self.watcher.add(handle)
        return handle

    def _after(self, handle: SlurmHandle) -> None:
        """A job SLURM requeued is ended there: the sweep runs it again as a new attempt."""
        if not handle.cancelled and handle.outcome.result().ending is Ending.PREEMPTED:
            scancel([handle.job_id])

    def warming(self, env: Mapping[str, str]) -> bool:
        """SLURM starts each job's process itself: nothing on its way here."""
        return False

    def prepare(self, ahead: Ahead) -> None:
        """SLURM starts each job's process itself: nothing to prepare here."""

    def stop(self, handle: JobHandle, force: bool) -> None:
        """scancel: SLURM signals the job's processes (SIGTERM, SIGKILL after its KillWait)."""
        if isinstance(handle, SlurmHandle) and not handle.cancelled:
            handle.cancelled = True
            scancel([handle.job_id])
            self.watcher.poll_now()

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        """scancel the jobs, and wait until SLURM is done with each (squeue no longer lists
        it as pending or running)."""
        ours = [h for h in handles if isinstance(h, SlurmHandle)]
        for handle in ours:
            handle.cancelled = True
        scancel([h.job_id for h in ours])
        self.watcher.poll_now()
        _, left = wait([h.outcome for h in ours], timeout=END_WAIT_S)
        if left:
            log.warning(
                "hpsearch: %d cancelled SLURM jobs did not end within %gs", len(left), END_WAIT_S
            )

    def close(self) -> None:
        self.watcher.close()
        self.ledger.close()
        self.task_file.unlink(missing_ok=True)
        self.jobs.close()


def scancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        code, out = run(["scancel", *job_ids])
        if code != 0:
            log.warning("hpsearch: scancel %s: %s", " ".join(job_ids), out.strip())


def slurm_execution(settings: LauncherSettings, task: bytes, sweep_dir: Path) -> Execution:
    """Check the cluster answers and the settings fit it; make the backend. Which node and
    GPU each job gets is SLURM's choice."""
    if settings.jobs_per_gpu != 1:
        raise LauncherSettingsError(
            f"hydra.launcher.jobs_per_gpu={settings.jobs_per_gpu!r}: with backend=slurm each "
            "job holds the GPUs SLURM allocates it (gpus_per_node); sharing a GPU (SLURM's "
            "shard GRES) is not supported yet: use hydra.launcher.jobs_per_gpu=1"
        )
    code, out = run(["sinfo", "-h", "-o", "%P"])
    if code != 0:
        raise LauncherSettingsError(
            f"hydra.launcher.backend=slurm: no SLURM cluster answers here (sinfo: "
            f"{out.strip() or code}); run the sweep on a machine that can submit jobs "
            "(sbatch), or use hydra.launcher.backend=local"
        )
    slurm = slurm_of(settings)
    backend = SlurmBackend(settings, task, sweep_dir)
    partition = slurm.partition or "the default partition"
    return SlurmExecution(
        backend,
        tuple(f"{SLURM_SLOT}{i}" for i in range(slurm.array_parallelism)),
        1,
        f"SLURM ({partition}, up to {slurm.array_parallelism} jobs at once)",
        settings,
        {},
        slurm.cpus_per_task or 1,
        unit="",
        requeues=slurm.max_num_timeout,
        on_gpus=backend.on_gpus,
    )


@dataclass
class SlurmExecution(Execution):
    """Jobs as SLURM jobs: a slot group of one slot per job the sweep may have queued at once
    (a job retried alone after running out of memory then waits for no other job: SLURM gives
    each its own allocation), each job's environment that of the allocation SLURM gives it."""

    on_gpus: bool = False

    def job_env(self, group: str, whole: bool = False, cap_mb: int | None = None) -> dict[str, str]:
        """Any slot's job: on its GPUs (their ids are SLURM's to set), or its CPUs."""
        return super().job_env(SLURM_GPUS if self.on_gpus else CPU, whole, cap_mb)
