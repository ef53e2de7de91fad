"""The fork server's side (`warm_start: fork`): one process per sweep that has imported what the
jobs need and forks each job's process from itself.

    python -c BOOT SYS_PATH_JSON TASK_FILE EARLY_LOG PRELOAD_JSON STATUS_FD CONTROL_FD

It is spawned as a spare is (execute.child: its own session, its output in EARLY_LOG), unpickles
the task (importing its module), imports the PRELOAD modules, and says on STATUS_FD what a spare
says (`preloading`, `preloaded`, `failed`, `ready`). It never runs a job, an op or a device call.
Then it serves messages on CONTROL_FD, a SOCK_SEQPACKET socket to the sweep (execute.wire's
control messages): `More` (import these too), `Fork` (with one fd passed: the job's status
pipe), answered `Forked`, or `Refused` when forking is no longer safe (fork_unsafe); and it
tells `Exited` of each child it reaped.

The forked child becomes the job's process: its own session, the job's environment (set before
the task runs: CUDA, TensorFlow, JAX and PyTorch read it at first device use), a watchdog that
ends it if the server (so the sweep) dies, fresh random state, the job's log files; it says
`started` on its status pipe, then runs exactly as a spawned job does (child.run_job_file).

The server ends when the sweep closes the socket or dies (its watchdog, as a spare's).
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .child import discover_hydra_plugins, redirect, run_job_file
from .child import start_parent_watchdog as start_watchdog
from .child_status import Status, preload_modules
from .wire import (
    MESSAGE_MAX,
    Control,
    Exited,
    Fork,
    Forked,
    More,
    Refused,
    Said,
    StatusLine,
    decode,
    encode,
)

BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from hpsearch_launcher.execute.fork_server import main; "
    "main(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))"
)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
REAP_POLL_S = 0.02  # while it imports, how often the server looks for children that ended


def main(
    task_file: str, early_log: str, preload: list[str], status_fd: int, control_fd: int
) -> None:
    sweep = int(os.environ.get("HPSEARCH_PARENT_PID") or os.getppid())
    start_watchdog(sweep)  # it sleeps, holding nothing a child could need: safe across a fork
    redirect(early_log, early_log)
    status = Status(status_fd)
    control = socket.socket(fileno=control_fd)
    control.set_inheritable(False)
    own_threads = {t.ident for t in threading.enumerate()}
    import cloudpickle

    with open(task_file, "rb") as f:
        task = cloudpickle.load(f)
    discover_hydra_plugins()
    preload_modules(preload, status)
    Server(task, status, control, own_threads).serve()


def fork_unsafe(own_threads: set[int | None]) -> str | None:
    """Why this process must not fork a job now; None if it may. A Python thread the task's
    module (or a preload) started would not exist in the child, and whatever lock it held
    stays held there; a CUDA context does not survive a fork (tensorflow #57877). Native
    threads are not refused: TensorFlow's and OpenBLAS's own (1 each at import) are made for
    fork; their count is told with `ready` (Server.serve)."""
    started = [t.name for t in threading.enumerate() if t.ident not in own_threads]
    if started:
        return f"the task's module started threads at import ({', '.join(started)})"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        initialized = bool(cuda is not None and cuda.is_initialized())
    except Exception:  # a partial or odd torch: it cannot say, so it holds none here
        initialized = False
    if initialized:
        return "it holds a CUDA context (torch.cuda.is_initialized())"
    return None


def native_threads() -> int:
    """This process's threads as the kernel counts them (native ones included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class Server:
    def __init__(
        self,
        task: Any,
        status: Status,
        control: socket.socket,
        own_threads: set[int | None],
    ) -> None:
        self.task = task
        self.status = status
        self.control = control
        self.own_threads = own_threads
        self.wake_r, self.wake_w = os.pipe()

    def serve(self) -> None:
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd says a child ended
        self.status.send(StatusLine(Said.THREADS, threads=native_threads()))
        while True:
            readable, _, _ = select.select([self.control.fileno(), self.wake_r], [], [])
            if self.wake_r in readable:
                while True:
                    try:
                        if not os.read(self.wake_r, 512):
                            break
                    except BlockingIOError:
                        break
            self._reap()
            if self.control.fileno() in readable and not self._answer():
                return

    def _answer(self) -> bool:
        """Answer one message; False once the sweep closed its end."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MESSAGE_MAX, 1)
        except ConnectionError:
            return False
        if not data:
            return False
        message = decode(data)
        if isinstance(message, More):
            with self._reaping():  # a job that ends meanwhile frees its slot now, not after
                preload_modules(message.modules, self.status)
            self.status.send(StatusLine(Said.THREADS, threads=native_threads()))
        elif isinstance(message, Fork):
            self._fork(message, fds[0])
        return True

    def _tell(self, message: Control) -> None:
        with contextlib.suppress(OSError):  # the sweep is gone: its watchdog ends this one
            self.control.send(encode(message))

    @contextlib.contextmanager
    def _reaping(self) -> Iterator[None]:
        """Children reaped (and told of) by a thread while the server imports: an import ahead
        takes seconds, or hangs until the sweep gives up on it, and meanwhile the sweep must
        still hear its jobs end. Nothing forks until the thread is gone (fork_unsafe)."""
        done = threading.Event()
        reaper = threading.Thread(target=self._reap_until, args=(done,), name="hpsearch-reaper")
        reaper.start()
        try:
            yield
        finally:
            done.set()
            reaper.join()

    def _reap_until(self, done: threading.Event) -> None:
        while not done.wait(REAP_POLL_S):
            self._reap()

    def _reap(self) -> None:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._tell(Exited(pid=pid, code=os.waitstatus_to_exitcode(wait_status)))

    def _fork(self, message: Fork, status_fd: int) -> None:
        why = fork_unsafe(self.own_threads)
        if why is not None:
            os.close(status_fd)
            self._tell(Refused(id=message.id, why=why))
            return
        # What the server made so far is never collected: a child's collections then leave
        # its pages shared (no write to each object's GC header), as gc.freeze's docs advise.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            try:
                self._become_job(message, status_fd)
            finally:
                os._exit(70)  # run_job_file never returns; an error before it is a failed start
        os.close(status_fd)
        self._tell(Forked(id=message.id, pid=pid))

    def _become_job(self, message: Fork, status_fd: int) -> None:
        """In the forked child: from a copy of the server to the job's own fresh process."""
        os.setsid()  # its own session and process group: ended as a tree, Ctrl-C spared
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.wake_r, self.wake_w, self.control.detach()):
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)  # as a spawned job's stdin ends: no input
        os.dup2(null, 0)
        os.close(null)
        os.close(self.status.fd)  # the server's status pipe is not the job's
        start_watchdog(os.getppid())  # the server: it ends with the sweep
        apply_env(message.env, message.unset)
        status = Status(status_fd)
        reseed()
        status.send(StatusLine(Said.STARTED))
        run_job_file(message.job, self.task, status)


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
