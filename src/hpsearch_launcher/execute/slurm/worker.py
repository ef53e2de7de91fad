"""The SLURM backend's job side: the function submitit runs in the fresh process srun started
for one job. It finds where it runs (its node, the GPUs SLURM allocated), then runs the job as
every remote backend's job runs (execute.job.remote's `run_here`). Light: submitit imports this
module in the job's process before the function runs."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..job.remote import RemoteTicket, run_here


def run_in_slurm(
    task_file: str,
    ticket: Mapping[str, Any],
    env: Mapping[str, str],
    mark: tuple[str, str],
    on_gpus: bool,
) -> tuple[str, bytes]:
    """Run one job here; return (where it ran, its result pickled as the local backend's).
    `on_gpus`: the job asked SLURM for GPUs, whose CUDA_VISIBLE_DEVICES it set (without,
    the variable may be the sweep's own, which sbatch passes on: it is not this job's)."""
    # submitit's job side ignores SIGTERM (it waits for SLURM's SIGKILL, for its own requeue
    # handling): scancel's SIGTERM ends a job here at once, as the local backend's does. And
    # its handler of the warning signal_delay_s before the time limit (USR2) raises into a
    # task that is not submitit-checkpointable, failing it: ignored here, the job runs on
    # until SLURM ends it at its limit (TIMEOUT), and the sweep runs it again within
    # max_num_timeout. A task may still set its own handler.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    warning = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    signal.signal(getattr(signal, f"SIG{warning}", signal.SIGUSR2), signal.SIG_IGN)
    job = RemoteTicket.from_dict(ticket, "a SLURM job ticket")
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "") if on_gpus else ""
    gpus = [g for g in listed.split(",") if g]
    job_id = os.environ.get("SLURM_JOB_ID", "?")
    where = f"{','.join(gpus) or 'cpu'}@{socket.gethostname()}/{job_id}"
    return where, run_here(Path(task_file), job, env, gpus, where, mark)
