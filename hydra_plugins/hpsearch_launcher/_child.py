"""The job's side: runs first thing in the fresh process that loky starts for one job.

Order matters. The process leaves the sweep's terminal process group (so Ctrl-C reaches only
the parent, which then ends the jobs in order), starts the watchdog that ends it if the sweep
dies, points file descriptors 1 and 2 at the job's log files (TensorFlow's C++ logs included),
and only then unpickles the task, so even the task module's import-time output is captured.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

import cloudpickle

WATCHDOG_PERIOD_S = 0.5


@dataclass(frozen=True)
class ChildFailure:
    """Why a job failed when its task did not return: picklable, plain text."""

    reason: str


def run_job_in_child(payload: bytes, stdout_path: str, stderr_path: str, parent_pid: int) -> Any:
    """Run one Hydra job; return its JobReturn (or a ChildFailure for SystemExit)."""
    os.setsid()
    _start_parent_watchdog(parent_pid)
    _redirect(stdout_path, stderr_path)
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals

    hydra_context, sweep_config, task_function, singleton_state = cloudpickle.loads(payload)
    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(sweep_config)
    try:
        ret = run_job(
            hydra_context=hydra_context,
            config=sweep_config,
            task_function=task_function,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        detail = "" if isinstance(exc.code, int) or exc.code is None else f": {exc.code}"
        return ChildFailure(f"exited with status {code}{detail}")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    if ret.status == JobStatus.FAILED:
        error = ret._return_value
        # The traceback stays here, in the job's stderr log; the parent gets a picklable error.
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        sys.stderr.flush()
        ret._return_value = _picklable(error)
    return ret


def _picklable(error: BaseException) -> BaseException:
    try:
        cloudpickle.loads(cloudpickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def _redirect(stdout_path: str, stderr_path: str) -> None:
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - fd 1 lives on
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _start_parent_watchdog(parent_pid: int) -> None:
    """End this job's whole process group when the sweep process dies (SIGKILL included):
    an orphaned job would go on holding its GPU memory."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCHDOG_PERIOD_S)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="hpsearch-parent-watchdog", daemon=True).start()
