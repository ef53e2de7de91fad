"""A job's process that the fork server forked, as the sweep waits for it: the part of Popen's
interface the sweep uses (pid, poll, wait), its end seen by the sweep itself
(execute.local.fork_client: the server's side of the conversation)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from ..job.subreaper import stat_fields

# A forked job's process that has exited and that its server has not reaped (and told of) this
# long (s) means a server that is stopped or hung: it is killed, and the sweep reaps the job.
REAP_S = 2.0
ENDED_POLL_S = 0.1  # how often a forked job's watcher looks for the server's word, once it exited
# The longest a forked job's watcher sleeps while its process runs: its exit wakes it at once
# (the pidfd), so this bounds only a wait's own timeout and a server's disappearance.
WATCH_S = 1.0


class ForkedProcess:
    """A job's process forked by the server, with the part of Popen's interface the sweep uses.

    Its end is seen by the sweep itself, whatever the server does: a pidfd (Linux 5.3+) says
    when the process has exited; its exit status is the server's word (`Exited`) or, once the
    server is gone and the sweep, its subreaper, has adopted it, the sweep's own waitpid. An
    exit the server does not tell within REAP_S is `unreaped` (the server is stopped or hung).
    """

    def __init__(self, pid: int, unreaped: Callable[[int], None] = lambda pid: None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = None
        # Why its exit status is not known (it died with the fork server, and was not the
        # sweep's to reap); None: known, or not yet.
        self.lost: str | None = None
        self._ended = threading.Event()
        self._lock = threading.Lock()  # the server's reader and the job's watchers tell its end
        self._server_gone = False
        self._unreaped = unreaped
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # it has ended and been reaped already: the server tells it
            self._pidfd = None

    def exited(self, code: int, lost: str | None = None) -> None:
        """Its exit status (the first word on it counts: the server's, or the sweep's reap)."""
        with self._lock:
            if not self._ended.is_set():
                self.returncode, self.lost = code, lost
                self._ended.set()

    def server_gone(self) -> None:
        """Its server ended: the sweep reaps it now (or learns that nobody can say how it
        ended)."""
        self._server_gone = True

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        exited_at: float | None = None
        while not self._ended.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"forked job process {self.pid}", timeout or 0.0)
            step = WATCH_S if left is None else min(WATCH_S, left)
            if exited_at is None and self._exited(step):
                exited_at = time.monotonic()
            if exited_at is not None and not self._ended.is_set():
                self._reap(exited_at)
            elif self._pidfd is None or self._server_gone:
                self._ended.wait(step)
        self._close_pidfd()
        assert self.returncode is not None
        return self.returncode

    def _exited(self, within: float) -> bool:
        """Whether its process has exited (waiting up to `within` s to see)."""
        pidfd = self._pidfd
        if pidfd is None:
            return self._server_gone
        try:
            return bool(select.select([pidfd], [], [], within)[0])
        except (OSError, ValueError):  # another waiter closed it: it had ended
            return True

    def _reap(self, exited_at: float) -> None:
        """It has exited, and the server has not said so: reap it here if it is the sweep's
        child now; else wait a little for the server's word, and past REAP_S say it is
        unreaped (the server is then killed, and the sweep adopts it)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # the server's child, or reaped already
            pid = 0
            if self._server_gone:  # and its server is gone: init reaped it, nobody can say
                lost = "it ended with the fork server, which was not the sweep's to reap"
                self.exited(-signal.SIGKILL, lost)
                return
        if pid:
            self.exited(os.waitstatus_to_exitcode(status))
        elif self._ended.wait(ENDED_POLL_S) is False and time.monotonic() - exited_at > REAP_S:
            self._unreaped(self.pid)

    def _close_pidfd(self) -> None:
        with self._lock:  # closed once: a second close could close another file's new fd
            pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)


def is_stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, SIGTSTP, or traced), as /proc says."""
    return stat_fields(pid)[:1] in ([b"T"], [b"t"])
