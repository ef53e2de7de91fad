"""The job's side: the first code that runs in the fresh process created for one job.

    python -c BOOT SYS_PATH_JSON TASK_FILE EARLY_LOG PRELOAD_JSON READY_FD

Order matters. The process (already its own session, so Ctrl-C reaches only the sweep, which
then ends the jobs in order) starts the watchdog that ends it if the sweep dies, points file
descriptors 1 and 2 at EARLY_LOG, and only then unpickles the task (which imports its module),
so even import-time output is kept, and imports the PRELOAD modules (a warm spare's: e.g.
TensorFlow; it touches no GPU). Then it reads one line from stdin, the path of its job file:
at once for a cold process, when its slot frees for a spare (an empty line ends a spare that
got no job). It points fd 1 and 2 at the job's own log files (EARLY_LOG's content goes first
into the job's stderr.log), runs the job with Hydra's `run_job`, writes the outcome to the
result file atomically and exits. One process, one job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from typing import Any

from ..contract import REPORTS, REPORTS_FILE
from ..outcome import TaskEnd, TaskResult

WATCHDOG_PERIOD_S = 0.5
# Run by `python -c`: puts the sweep's sys.path in place before anything else is imported.
BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from hpsearch_launcher.execute.child import main; "
    "main(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5]))"
)


def main(task_file: str, early_log: str, preload: list[str], ready_fd: int = -1) -> None:
    _start_parent_watchdog(int(os.environ.get("HPSEARCH_PARENT_PID") or os.getppid()))
    redirect(early_log, early_log)
    import cloudpickle

    with open(task_file, "rb") as f:
        hydra_context, task_function, singleton_state = cloudpickle.load(f)
    _preload(preload)
    if ready_fd >= 0:  # a spare tells the sweep it is ready: its imports are done
        with contextlib.suppress(OSError):  # already handed its job: nobody reads any more
            os.write(ready_fd, b"r")
        os.close(ready_fd)
    job_file = sys.stdin.readline().strip()
    if not job_file:  # the sweep ended this process before giving it a job
        os._exit(0)
    with open(job_file, "rb") as f:
        job = cloudpickle.load(f)
    redirect(job["stdout"], job["stderr"], keep=early_log)
    config = cloudpickle.loads(job["config"])
    result = run_task(hydra_context, config, task_function, singleton_state, job["subdir"])
    _write_result(job["result"], result_bytes(result))
    _exit_quickly()


def _exit_quickly() -> None:
    """Exit as Python would, without tearing the interpreter down.

    The job's slot frees only when this process is gone (then its GPU memory is), and
    finalising an interpreter that loaded TensorFlow takes ~0.7 s a job. So: run the atexit
    handlers (logging, TensorBoard writers and the like flush there), flush every file still
    open for writing (a task that never closed one keeps its data), then end the process.
    """
    import atexit
    import gc
    import io

    atexit._run_exitfuncs()
    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase):
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except Exception:  # a broken file must not keep the others unflushed
                continue
    os._exit(0)


def _preload(modules: list[str]) -> None:
    """Import what the job will need, ahead of it; a failure is the job's to meet, not ours."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as err:
            print(f"hpsearch: preload {name}: {type(err).__name__}: {err}", file=sys.stderr)


def run_task(
    hydra_context: Any, sweep_config: Any, task_function: Any, singleton_state: Any, subdir: str
) -> TaskResult:
    """Run the job as Hydra's own launchers do, in the run dir `subdir` the sweep claimed for
    it ("": where its config says); what happened, as a TaskResult."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals
    from omegaconf import read_write

    setup_globals()
    Singleton.set_state(singleton_state)
    if subdir:
        with read_write(sweep_config.hydra):
            sweep_config.hydra.sweep.subdir = subdir
    # The report channel (hpsearch_launcher.report) writes into the job's run dir.
    run_dir = os.path.join(str(sweep_config.hydra.sweep.dir), str(sweep_config.hydra.sweep.subdir))
    os.environ[REPORTS] = os.path.abspath(os.path.join(run_dir, REPORTS_FILE))
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
        detail = "" if isinstance(exc.code, int) or exc.code is None else str(exc.code)
        return TaskResult(TaskEnd.EXITED, code=code, detail=detail)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    if ret.status == JobStatus.FAILED:
        import traceback

        error = ret._return_value
        # The traceback stays here, in the job's stderr log; the parent gets a picklable error.
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        sys.stderr.flush()
        ret._return_value = _picklable_error(error)
        return TaskResult(TaskEnd.RAISED, ret, detail=f"{type(error).__name__}: {error}")
    return TaskResult(TaskEnd.RETURNED, ret)


def result_bytes(result: TaskResult) -> bytes:
    """The result pickled; an unpicklable return value is handed back as its description."""
    import cloudpickle

    try:
        return bytes(cloudpickle.dumps(result))
    except Exception as err:
        ret = result.job_return
        value = ret._return_value
        ret._return_value = f"<unpicklable {type(value).__name__}: {_short_repr(value)}>"
        note = dataclasses.replace(result, detail=f"{type(err).__name__}: {err}")
        return bytes(cloudpickle.dumps(note))


def _write_result(path: str, data: bytes) -> None:
    """Write beside `path`, then rename: the sweep never reads half a result."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _picklable_error(error: BaseException) -> BaseException:
    import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def redirect(stdout_path: str, stderr_path: str, keep: str | None = None) -> None:
    """Point fd 1 and 2 (and sys.stdout/err) at the files; `keep`'s content goes first into the
    new stderr file, and `keep` is removed, unless it is that file."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    if keep is not None and keep != stderr_path:
        with open(keep, "rb") as src, open(stderr_path, "ab") as dst:
            dst.write(src.read())
        os.unlink(keep)
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
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
