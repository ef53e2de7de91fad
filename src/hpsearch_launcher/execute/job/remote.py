"""What any remote backend needs, whichever cluster runs the jobs (Ray's, SLURM's): the mark
that proves a node shares the sweep dir (`write_mark` on the driver, `sweep_dir_problem` on the
node), the job's environment on its node (`node_env`), the node's measure of the job's GPU
memory (`PeakMeter`: the sweep cannot ask another machine's NVML), and the job's run on its node
from all of these (`run_here`).

Light on purpose: a remote worker imports it before its job (psutil only once a meter samples).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ... import contract, nvml
from ...atomic import write_json_atomic, write_text_atomic
from ...outcome import TaskEnd, TaskResult
from ...record.reports import reported_peak_mb
from .wire import Ticket

MARK = ".hpsearch-sweep"  # in the sweep dir: a node that cannot read it does not share it


@dataclasses.dataclass(frozen=True)
class RemoteTicket(Ticket):
    """A job's ticket for a cluster's worker (Ray's, SLURM's), which hands its result back."""

    started: str = ""  # the file the worker writes where it runs, when the job begins
    cwd: str = ""  # where the sweep started; the job works there
    sys_path: tuple[str, ...] = ()  # the sweep's sys.path, put first on the worker's


def write_mark(sweep_dir: Path) -> tuple[str, str]:
    """A file only this sweep wrote, in its sweep dir: a node that reads it shares the dir."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path, token = sweep_dir / MARK, secrets.token_hex(16)
    write_text_atomic(path, token)
    return os.path.abspath(path), token  # as the user named it: other nodes mount that path


def kept_mark(sweep_dir: Path) -> tuple[str, str]:
    """The mark an earlier run of the sweep wrote, kept where it is there (a job that run
    left queued, adopted by this one, checks it when it starts), else a new one. Only one
    sweep holds the sweep dir at a time (its lock): the earlier run is gone."""
    path = sweep_dir / MARK
    try:
        token = path.read_text()
    except OSError:
        return write_mark(sweep_dir)
    return (os.path.abspath(path), token) if token else write_mark(sweep_dir)


class PeakMeter:
    """The most GPU memory this worker's process tree holds on `gpu` while its job runs, as
    this node's NVML sees it (the sweep cannot ask another machine's NVML)."""

    def __init__(self, gpu: str, period_s: float = 0.5) -> None:
        self.gpu, self.period_s, self.peak = gpu, period_s, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="hpsearch-peak", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while True:
            try:
                pids = [me.pid, *(c.pid for c in me.children(recursive=True))]
            except psutil.Error:
                pids = [me.pid]
            memory = nvml.nvml_memory(self.gpu, pids)
            if memory is not None:
                self.peak = max(self.peak, memory.ours)
            if self._done.wait(self.period_s):
                return

    def record(self, path: Path) -> None:
        """Stop; write the peak and the job's cap beside its reports (the task's own word on
        its peak, if it gave one there, counts if larger)."""
        self._done.set()
        self._thread.join(timeout=5)
        peak = max(self.peak, reported_peak_mb(path))
        cap = os.environ.get(contract.MEMORY_LIMIT_MB)
        data: dict[str, int] = {"peak_mb": peak} if peak else {}
        if cap:
            data["cap_mb"] = int(cap)
        if data:
            write_json_atomic(path, data)


def node_env(
    env: Mapping[str, str], gpus: Sequence[str], total_mb: Callable[[str], int | None]
) -> dict[str, str]:
    """The job's environment on its node: the sweep's, plus the GPU Ray assigned and, where
    this node's NVML knows that GPU's size, the job's cap in MB. Without a GPU, CUDA sees none
    (Ray leaves CUDA_VISIBLE_DEVICES alone for a task that asked for no GPU)."""
    env = dict(env)
    if not gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
        return env
    env[contract.GPU_ID] = ",".join(gpus)
    fraction = env.get(contract.MEMORY_FRACTION)
    total = total_mb(gpus[0]) if fraction else None
    if fraction and total is not None:
        env[contract.MEMORY_LIMIT_MB] = str(contract.memory_limit_mb(float(fraction), total))
    return env


def sweep_dir_problem(mark: tuple[str, str], stderr_path: str, cwd: str) -> str:
    """Why this node cannot run a job of the sweep ("" if it can): it has no directory `cwd`
    (where the sweep started: the job works there, as a local job does, so relative paths
    mean the same), does not see the sweep dir the sweep wrote its mark in, or cannot write
    the job's log there. On success the process is in `cwd`."""
    try:
        os.chdir(cwd)
    except OSError as err:
        return (
            f"this node has no directory {cwd}, where the sweep started ({err.strerror}): "
            "relative paths (hydra.sweep.dir, data files) would mean something else here; "
            "start the sweep from a directory every node mounts at the same path"
        )
    path, token = mark
    try:
        seen = Path(path).read_text()
    except OSError as err:
        seen = f"<{type(err).__name__}>"
    if seen != token:
        state = "missing" if seen.startswith("<") else "another sweep's"
        return (
            f"this node does not see the sweep dir {Path(path).parent} (the sweep's mark file "
            f"{Path(path).name} is {state} here): put hydra.sweep.dir on a filesystem every "
            "node mounts at the same path"
        )
    try:
        with open(stderr_path, "a"):
            pass
    except OSError as err:
        return f"this node cannot write the job's log {stderr_path}: {err}"
    return ""


def run_here(
    task: bytes | Path,
    job: RemoteTicket,
    env: Mapping[str, str],
    gpus: Sequence[str],
    where: str,
    mark: tuple[str, str],
    watch: int | None = None,
) -> bytes:
    """Run one job in this fresh process on a cluster's node, on `gpus` (as the cluster gave
    them), `where` naming the place; its result pickled as the local backend's. `task`: the
    pickled task, or its file on the sweep dir; `watch`: a parent whose death ends the job's
    process group.

    The environment goes in before the task is unpickled (which imports the app's modules,
    TensorFlow included): CUDA, TensorFlow and JAX read it once, at start.
    """
    import cloudpickle

    problem = sweep_dir_problem(mark, job.stderr, job.cwd)
    if problem:
        return cloudpickle.dumps(TaskResult(TaskEnd.UNREACHABLE, detail=problem))
    # The sweep's clock for hydra.launcher.timeout starts now; and should this process die,
    # the sweep still knows where it ran.
    Path(job.started).write_text(where)
    os.environ.update(node_env(env, gpus, nvml.nvml_total_mb))
    sys.path[:0] = [p for p in job.sys_path if p not in sys.path]
    from .child import redirect, result_bytes, run_task, start_parent_watchdog

    if watch is not None:
        start_parent_watchdog(watch)
    redirect(job.stdout, job.stderr)
    pickled = task.read_bytes() if isinstance(task, Path) else task
    hydra_context, task_function, singleton_state = cloudpickle.loads(pickled)
    config = cloudpickle.loads(job.config)
    meter = PeakMeter(gpus[0]) if gpus else None
    try:
        result = run_task(hydra_context, config, task_function, singleton_state, job.subdir)
    finally:
        if meter is not None:
            meter.record(Path(job.stderr).parent / contract.GPU_PEAK_FILE)
    return result_bytes(result)
