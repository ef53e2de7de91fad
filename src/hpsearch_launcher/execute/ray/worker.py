"""The Ray backend's worker side: the first code that runs in the fresh worker Ray made for
one job. It checks that this node shares the sweep dir, sets the job's environment, then runs
the job as the local backend's child does."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cloudpickle

from ... import contract, nvml
from ...outcome import TaskEnd, TaskResult
from ..job.remote import PeakMeter, node_env, sweep_dir_problem
from ..job.wire import Ticket


def run_on_node(
    task: bytes, ticket: Mapping[str, Any], env: Mapping[str, str], mark: tuple[str, str]
) -> tuple[str, bytes]:
    """Run one job here, its `ticket` execute.job.wire's `Ticket` as a dict; return (where it ran,
    its result pickled as the local backend's).

    The environment goes in before the task is unpickled (which imports the app's modules,
    TensorFlow included): CUDA, TensorFlow and JAX read it once, at start.
    """
    import ray

    job = Ticket.from_dict(ticket, "a Ray job ticket")
    gpus = [str(g) for g in ray.get_gpu_ids()]
    node = ray.get_runtime_context().get_node_id()
    where = f"{','.join(gpus) or 'cpu'}@{ray.util.get_node_ip_address()}/{node[:8]}"
    problem = sweep_dir_problem(mark, job.stderr, job.cwd)
    if problem:
        return where, cloudpickle.dumps(TaskResult(TaskEnd.UNREACHABLE, detail=problem))
    # The sweep's clock for hydra.launcher.timeout starts now; and should this process die,
    # the sweep still knows where it ran.
    Path(job.started).write_text(where)
    os.environ.update(node_env(env, gpus, nvml.nvml_total_mb))
    sys.path[:0] = [p for p in job.sys_path if p not in sys.path]
    from ..job.child import redirect, result_bytes, run_task, start_parent_watchdog

    if os.getpgid(0) == os.getpid():  # Ray makes each worker its own group's leader
        # Its parent is the raylet, and the sweep's own Ray ends with the sweep (SIGKILL too):
        # left to Ray, a worker notices in seconds (a minute on a loaded machine), and the
        # job's own children outlive it. The watchdog ends the group, children included.
        start_parent_watchdog(os.getppid())
    redirect(job.stdout, job.stderr)
    hydra_context, task_function, singleton_state = cloudpickle.loads(task)
    config = cloudpickle.loads(job.config)
    meter = PeakMeter(gpus[0]) if gpus else None
    try:
        result = run_task(hydra_context, config, task_function, singleton_state, job.subdir)
    finally:
        if meter is not None:
            meter.record(Path(job.stderr).parent / contract.GPU_PEAK_FILE)
    return where, result_bytes(result)
