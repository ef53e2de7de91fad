"""The job's side: the first code that runs in the fresh process created for one job.

    python -c BOOT SYS_PATH_JSON TASK_FILE EARLY_LOG PRELOAD_JSON STATUS_FD

Order matters. The process (already its own session, so Ctrl-C reaches only the sweep, which
then ends the jobs in order) starts the watchdog that ends it if the sweep dies, points file
descriptors 1 and 2 at EARLY_LOG, and only then unpickles the task (which imports its module),
so even import-time output is kept, and imports the PRELOAD modules (a warm spare's: e.g.
TensorFlow; it touches no GPU). Then it reads lines from stdin (execute.job.wire): more modules to
import ahead (learned while it waited), or the path of its job file (a `Ticket`): at once for
a cold process, when its slot frees for a spare (an empty line ends a spare that got no job).
It points fd 1 and 2 at the job's own log files (EARLY_LOG's content goes first into the
job's stderr.log), runs the job with Hydra's `run_job`, writes the outcome to the result file
atomically and exits. One process, one job. On STATUS_FD (a pipe to the sweep) it says what
execute.job.child_status sends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from ...atomic import write_json_atomic
from ...contract import END_FILE, REPORTS, REPORTS_FILE
from ...outcome import PackedJobReturn, TaskEnd, TaskResult
from ...text import short_repr
from .child_status import ImportWatch, StatusPipe, preload_modules
from .subreaper import become_subreaper, descendants
from .task_error import RaisedPastHydra, described, picklable_error, print_error
from .wire import Ticket, more_modules

WATCHDOG_PERIOD_S = 0.5
# Held while a returned task's end is written: the parent watchdog waits for it, so a sweep
# killed in that instant does not cost a job that ran to its end its end file.
_ENDING = threading.Lock()
# Run by `python -c`: puts the sweep's sys.path in place before anything else is imported.
BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from hpsearch_launcher.execute.job.child import main; "
    "main(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5]))"
)


def main(task_file: str, early_log: str, preload: list[str], status_fd: int = -1) -> None:
    start_parent_watchdog(int(os.environ.get("HPSEARCH_PARENT_PID") or os.getppid()))
    become_subreaper()  # what it starts stays in its tree (execute.local.leftovers)
    redirect(early_log, early_log)
    status = StatusPipe(status_fd)
    import cloudpickle

    with open(task_file, "rb") as f:
        task = cloudpickle.load(f)
    discover_hydra_plugins()
    preload_modules(preload, status)
    job_file = sys.stdin.readline()
    while (more := more_modules(job_file)) is not None:  # learned while this spare waited
        preload_modules(more, status)
        job_file = sys.stdin.readline()
    job_file = job_file.strip()
    if not job_file:  # the sweep ended this process before giving it a job
        os._exit(0)
    run_job_file(job_file, task, status, keep=early_log)


def discover_hydra_plugins() -> None:
    """Hydra's plugin scan, which every job's run begins with (Singleton.set_state), done ahead
    (0.1-0.2 s here): run_task keeps what it found."""
    from hydra.core.plugins import Plugins

    Plugins.instance()


@dataclasses.dataclass(frozen=True)
class LocalTicket(Ticket):
    """A job's ticket for a process of this machine (the local backend's, spawned or forked)."""

    result: str = ""  # the file its result is written to, before the process exits


def run_job_file(job_file: str, task: Any, status: StatusPipe, keep: str | None = None) -> NoReturn:
    """Run the job `job_file` names with `task` (the unpickled hydra context, task function
    and singleton state), its output in the job's own log files (`keep`'s content first),
    write its result and end the process: the same for a spawned process and a forked one.
    An error that escapes (ours, around the task) ends it as Python ends a script: its
    traceback on stderr, exit status 1."""
    try:
        import cloudpickle

        hydra_context, task_function, singleton_state = task
        watch = ImportWatch(status)
        job = LocalTicket.from_bytes(Path(job_file).read_bytes(), job_file)
        redirect(job.stdout, job.stderr, keep=keep)
        config = cloudpickle.loads(job.config)
        result = run_task(hydra_context, config, task_function, singleton_state, job.subdir)
        watch.check()  # what it imported last, told before the sweep sees the process end
        _write_result(job.result, result_bytes(result))
    except BaseException as err:
        print_error(err)
        _exit_quickly(1)
    _exit_quickly(0)


def _flush_stdio() -> None:
    """Flush what the task printed; a stream the task closed (fd 1 or 2) keeps its text."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _exit_quickly(code: int) -> NoReturn:
    """Exit as Python would, with status `code`, without tearing the interpreter down.

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
    os._exit(code)


def run_task(
    hydra_context: Any, sweep_config: Any, task_function: Any, singleton_state: Any, subdir: str
) -> TaskResult:
    """Run the job as Hydra's own launchers do, in the run dir `subdir` the sweep claimed for
    it ("": where its config says); what happened, as a TaskResult."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals
    from omegaconf import read_write

    setup_globals()
    Singleton.set_state(_plugins_kept(singleton_state))
    if subdir:
        with read_write(sweep_config.hydra):
            sweep_config.hydra.sweep.subdir = subdir
    overrides = list(sweep_config.hydra.overrides.task)
    try:
        ret = run_job(  # it sets the HydraConfig itself: each set deep-copies the config
            hydra_context=hydra_context,
            config=sweep_config,
            task_function=_in_run_dir(task_function, overrides),
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        detail = "" if isinstance(exc.code, int) or exc.code is None else str(exc.code)
        return TaskResult(TaskEnd.EXITED, code=code, detail=detail)
    finally:
        _flush_stdio()
    if ret.status == JobStatus.FAILED:
        return _raised(ret)
    return TaskResult(TaskEnd.RETURNED, ret)


def _plugins_kept(singleton_state: Any) -> Any:
    """The state leaves Plugins out, and set_state scans for them again (0.1 s here): the scan
    this process made ahead (discover_hydra_plugins) is the same sys.path's, so it is kept."""
    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton

    found = Singleton._instances.get(Plugins)
    if found is None:
        return singleton_state
    return {**singleton_state, "instances": {**singleton_state["instances"], Plugins: found}}


def _raised(ret: Any) -> TaskResult:
    """A task that raised: the traceback stays here, in the job's stderr log; the parent gets
    a picklable error."""
    error = ret._return_value
    if isinstance(error, RaisedPastHydra):
        error = error.raised
    print_error(error)
    ret._return_value = picklable_error(error)
    return TaskResult(TaskEnd.RAISED, ret, detail=described(error))


def _in_run_dir(task_function: Any, overrides: list[str]) -> Any:
    """`task_function` with the report channel (hpsearch_launcher.report) pointed into its run
    dir (where run_job put it), and its end written there the moment it returns (before Hydra's
    on_job_end callbacks, and before a watchdog that found the sweep dead may end the job)."""
    from hydra.core.hydra_config import HydraConfig

    @functools.wraps(task_function)
    def task(cfg: Any) -> Any:
        run_dir = str(HydraConfig.get().runtime.output_dir)
        os.environ[REPORTS] = os.path.join(run_dir, REPORTS_FILE)
        try:
            value = task_function(cfg)
        except (Exception, SystemExit):  # run_job catches the first, run_task the second
            raise
        except BaseException as err:
            raise RaisedPastHydra(err) from err
        with _ENDING:
            _write_end(run_dir, value, overrides)
        return value

    return task


def _write_end(run_dir: str, value: Any, overrides: list[str]) -> None:
    """The task's return value, in its run dir, whole or not at all: what a resumed sweep
    adopts if the sweep died before hearing of this end. Nothing for a value JSON cannot hold
    (such a job runs again, as resume does for it anyway)."""
    with contextlib.suppress(TypeError, ValueError, OSError):
        write_json_atomic(Path(run_dir) / END_FILE, {"return": value, "overrides": overrides})


def result_bytes(result: TaskResult) -> bytes:
    """The result pickled (its JobReturn's configs kept pickled apart: PackedJobReturn); an
    unpicklable return value is handed back as its description."""
    import cloudpickle

    if result.job_return is not None:
        result = dataclasses.replace(result, job_return=PackedJobReturn.pack(result.job_return))
    try:
        return bytes(cloudpickle.dumps(result))
    except Exception as err:
        ret = result.job_return
        value = ret._return_value
        ret._return_value = f"<unpicklable {type(value).__name__}: {short_repr(value, 200)}>"
        note = dataclasses.replace(result, detail=f"{type(err).__name__}: {err}")
        return bytes(cloudpickle.dumps(note))


def _write_result(path: str, data: bytes) -> None:
    """Write beside `path`, then rename: the sweep never reads half a result."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


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


def start_parent_watchdog(*parents: int) -> None:
    """End this job's whole process group when its parent, the sweep process, dies (SIGKILL
    included): an orphaned job would go on holding its GPU memory. A forked job's parent is
    the fork server, then the sweep (its subreaper) if the server dies first: `parents` are
    those it may have while the sweep lives. Its descendants that left its group (setsid)
    are killed first: it is their subreaper, so they are all still below it."""

    def watch() -> None:
        while os.getppid() in parents:
            time.sleep(WATCHDOG_PERIOD_S)
        with _ENDING:  # a task that returned has its end written first (milliseconds)
            for pid in descendants(os.getpid()):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="hpsearch-parent-watchdog", daemon=True).start()
