"""The SLURM backend: each job one SLURM job, submitted through submitit (the library
hydra-submitit-launcher uses) as a slot frees, never as an array: a search streams to SLURM as
it does locally, and nothing depends on the cluster's MaxArraySize. A job's process, started by
srun, runs the job as a local job's child does (worker.py): its environment contract, its
reports and stop file on the sweep dir, which every node must see at the same path.

Here the sweep's side: `slurm_execution` checks the cluster answers and makes a `SlurmBackend`,
whose slots are hydra.launcher.slurm.array_parallelism (the most jobs queued or running at
once), one per slot group; one `Watcher` reads every job's state (watcher.py). Each submitted
job is noted in the sweep dir's ledger (ledger.py); after a `kill -9` of the sweep, the next
run takes up the jobs it finds there (adopt.py) instead of submitting them again.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...atomic import write_bytes_atomic
from ...outcome import Ending
from ...plan.jobs import Job
from ...plan.settings import LauncherSettings, LauncherSettingsError
from ...plan.slots import CPU
from ...plan.slurm_settings import asks_gpus, slurm_of
from ..backend import Adoption, Ahead, Execution, JobHandle, JobSpec
from ..job.remote import kept_mark
from ..remote_handle import RemoteJobs, wait_ended
from .adopt import Adoptions
from .handle import SlurmHandle
from .ledger import Entry, Ledger
from .sbatch import Submitter
from .watcher import Watcher, run, still_queued
from .worker import run_in_slurm

log = logging.getLogger("hpsearch.launcher")

END_WAIT_S = 30.0  # after scancel, how long to wait for SLURM to be done with the jobs
SLURM_SLOT = "slurm:"  # the sweep's slot groups: "slurm:0" .. one per job queued at once
SLURM_GPUS = "slurm:gpu"  # where a job's environment is made when jobs ask SLURM for GPUs
TASK_FILE = ".hpsearch-task"  # in the sweep dir: the pickled task, read by each job


class SlurmBackend:
    """Each job `run_in_slurm(...)` in a SLURM job of its own, submitted by `start`, or the
    one a killed run of the sweep submitted for it, taken up by `adopt`."""

    def __init__(self, settings: LauncherSettings, task: bytes, sweep_dir: Path) -> None:
        slurm = slurm_of(settings)
        folder = slurm.submitit_folder or str(sweep_dir / ".submitit" / "%j")
        self.submitter = Submitter(slurm, Path(folder))
        self.on_gpus = asks_gpus(slurm)
        # The killed run's mark kept: its jobs still queued check it when they start.
        self.jobs = RemoteJobs(kept_mark(sweep_dir), run=f"{secrets.token_hex(3)}-")
        self.task_file = Path(self.jobs.mark[0]).with_name(TASK_FILE)
        # Replaced whole: a killed run's queued job may read it meanwhile.
        write_bytes_atomic(self.task_file, task)
        self.watcher = Watcher()
        self.ledger = Ledger(sweep_dir)
        earlier = self.ledger.earlier()
        if not settings.resume:  # an earlier run's jobs are not this sweep's: none adopted
            cancel_left(earlier, "resume=false: their jobs run again")
            earlier = []
        self.adoptions = Adoptions(earlier, self.watcher.known)

    def start(self, spec: JobSpec, env: Mapping[str, str]) -> SlurmHandle:
        """sbatch the job (raises, the job not started, if sbatch refuses it)."""
        jobs = self.jobs
        ticket, shipped = jobs.ticket(spec).to_dict(), jobs.shipped(env)
        job_id, result = self.submitter.submit(
            run_in_slurm, str(self.task_file), ticket, shipped, jobs.mark, self.on_gpus
        )
        started = jobs.started_file(spec)
        run_dir = str(Path(spec.stdout_path).parent)
        self.ledger.add(
            Entry(
                job_id, spec.config_hash, spec.overrides, run_dir, spec.attempt, str(result),
                str(started), time.time(),
            )
        )  # fmt: skip
        return self._watch(job_id, result, spec, started)

    def adopt(self, config_hash: str, overrides: tuple[str, ...]) -> Adoption | None:
        """The SLURM job a killed run submitted for the job of this config and overrides, if
        SLURM still knows it or it left its result: waited on as this run's own."""
        entry = self.adoptions.take(config_hash, overrides)
        if entry is None:
            return None

        def take(spec: JobSpec) -> SlurmHandle:
            self.adoptions.watched(entry)
            return self._watch(entry.job_id, Path(entry.result), spec, Path(entry.started))

        where = Path(entry.run_dir)
        return Adoption(where, entry.attempt, entry.submitted, take, f"SLURM job {entry.job_id}")

    def adoptions_over(self) -> None:
        """scancel the killed run's jobs no job of this run took up, those SLURM still holds
        pending or running (their configs are no longer the sweep's); said in one line."""
        cancel_left(self.adoptions.rest(), "no job of this run has their config and overrides")

    def _watch(self, job_id: str, result: Path, spec: JobSpec, started: Path) -> SlurmHandle:
        handle = SlurmHandle(job_id, result, spec, started)
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
        wait_ended([h.outcome for h in ours], "SLURM jobs", END_WAIT_S)

    def close(self) -> None:
        self.adoptions_over()
        self.watcher.close()
        self.ledger.close()
        self.task_file.unlink(missing_ok=True)
        self.jobs.close()


def cancel_left(entries: Sequence[Entry], why: str) -> None:
    """scancel the jobs of these ledger entries that SLURM holds pending or running and that
    have not ended (no result, no end file), saying so and `why` in one line."""
    live = [e.job_id for e in entries if not e.ended()]
    left = still_queued(live) if live else []
    if left:
        log.warning(
            "hpsearch: cancelled %d SLURM jobs an earlier run of this sweep left running (it "
            "was killed): %s",
            len(left),
            why,
        )
        scancel(left)


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

    def adoption(self, job: Job) -> Adoption | None:
        assert isinstance(self.backend, SlurmBackend)
        return self.backend.adopt(job.config_hash, job.overrides)

    def adoptions_over(self) -> None:
        assert isinstance(self.backend, SlurmBackend)
        self.backend.adoptions_over()

    def job_env(self, group: str, whole: bool = False, cap_mb: int | None = None) -> dict[str, str]:
        """Any slot's job: on its GPUs (their ids are SLURM's to set), or its CPUs."""
        return super().job_env(SLURM_GPUS if self.on_gpus else CPU, whole, cap_mb)
