"""A process the fork server forked, on its way to becoming one job's process.

Forked for a job at once (`become_job`), or ahead of one (`wait_for_job`): a process forked
while the slots were busy has done its fork, and shed what was the server's, before its job
comes; it waits in the server's process group (ended with it) until the server hands it a
`Fork` on its own socket, then becomes that job's process as one forked for it would.

Becoming the job's process: its own session, the job's environment (set before the task runs:
CUDA, TensorFlow, JAX and PyTorch read it at first device use), fresh random state, `started`
on its status pipe; then it runs exactly as a spawned job does (child.run_job_file).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ..job.child import LocalTicket, run_job_file
from ..job.child_status import StatusPipe
from ..job.subreaper import become_subreaper
from ..job.wire import MESSAGE_MAX, Fork, Said, StatusLine, WireError, decode

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# A forked process's exit status when it failed before its task began (EX_SOFTWARE); once it
# began, its status is what a spawned job's would be.
FAILED_BEFORE_TASK = 70


def wait_for_job(task: Any, handed: socket.socket) -> NoReturn:
    """Forked ahead: wait for the server to hand this process a job on `handed` (a `Fork` and
    the job's status pipe), then become its process. The server closing its end (no job
    left, or modules learned that this process lacks) ends it."""
    try:
        data, fds, _, _ = socket.recv_fds(handed, MESSAGE_MAX, 1)
        message = decode(data) if data else None
    except (OSError, WireError):
        message = None
    handed.close()
    if not isinstance(message, Fork) or len(fds) != 1:
        os._exit(0)
    become_job(task, message, fds[0])


def become_job(task: Any, message: Fork, status_fd: int) -> NoReturn:
    """From a copy of the server (already rid of what was the server's) to the job's own fresh
    process; never returns. From run_job_file on it is as a spawned job's process: what the
    task (or the code around it) does comes back as it does from one."""
    try:
        os.setsid()  # its own session and process group: ended as a tree, Ctrl-C spared
        become_subreaper()  # what it starts stays in its tree (execute.local.leftovers)
        apply_env(message.env, message.unset)
        status = StatusPipe(status_fd)
        reseed()
        status.send(StatusLine(Said.STARTED))
    except BaseException as err:
        failed_before_task(err, message.job)
    run_job_file(message.job, task, status)


def failed_before_task(error: BaseException, job_file: str | None = None) -> NoReturn:
    """End a forked process whose task never began, with FAILED_BEFORE_TASK: the traceback
    and a line that says so in the job's stderr.log (`job_file`'s ticket names it) where it
    can be read, else on this process's stderr (the fork server's early log)."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    text += (
        f"hpsearch: error: the forked process failed before its task began "
        f"(exit status {FAILED_BEFORE_TASK}): {traceback.format_exception_only(error)[-1]}"
    )
    with contextlib.suppress(Exception):
        stderr = (
            LocalTicket.from_bytes(Path(job_file).read_bytes(), job_file).stderr if job_file else ""
        )
        with open(stderr or 2, "a", closefd=bool(stderr)) as log:
            log.write(text)
    os._exit(FAILED_BEFORE_TASK)


def apply_env(env: Mapping[str, str], unset: Sequence[str]) -> None:
    """The job's environment, over the server's. CUDA, TensorFlow, JAX and PyTorch read theirs
    at first device use, which comes later; a BLAS already loaded has its thread count fixed,
    so it is set through threadpoolctl where that is installed."""
    changed = [v for v in THREAD_VARIABLES if os.environ.get(v) != env.get(v)]
    for name in unset:
        os.environ.pop(name, None)
    os.environ.update(env)
    threads = env.get("OMP_NUM_THREADS")
    if changed and threads and "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return
        threadpool_limits(int(threads))


def reseed() -> None:
    """Fresh random state from the OS, as a spawned process starts with: a forked child would
    otherwise repeat its siblings' streams. (Python's `random` reseeds itself at fork; NumPy's
    global generator does not; TensorFlow's global generator is made at first use, which the
    server never reached.) A task that seeds itself (cfg.seed) then gets what it gets spawned."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
