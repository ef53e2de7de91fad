"""The Ray backend: each job a Ray task in a fresh worker process (`max_calls=1`), on any node
of a Ray cluster. Ray places the tasks: `num_gpus = 1/jobs_per_gpu` packs that many jobs on a
GPU and sets the worker's CUDA_VISIBLE_DEVICES; hpsearch schedules nothing of its own here.

The sweep's planning and records are the local backend's; only execution differs. The job's
log files and its run dir are on the sweep dir, which every node must see at the same path (a
shared filesystem): the sweep writes a mark file there, and a node that does not find it fails
the job with that reason instead of writing somewhere nobody reads.

Here the driver side: `ray_execution` connects (or starts a Ray for the sweep), sizes the sweep's
slots from the cluster's resources, and makes a `RayBackend`. The worker side, the task each job
is, is `ray_worker.run_on_node`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...plan.ray_settings import ray_of
from ...plan.settings import LauncherSettings, LauncherSettingsError
from ...plan.slots import CPU
from ..backend import Ahead, Execution, JobHandle, JobSpec
from ..job.remote import write_mark
from ..remote_handle import RemoteJobs, wait_ended
from .handle import RayHandle, first_line
from .worker import run_on_node

log = logging.getLogger("hpsearch.launcher")

END_WAIT_S = 10.0  # after ray.cancel(force=True), how long to wait for the tasks to be gone
RAY_DEVICE = "ray:"  # the sweep's slot groups on a GPU cluster: "ray:0" .. one per GPU


def gpu_fraction(share: float) -> float:
    """A share of a GPU as Ray takes it (4 decimals), rounded down: 7 jobs of 1/7 fit one GPU."""
    return math.floor(share * 10_000) / 10_000


class RayBackend:
    """Each job a task `run_on_node(...)` with `max_calls=1`: its worker exits after it."""

    def __init__(
        self, task_payload: bytes, settings: LauncherSettings, on_gpus: bool, mark: tuple[str, str]
    ) -> None:
        import ray

        self.ray = ray
        self.task_ref = ray.put(task_payload)  # shipped once, to each node that needs it
        self.remote = ray.remote(max_calls=1, max_retries=0)(run_on_node)
        self.on_gpus = on_gpus
        self.num_cpus = ray_of(settings).num_cpus
        self.jobs = RemoteJobs(mark)

    def start(self, spec: JobSpec, env: Mapping[str, str]) -> RayHandle:
        jobs = self.jobs
        ref = self.remote.options(
            num_gpus=gpu_fraction(spec.share) if self.on_gpus else 0,
            num_cpus=self.num_cpus,
            name=f"hpsearch job {spec.num}",
        ).remote(self.task_ref, jobs.ticket(spec).to_dict(), jobs.shipped(env), jobs.mark)
        return RayHandle(ref, spec, jobs.started_file(spec))

    def warming(self, env: Mapping[str, str]) -> bool:
        """Ray starts its workers itself: nothing on its way here."""
        return False

    def prepare(self, ahead: Ahead) -> None:
        """Ray starts its workers itself (a pool made ahead): nothing to prepare here."""

    def stop(self, handle: JobHandle, force: bool) -> None:
        """Ray ends a running task only by killing its worker: at once, whatever `force`."""
        if isinstance(handle, RayHandle):
            self.ray.cancel(handle.ref, force=True)

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        """Cancel the tasks (Ray kills their workers: a running task cannot be asked to stop
        first), and wait until Ray says each is gone."""
        ours = [h for h in handles if isinstance(h, RayHandle)]
        for handle in ours:
            self.ray.cancel(handle.ref, force=True)
        wait_ended([h.outcome for h in ours], "Ray tasks", END_WAIT_S)

    def close(self) -> None:
        self.jobs.close()


def ray_execution(settings: LauncherSettings, task: bytes, sweep_dir: Path) -> Execution:
    """Join (or start) the Ray cluster, size the slots from its resources (again as nodes
    join: `refresh`), make the backend. Which GPU and node each job gets is Ray's choice."""
    import ray

    if settings.packed:
        log.warning(
            "hpsearch: jobs_per_gpu=auto packs this machine's GPUs by measured memory; on Ray "
            "each job holds a whole GPU (jobs_per_gpu=1): set a number to share them"
        )
        settings = replace(settings, jobs_per_gpu=1)
    connect(settings)
    resources = ray.cluster_resources()
    on_gpus = settings.gpus is None and bool(resources.get("GPU"))
    devices, slots = cluster_slots(resources, settings, on_gpus)
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    backend = RayBackend(task, settings, on_gpus, write_mark(sweep_dir))
    cpus = resources.get("CPU", 0)
    if on_gpus:
        what = f"{len(devices)} GPU{'s' * (len(devices) > 1)}"
        if cpus // ray_of(settings).num_cpus < len(devices) * slots:
            log.warning(
                "hpsearch: the cluster's %g CPUs run at most %d jobs of ray.num_cpus=%g at once, "
                "fewer than its GPUs' %d slots: the others wait in Ray's queue; lower "
                "hydra.launcher.ray.num_cpus to run them",
                cpus,
                cpus // ray_of(settings).num_cpus,
                ray_of(settings).num_cpus,
                len(devices) * slots,
            )
    else:
        what = f"{cpus:g} CPUs"

    return RayExecution(
        backend,
        devices,
        slots,
        f"Ray ({nodes} node{'s' * (nodes > 1)}, {what})",
        settings,
        {},
        max(1, round(ray_of(settings).num_cpus)) * slots,
        on_gpus=on_gpus,
    )


@dataclass
class RayExecution(Execution):
    """Jobs as Ray tasks; the slots grow with the cluster (nodes that join mid-sweep)."""

    on_gpus: bool = False

    def grown(self) -> tuple[tuple[str, ...], int]:
        import ray

        return cluster_slots(ray.cluster_resources(), self.settings, self.on_gpus)


def cluster_slots(
    resources: Mapping[str, float], settings: LauncherSettings, on_gpus: bool
) -> tuple[tuple[str, ...], int]:
    """The sweep's slots on a cluster with these resources: on GPUs, a group of jobs_per_gpu
    per GPU ("ray:0", ...: never more jobs at once than the GPUs hold, and a job retried
    alone takes a whole group); without, the CPUs / ray.num_cpus on one device."""
    if on_gpus:
        gpus = max(1, int(resources.get("GPU", 0)))
        return tuple(f"{RAY_DEVICE}{i}" for i in range(gpus)), settings.jobs_per_gpu
    return (CPU,), max(1, int(resources.get("CPU", 0) // ray_of(settings).num_cpus))


def connect(settings: LauncherSettings) -> None:
    """ray.init as hydra.launcher.ray says, unless this process is connected already (an earlier
    batch of the same sweep: Optuna launches one at a time).

    Ray stays up until this process exits (ray.init's own exit handler stops a Ray it
    started, and disconnects from a cluster): a sweep of many batches starts it once.
    """
    import ray

    if ray.is_initialized():
        return
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    address = ray_of(settings).address
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            # Ray starts its workers at nice 15, and a job inherits it: beside any other work
            # the job gets a sliver of the CPU (4 TensorFlow jobs took 5x as long as alone).
            # A Ray of the sweep's own runs them at the sweep's priority, as the local backend
            # does; ray.init._system_config, if given, has the last word.
            init = dict(ray_of(settings).init)
            system = {"worker_niceness": os.nice(0), **init.pop("_system_config", {})}
            ray.init(
                address="local", include_dashboard=False, _system_config=system, **quiet, **init
            )
    except Exception as err:
        if address:
            raise LauncherSettingsError(
                f"hydra.launcher.ray.address={address!r}: no Ray cluster reached "
                f"({type(err).__name__}: {first_line(err)}); start one (ray start --head), "
                "set RAY_AUTH_MODE=token if it uses Ray's token authentication (Ray 2.60 "
                "has it on by default; `auto` finds the token itself), or leave ray.address "
                "empty for a Ray of the sweep's own"
            ) from err
        raise LauncherSettingsError(
            f"hydra.launcher.ray.init={dict(ray_of(settings).init)}: Ray did not start "
            f"({type(err).__name__}: {first_line(err)})"
        ) from err
