"""The fork server's side (`warm_start: fork`): one process per sweep that has imported what the
jobs need and forks each job's process from itself.

    python -c BOOT SYS_PATH_JSON TASK_FILE EARLY_LOG PRELOAD_JSON STATUS_FD CONTROL_FD

It is spawned as a spare is (execute.job.child: its own session, its output in EARLY_LOG), unpickles
the task (importing its module), imports the PRELOAD modules, and says on STATUS_FD what a spare
says (`preloading`, `preloaded`, `failed`, `ready`). It never runs a job, an op or a device call.
Then it serves messages on CONTROL_FD, a SOCK_SEQPACKET socket to the sweep (execute.job.wire's
control messages): `More` (import these too), `Ahead` (keep this many processes forked ahead),
`Fork` (with one fd passed: the job's status pipe), answered `Forked`, or `Refused` when forking
is no longer safe (fork_unsafe); and it tells `Exited` of each job's process it reaped.

A job's process is one forked ahead, waiting, handed the job; else one forked for it then
(execute.local.fork_child). Either sheds what is the server's (its control socket, its status pipe,
its stdin) and has a watchdog that ends it if the server (so the sweep) dies; one forked ahead
has done that, and its fork, while the slots were busy: a freed slot's job starts that much
sooner. A process forked ahead waits in the server's process group (ended with it), and is
dismissed when modules are learned (it would lack them) or no job is left to start.

The server ends when the sweep closes the socket or dies (its watchdog, as a spare's).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from ..job.child import discover_hydra_plugins, redirect
from ..job.child import start_parent_watchdog as start_watchdog
from ..job.child_status import StatusPipe, preload_modules
from ..job.wire import (
    MESSAGE_MAX,
    Ahead,
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
from .fork_child import FAILED_BEFORE_TASK, become_job, failed_before_task, wait_for_job

BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from hpsearch_launcher.execute.local.fork_server import main; "
    "main(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))"
)
REAP_POLL_S = 0.02  # while it imports, how often the server looks for children that ended


def main(
    task_file: str, early_log: str, preload: list[str], status_fd: int, control_fd: int
) -> None:
    sweep = int(os.environ.get("HPSEARCH_PARENT_PID") or os.getppid())
    start_watchdog(sweep)  # it sleeps, holding nothing a child could need: safe across a fork
    redirect(early_log, early_log)
    status = StatusPipe(status_fd)
    control = socket.socket(fileno=control_fd)
    control.set_inheritable(False)
    own_threads = {t.ident for t in threading.enumerate()}
    import cloudpickle

    with open(task_file, "rb") as f:
        task = cloudpickle.load(f)
    discover_hydra_plugins()
    preload_modules(preload, status)
    warm_parser()
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
        status: StatusPipe,
        control: socket.socket,
        own_threads: set[int | None],
    ) -> None:
        self.task = task
        self.status = status
        self.control = control
        self.own_threads = own_threads
        self.sweep = int(os.environ.get("HPSEARCH_PARENT_PID") or os.getppid())
        self.wake_r, self.wake_w = os.pipe()
        self.wanted = 0  # processes to keep forked ahead (`Ahead`)
        # Those forked ahead, waiting for a job: pid -> this end of the socket it is handed one on.
        self.ahead: dict[int, socket.socket] = {}

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
            self._keep_ahead()

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
            self._dismiss_ahead(len(self.ahead))  # they would lack the modules
            with self._reaping():  # a job that ends meanwhile frees its slot now, not after
                preload_modules(message.modules, self.status)
            self.status.send(StatusLine(Said.THREADS, threads=native_threads()))
        elif isinstance(message, Ahead):
            self.wanted = max(0, message.count)
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
            if pid in self.ahead:  # it never had a job: the sweep never heard of it
                self.ahead.pop(pid).close()
                continue
            self._tell(Exited(pid=pid, code=os.waitstatus_to_exitcode(wait_status)))

    def _fork(self, message: Fork, status_fd: int) -> None:
        """The job's process: one forked ahead, handed the job, else one forked for it now."""
        why = fork_unsafe(self.own_threads)
        if why is not None:
            os.close(status_fd)
            self._dismiss_ahead(len(self.ahead))
            self._tell(Refused(id=message.id, why=why))
            return
        pid = self._hand_ahead(message, status_fd)
        if pid is None:
            pid = self._fork_child(functools.partial(become_job, self.task, message, status_fd))
        os.close(status_fd)
        self._tell(Forked(id=message.id, pid=pid))

    def _hand_ahead(self, message: Fork, status_fd: int) -> int | None:
        """Hand the job to a process forked ahead: its pid; None if none is waiting."""
        while self.ahead:
            pid, handed = self.ahead.popitem()
            try:
                socket.send_fds(handed, [encode(message)], [status_fd])
            except OSError:  # it died meanwhile (reaped later, unheard of)
                continue
            finally:
                handed.close()
            return pid
        return None

    def _keep_ahead(self) -> None:
        """As many processes forked ahead as the sweep wants, while forking is safe."""
        if len(self.ahead) > self.wanted:
            self._dismiss_ahead(len(self.ahead) - self.wanted)
        while len(self.ahead) < self.wanted and fork_unsafe(self.own_threads) is None:
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = self._fork_child(functools.partial(_wait_ahead, self.task, mine, theirs))
            theirs.close()
            self.ahead[pid] = mine

    def _dismiss_ahead(self, count: int) -> None:
        """End `count` of the processes forked ahead: their sockets closed, each exits."""
        for pid in list(self.ahead)[:count]:
            self.ahead.pop(pid).close()

    def _fork_child(self, then: Callable[[], NoReturn]) -> int:
        """Fork a child that sheds what is the server's and runs `then` (which never returns);
        its pid."""
        # What the server made so far is never collected: a child's collections then leave
        # its pages shared (no write to each object's GC header), as gc.freeze's docs advise.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            try:
                self._leave_server()
                then()  # never returns: the job's own run ends its process (run_job_file)
            except BaseException as err:
                failed_before_task(err)
            finally:
                os._exit(FAILED_BEFORE_TASK)  # if even saying why failed
        return pid

    def _leave_server(self) -> None:
        """In a forked child: what is the server's closed, no input, a watchdog on the server."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.wake_r, self.wake_w, self.control.detach()):
            os.close(fd)
        for handed in self.ahead.values():  # the others' sockets: each must see its own end
            handed.close()
        null = os.open(os.devnull, os.O_RDONLY)  # as a spawned job's stdin ends: no input
        os.dup2(null, 0)
        os.close(null)
        os.close(self.status.fd)  # the server's status pipe is not the job's
        # It ends with the sweep: its parent is the server (which ends with the sweep), or,
        # once the server is gone, the sweep itself, its subreaper (execute.local.leftovers).
        start_watchdog(os.getppid(), self.sweep)


def _wait_ahead(task: Any, mine: socket.socket, theirs: socket.socket) -> NoReturn:
    """In a child forked ahead: only the server holds its end of the socket (so closing it
    ends this process); wait for a job on this one."""
    mine.close()
    wait_for_job(task, theirs)


def warm_parser() -> None:
    """Parse an interpolation once, as each job's Hydra does for its log file's path
    (`${hydra.runtime.output_dir}/${hydra.job.name}.log`): OmegaConf's parser builds its
    tables at its first parse (~4 ms here), which every forked job would otherwise repeat."""
    from omegaconf import grammar_parser

    grammar_parser.parse("${hydra.runtime.output_dir}/${hydra.job.name}.log")
