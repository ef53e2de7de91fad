"""The execution seam: how a job's process is started, watched and ended, behind one interface.

The scheduling loop knows only `Execution`, `Backend` and `JobHandle`; a backend (a cold process
per job, a warm spare per slot, a Ray task) implements them and reports each job's end as a
typed `Outcome` (hpsearch_launcher.outcome).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..nvml import GpuMemory
from ..outcome import Outcome
from ..plan.env import job_env
from ..plan.jobs import Job
from ..plan.settings import WHOLE_GPU_FRACTION, LauncherSettings
from ..plan.slots import SlotPool
from .job.wire import Ticket

T = TypeVar("T", bound=Ticket)  # the kind of ticket a backend's job side reads


@dataclass(frozen=True)
class Ahead:
    """What a backend that makes processes ahead (`Execution.warm`) is shown to plan them: the
    slots as they are now, how many jobs are still to start, and the environment the next job
    on a slot group would have, as far as it can be told now. How many to make is its own
    business (the local backend: plan.slots.spare_counts)."""

    pool: SlotPool
    left: int  # jobs still to start (queued, and what the source will still give)
    env_for: Callable[[str], Mapping[str, str]]  # a slot group -> its next job's environment


@dataclass(frozen=True)
class JobSpec:
    """What a process needs to run one attempt of one job."""

    num: int  # hydra.job.num
    attempt: int  # 1 for the first run
    payload: bytes  # the pickled sweep config of the job
    stdout_path: str
    stderr_path: str
    share: float = 1.0  # the part of its slot group it holds: 1/jobs_per_gpu, or 1 when alone
    subdir: str = ""  # the run dir claimed for it (hydra.sweep.subdir); "": as its config says
    # Which job of the sweep it is, across runs (a cluster's backend notes it to adopt the
    # attempt if the sweep is killed): plan.jobs.Job's.
    config_hash: str = ""
    overrides: tuple[str, ...] = ()

    def ticket(self, kind: type[T], **fields: Any) -> T:
        """What its process is sent: this attempt, as the ticket `kind` its job side reads
        (execute.job.child's LocalTicket, execute.job.remote's RemoteTicket), with its own
        `fields`."""
        return kind(
            config=self.payload,  # pickled once, by the sweep: unpickled by the job
            stdout=self.stdout_path,
            stderr=self.stderr_path,
            subdir=self.subdir,
            **fields,
        )


@dataclass(frozen=True)
class Adoption:
    """An attempt of a job that a killed run of the sweep started and the backend's cluster
    still holds, or ended unrecorded: the loop takes it up (`take`, given the attempt's spec,
    is its handle) instead of starting the job again."""

    run_dir: Path  # where it runs
    attempt: int  # its number, as the killed run counted it
    started: float  # epoch s, when the killed run started it
    take: Callable[[JobSpec], JobHandle]
    what: str  # the attempt in the cluster's words, for the console ("SLURM job 1234")


class JobHandle(Protocol):
    """One started attempt: `outcome` resolves once its process has exited (or was ended)."""

    outcome: Future[Outcome]

    def started_at(self) -> float | None:
        """When (time.monotonic) the job began to run; None while it waits for a place."""
        ...

    def placement(self) -> str:
        """Where it runs, when the backend chose the place ("" otherwise, or not yet)."""
        ...

    def log_tail(self, max_bytes: int = 64 * 1024) -> str:
        """The end of what the job wrote to stderr."""
        ...

    def pids(self) -> list[int]:
        """The job's processes on this machine (its GPU memory is theirs); [] elsewhere."""
        ...


class Backend(Protocol):
    def start(self, spec: JobSpec, env: Mapping[str, str]) -> JobHandle:
        """Start the job in a process created with exactly `env` over the sweep's own
        environment; raise OSError (or any Exception) if it cannot be created."""
        ...

    def warming(self, env: Mapping[str, str]) -> bool:
        """Warm start: whether a process made ahead that jobs will start from is on its way,
        nearer than a cold process would be (the fork server, importing; made now with `env`
        if there is none): the sweep then holds its queue. A backend without one: False."""
        ...

    def prepare(self, ahead: Ahead) -> None:
        """Warm start (asked only where `Execution.warm`): keep the processes made ahead that
        the jobs still to start will want, from what `ahead` shows, and none for any other
        environment. A backend that cannot make processes ahead does nothing."""
        ...

    def stop(self, handle: JobHandle, force: bool) -> None:
        """Signal the job's process tree to end (SIGTERM; `force`: SIGKILL) and return at once:
        its `outcome` resolves when it is gone."""
        ...

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        """End these jobs' process trees: SIGTERM, up to `grace` s, then SIGKILL; return when
        they are gone."""
        ...

    def close(self) -> None:
        """Release what the backend holds (temporary files, idle processes)."""
        ...


@dataclass
class Execution:
    """Where a sweep's jobs run, as the scheduling loop sees it: the backend, the slot groups it
    fills, each job's environment, and what only the backend can tell (hooks below; these
    defaults: no memory figures, a fixed size)."""

    backend: Backend
    groups: tuple[str, ...]  # slot groups: GPU ids, ("cpu",), or a cluster's "ray:0", ...
    slots: int  # per group (jobs_per_gpu=auto: the most a GPU may hold; memory decides)
    resources: str  # what its jobs run on, in words: "GPU 0,1", "the CPU", "Ray (2 nodes, 4 GPUs)"
    settings: LauncherSettings
    memory_total: Mapping[str, int | None]  # MB per group, where known (this machine's GPUs)
    cores: int  # the cores one group's slots share (each job's threads: cores // slots)
    warm: bool = False  # whether the backend makes processes ahead (`Backend.prepare`)
    packs: bool = False  # jobs_per_gpu=auto with memory figures: GPUs take jobs by memory
    unit: str = "GPU"  # what a slot group is, for the sweep's first line ("": one job's place)
    # Times a job the cluster ended at its time limit or preempted runs again (SLURM's
    # max_num_timeout); 0 where no scheduler does that.
    requeues: int = 0
    _envs: dict[tuple[str, int | None], dict[str, str]] = field(default_factory=dict, repr=False)

    def job_env(self, group: str, whole: bool = False, cap_mb: int | None = None) -> dict[str, str]:
        """A job's environment on `group`: its slot's, the whole GPU's for a job alone, or
        capped at `cap_mb` (jobs_per_gpu=auto: its kind's reservation)."""
        key = (group, cap_mb)
        if not whole and key in self._envs:
            return self._envs[key]
        total = self.memory_total.get(group)
        fraction = WHOLE_GPU_FRACTION if whole else None
        if cap_mb is not None and total and not whole:
            fraction = min(1.0, cap_mb / total)
        env = job_env(
            group,
            self.settings,
            1 if whole or self.packs else self.slots,
            os.getpid(),
            total,
            self.cores,
            fraction=fraction,
            limit_mb=None if whole else cap_mb,
        )
        if not whole:
            self._envs[key] = env
        return env

    def gpu_memory(
        self, groups: Collection[str], ours: Callable[[], Collection[int]]
    ) -> dict[str, GpuMemory]:
        """What NVML says of these groups' GPUs now, where it can tell (this machine's GPUs):
        total, used, and what our jobs' processes hold, by pid (`ours()`: their pids, asked
        only when a GPU is: finding a job's process tree is not free). {}: no figures."""
        return {}

    def grown(self) -> tuple[tuple[str, ...], int] | None:
        """The groups and slots there are now, if the backend's room grew; else None."""
        return None

    def adoption(self, job: Job) -> Adoption | None:
        """The attempt of `job` a killed run of the sweep left to the backend's cluster, if
        there is one, to take up instead of starting the job (each once); None here: a
        backend whose jobs die with the sweep leaves none."""
        return None

    def adoptions_over(self) -> None:
        """No job will ask `adoption` again (the source has no more): what a killed run left
        that no job took is ended. Nothing here."""
