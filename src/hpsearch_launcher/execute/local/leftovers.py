"""A job's leftover processes, ended with it: whatever a job's process started and left running
(a data loader's worker, a server it launched, a daemon that called setsid or double-forked).
On a GPU such a process keeps its memory after its job has ended: the very leak a fresh process
per job exists to prevent.

None escapes, because nobody's orphans go to init:
- each job's process is the child subreaper of its descendants while it runs (execute.job.child,
  `become_subreaper`): a daemon's double fork is reparented to the job, so it stays in the job's
  tree, and never reaches the sweep while its job runs;
- the sweep is the subreaper of its own (`Leftovers`): when a job's process ends, whatever it
  left is reparented to the sweep.
So the sweep's children that it did not start, and that carry this sweep's mark in their
environment (HPSEARCH_PARENT_PID, which every process a job starts inherits unless it clears its
environment), are leftovers of jobs that have ended: each such tree is killed and reaped when a
job's end is seen, before its slot is given to the next job.

`hydra.launcher.keep_daemons: true` turns this off: the sweep adopts no orphans, ends none.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import psutil

from ...contract import PARENT_PID
from ..job.subreaper import become_subreaper

log = logging.getLogger("hpsearch.launcher")

KILL_WAIT_S = 5.0  # after SIGKILL, how long to wait for leftovers to be gone


class _Process(Protocol):
    pid: int


P = TypeVar("P", bound=_Process)


@dataclass(frozen=True)
class Leftover:
    """A process a job left running, as it was seen before it was ended."""

    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


class Leftovers:
    """This sweep's orphans: adopted (the sweep is their subreaper), ended, reaped."""

    def __init__(self, keep: bool = False) -> None:
        self.pid = os.getpid()
        self._mark = str(self.pid)
        self._started: set[int] = set()  # the sweep's own processes (jobs, spares, the server)
        self._lock = threading.Lock()  # job watchers end leftovers from their threads
        self.active = not keep and become_subreaper(True)

    def spawn(self, make: Callable[[], P]) -> P:
        """`make()` a process of the sweep's own (a job's, a spare, the server): never a
        leftover. Made under the lock, so a job's end seen meanwhile cannot take it for one."""
        with self._lock:
            proc = make()
            self._started.add(proc.pid)
            return proc

    def started(self, pid: int) -> None:
        """A process the sweep waits for itself (a forked job, once its server is gone it is
        the sweep's child): never a leftover."""
        with self._lock:
            self._started.add(pid)

    def done(self, pid: int) -> None:
        with self._lock:
            self._started.discard(pid)

    def end(self) -> list[Leftover]:
        """Kill every leftover tree (the sweep's unknown children that bear its mark, and all
        below them) and reap them; what was ended. Zombie orphans are reaped too."""
        if not self.active:
            return []
        with self._lock:
            found = self._find()
            procs = [p for p, _ in found]
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGKILL)
            psutil.wait_procs(procs, timeout=KILL_WAIT_S)
            self._reap()
            return [seen for _, seen in found]

    def _find(self) -> list[tuple[psutil.Process, Leftover]]:
        found: list[tuple[psutil.Process, Leftover]] = []
        for child in self._strangers():
            if not self._bears_mark(child):
                continue
            tree = [child, *_descendants(child)]
            found += [(p, seen) for p in tree if (seen := _seen(p)) is not None]
        return found

    def _strangers(self) -> list[psutil.Process]:
        """The sweep's children it did not start (orphans it adopted)."""
        found = []
        for pid in child_pids(self.pid):
            if pid not in self._started:
                with contextlib.suppress(psutil.Error):
                    found.append(psutil.Process(pid))
        return found

    def _bears_mark(self, proc: psutil.Process) -> bool:
        try:
            return bool(proc.environ().get(PARENT_PID) == self._mark)
        except psutil.Error:  # gone, a zombie (reaped below) or not ours to read
            return False

    def _reap(self) -> None:
        """Reap the sweep's zombie children it did not start (ended orphans): their own
        parents died, and nobody else waits for them."""
        for child in self._strangers():
            with contextlib.suppress(psutil.Error, ChildProcessError):
                if child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)

    def close(self) -> None:
        """The sweep is done: whatever is left is ended, and orphans go to init again."""
        if self.active:
            ended = self.end()
            if ended:
                log.warning(
                    "hpsearch: %d process(es) jobs left were still running at the sweep's "
                    "end: ended (%s)",
                    len(ended),
                    ", ".join(map(str, ended[:3])),
                )
            become_subreaper(False)
            self.active = False


def child_pids(pid: int) -> list[int]:
    """The children of process `pid`, from its threads' /proc children lists (a job's end
    looks, so it must cost little: ~0.1 ms, where a scan of every process, psutil's, costs ~8
    ms on a machine of 100 processes); psutil's scan where the kernel has no such lists."""
    if not _HAS_CHILDREN_LISTS:
        with contextlib.suppress(psutil.Error):
            return [p.pid for p in psutil.Process(pid).children()]
        return []
    pids: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return pids
    for thread in threads:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{thread}/children") as f:
            pids += map(int, f.read().split())
    return pids


_HAS_CHILDREN_LISTS = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return list(proc.children(recursive=True))
    except psutil.Error:
        return []


def _seen(proc: psutil.Process) -> Leftover | None:
    """The process as a log line names it; None if it is gone (or a zombie already)."""
    try:
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            command = " ".join(proc.cmdline())[:120] or proc.name()
            return Leftover(proc.pid, command)
    except psutil.Error:
        return None
