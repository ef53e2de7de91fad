"""The fork server as the sweep sees it (`warm_start: fork`; its own side:
execute.local.fork_server): a spawned process, watched as a spare is, that forks each job's
process on request.

A forked process is not the sweep's child: the server reaps it and tells its exit status, and
`ForkedProcess` (execute.local.forked_process) stands in for the `subprocess.Popen` a spawned
job has.
No job depends on the server's health: the sweep sees each job's end itself (a pidfd), and if
the server dies, is stopped or hangs, its jobs go on, adopted by the sweep (their subreaper),
which reaps them; the sweep falls back to spawning (execute.local.fork_policy)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from ..job.wire import (
    MESSAGE_MAX,
    Ahead,
    Control,
    Exited,
    Fork,
    Forked,
    More,
    Refused,
    WireError,
    decode,
    encode,
)
from .forked_process import ENDED_POLL_S, ForkedProcess, is_stopped
from .spare import Spare

log = logging.getLogger("hpsearch.launcher")
# A fork answered later than this (s) means a server that no longer serves.
FORK_ANSWER_S = 10.0
# A forked child that has not said `started` this long (s) after its fork is killed, and the
# sweep goes back to spawned spares (HPSEARCH_FORK_READY_TIMEOUT in the sweep's environment).
FORK_READY_S = float(os.environ.get("HPSEARCH_FORK_READY_TIMEOUT", "30"))


class ForkRefused(Exception):
    """The server would not (or could not) fork a job; the message says why."""


class ForkServer:
    """The server's process (as a Spare: its preload lines are heard as a spare's), its control
    socket, and the children it forked that have not ended."""

    def __init__(
        self,
        spare: Spare,
        control: socket.socket,
        env: Mapping[str, str],
        adopt: Callable[[int], None],
        unreaped: Callable[[int], None],
    ) -> None:
        self.spare = spare
        self.control = control
        self.env = dict(env)  # the environment it was spawned with (its first slot's)
        # Told each job's pid as it is forked: the sweep waits for it itself
        # (execute.local.leftovers).
        self._adopt = adopt
        self._unreaped = unreaped  # told of a job's exit the server did not reap in time
        self.threads: int | None = None  # its native threads, as it last said
        self._asked: dict[int, Future[ForkedProcess]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._ahead = 0  # processes the server was told to keep forked ahead
        self._reader = threading.Thread(target=self._read, name="hpsearch-fork-server", daemon=True)
        self._reader.start()

    def ready(self) -> bool:
        return self.spare.batches <= 0 and self.spare.proc.poll() is None

    def busy(self) -> bool:
        """Whether a child it forked still runs."""
        with self._lock:
            return bool(self._children)

    def ask_more(self, modules: list[str]) -> None:
        """Have the server import `modules` too (learned since it was made)."""
        if self._send(More(modules=tuple(modules))):
            self.spare.has.update(modules)
            self.spare.batches += 1

    def keep_ahead(self, count: int) -> None:
        """Have the server keep `count` processes forked ahead (told only when it changes)."""
        if count != self._ahead and self._send(Ahead(count=count)):
            self._ahead = count

    def fork(self, job_file: str, env: Mapping[str, str]) -> tuple[ForkedProcess, int]:
        """Fork the job's process: it and the read end of its status pipe; ForkRefused if the
        server refuses, is gone, or does not answer."""
        read_end, write_end = os.pipe()
        with self._lock:
            self._count += 1
            number = self._count
            asked = self._asked[number] = Future()
        unset = tuple(k for k in self.env if k not in env)
        message = Fork(id=number, job=job_file, env=dict(env), unset=unset)
        try:
            sent = self._send(message, write_end)
        finally:
            os.close(write_end)
        try:
            if not sent:
                raise ForkRefused("the fork server is gone")
            try:
                child = self._answer(asked)
            except (FutureTimeout, ForkRefused) as err:
                with self._lock:  # a later answer's child is killed (_read): the job runs cold
                    self._asked.pop(number, None)
                if not asked.done():
                    raise ForkRefused(
                        str(err) or f"the fork server did not answer within {FORK_ANSWER_S:g} s"
                    ) from None
                child = asked.result()  # answered meanwhile
        except BaseException:
            os.close(read_end)
            raise
        return child, read_end

    def _answer(self, asked: Future[ForkedProcess]) -> ForkedProcess:
        """The server's answer to a fork; FutureTimeout past FORK_ANSWER_S, ForkRefused at
        once if the server is stopped (it would answer no sooner than it is continued)."""
        deadline = time.monotonic() + FORK_ANSWER_S
        while True:
            try:
                return asked.result(timeout=min(ENDED_POLL_S, deadline - time.monotonic()))
            except FutureTimeout:
                if time.monotonic() >= deadline:
                    raise
                if is_stopped(self.spare.proc.pid):
                    raise ForkRefused(
                        "the fork server is stopped (SIGSTOP, or a debugger)"
                    ) from None

    def _send(self, message: Control, fd: int | None = None) -> bool:
        try:
            socket.send_fds(self.control, [encode(message)], [] if fd is None else [fd])
        except OSError:
            return False
        return True

    def _read(self) -> None:
        """What the server tells: forks done or refused, children reaped."""
        while True:
            try:
                data = self.control.recv(MESSAGE_MAX)
            except OSError:
                data = b""
            if not data:
                break
            try:
                message = decode(data)
            except WireError as err:  # never the reader's end: later forks are still heard
                log.warning("hpsearch: the fork server said what is not ours: %s", err)
                continue
            with self._lock:
                if isinstance(message, Forked):  # registered here, before its `exited` can be
                    # read: a job that ends before fork() has its answer is still the one that ends
                    asked = self._asked.pop(message.id, None)
                    if asked is None:  # answered after fork() gave up: never run it twice
                        _kill_tree(message.pid)
                        continue
                    self._adopt(message.pid)
                    child = ForkedProcess(message.pid, self._unreaped)
                    self._children[message.pid] = child
                    asked.set_result(child)
                elif isinstance(message, Refused):  # dropped if fork() gave up (it runs cold)
                    refused = self._asked.pop(message.id, None)
                    if refused is not None:
                        refused.set_exception(ForkRefused(message.why))
                elif isinstance(message, Exited) and message.pid in self._children:
                    self._children.pop(message.pid).exited(message.code)
        self._orphaned()

    def _orphaned(self) -> None:
        """The server is gone: its children go on, adopted by the sweep (their subreaper), and
        each one's watcher reaps it (or, where the sweep could not adopt it, its watchdog ended
        it with the server, and it is taken as lost)."""
        with self._lock:
            for asked in self._asked.values():
                asked.set_exception(ForkRefused("the fork server is gone"))
            self._asked.clear()
            children, self._children = list(self._children.values()), {}
        for child in children:
            child.server_gone()

    def close(self) -> None:
        """End the server (it has no job: killed at once) and its socket."""
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)
        self.spare.status.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.spare.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.spare.proc.wait(timeout=5)
        self._reader.join(timeout=10)
        self.control.close()


def _kill_tree(pid: int) -> None:
    """SIGKILL a forked child and its group (the group is its own once it has called setsid)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
