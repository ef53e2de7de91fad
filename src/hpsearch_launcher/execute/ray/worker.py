"""The Ray backend's worker side: the first code that runs in the fresh worker Ray made for
one job. It finds where it runs (Ray's GPUs, its node), then runs the job as every remote
backend's job runs (execute.job.remote's `run_here`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..job.remote import RemoteTicket, run_here


def run_on_node(
    task: bytes, ticket: Mapping[str, Any], env: Mapping[str, str], mark: tuple[str, str]
) -> tuple[str, bytes]:
    """Run one job here, its `ticket` a `RemoteTicket` as a dict; return (where it ran, its
    result pickled as the local backend's)."""
    import ray

    job = RemoteTicket.from_dict(ticket, "a Ray job ticket")
    gpus = [str(g) for g in ray.get_gpu_ids()]
    node = ray.get_runtime_context().get_node_id()
    where = f"{','.join(gpus) or 'cpu'}@{ray.util.get_node_ip_address()}/{node[:8]}"
    # Its parent is the raylet, and the sweep's own Ray ends with the sweep (SIGKILL too):
    # left to Ray, a worker notices in seconds (a minute on a loaded machine), and the job's
    # own children outlive it. The watchdog ends the group, children included (Ray makes each
    # worker its own group's leader).
    watch = os.getppid() if os.getpgid(0) == os.getpid() else None
    return where, run_here(task, job, env, gpus, where, mark, watch)
