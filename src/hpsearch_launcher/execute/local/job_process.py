"""One job's process on this machine, as the sweep sees it (the local backend's `JobHandle`):
watched by a thread that hears what it says on its status pipe (execute.local.spare) and resolves
its outcome when it has exited; ended as a whole process tree.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

import psutil

from ...outcome import Ending, Outcome, TaskResult, outcome_of
from ..backend import JobSpec
from ..job.wire import Said
from ..log_tail import file_tail, last_error_line
from .fork_client import FORK_READY_S
from .forked_process import ForkedProcess
from .leftovers import Leftovers
from .spare import Preloads, Spare, StatusReader

KILL_WAIT_S = 5.0  # after SIGKILL, how long to wait for a process tree to be gone
STATUS_POLL_S = 1.0  # a job's watcher wakes so often to see whether its process has ended
log = logging.getLogger("hpsearch.launcher")


class JobProcess(Protocol):
    """A job's process: a `subprocess.Popen`, or one the fork server forked
    (execute.local.fork_client)."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclasses.dataclass(frozen=True)
class Listeners:
    """The local backend's parts that hear of every job, whatever process it got: what it
    imports (`preload: auto` learns from it), and what it leaves running (ended with it)."""

    preloads: Preloads
    leftovers: Leftovers


@dataclasses.dataclass(frozen=True)
class WarmPath:
    """A job given a process made ahead, and how that one is given up for a cold process
    (`cold()`, a fresh process handed the job): a spare handed its job before its imports were
    done is watched until they are, and replaced if one of them hangs or kills it; a forked
    process says `started` by `ready_by` (time.monotonic), else it is killed, `on_fork_failure`
    told why, and replaced."""

    cold: Callable[[], tuple[JobProcess, StatusReader]]
    spare: Spare | None = None
    ready_by: float | None = None
    on_fork_failure: Callable[[str], None] | None = None


class LocalHandle:
    """One job's process: started at once, watched by a thread that resolves `outcome`."""

    def __init__(
        self,
        proc: JobProcess,
        spec: JobSpec,
        result_path: Path,
        status: StatusReader,
        listeners: Listeners,
        warm: WarmPath | None = None,
    ) -> None:
        self.proc = proc
        self.spec = spec
        self.result_path = result_path
        self.status = status
        self.preloads = listeners.preloads
        self.leftovers = listeners.leftovers  # what the job's process leaves running ends with it
        spare = warm.spare if warm is not None else None
        self.spare = spare if spare is not None and spare.batches > 0 else None
        self._cold = warm.cold if warm is not None else None
        self.ready_by = warm.ready_by if warm is not None else None
        self._on_fork_failure = warm.on_fork_failure if warm is not None else None
        self._lock = threading.Lock()  # the process is replaced, or the sweep ends it: not both
        self._ended = False
        self.outcome: Future[Outcome] = Future()
        self._started = time.monotonic()  # its process exists: it runs
        self._oom_kills = oom_kills()  # the kernel's count: did the OOM killer strike since?
        threading.Thread(target=self._watch, name=f"hpsearch-job-{spec.num}", daemon=True).start()

    def pids(self) -> list[int]:
        """The job's process and its descendants (a data loader's workers hold GPU memory too)."""
        return [self.proc.pid, *(p.pid for p in self.descendants())]

    def started_at(self) -> float:
        return self._started

    def placement(self) -> str:
        return ""  # the sweep chose its device

    def _watch(self) -> None:
        self._listen()
        code = self.proc.wait()
        self.leftovers.done(self.proc.pid)
        try:
            ended = self.leftovers.end()  # before its slot frees: their memory is its
            outcome = self._read_outcome(code)
        except Exception as err:  # never leave the sweep waiting on a future that won't resolve
            ended = []
            outcome = Outcome(Ending.EXITED, code=code, detail=f"unreadable result: {err!r}")
        if self.leftovers.active:
            outcome = dataclasses.replace(outcome, leftovers=tuple(map(str, ended)))
        self.outcome.set_result(outcome)

    def _listen(self) -> None:
        """Hear what the job says it imports until its pipe closes or its process has ended
        (a forked child of the job may hold the pipe open past it)."""
        try:
            while True:
                lines = self.status.lines(STATUS_POLL_S)
                for line in lines or ():
                    if line.said is Said.STARTED:
                        self.ready_by = None
                    else:
                        self.preloads.heard(line, self.spare)
                late = self.ready_by is not None and time.monotonic() > self.ready_by
                if self.ready_by is not None and (lines is None or late):
                    self._fork_failed(ended=lines is None)
                elif self.spare is not None and self.spare.batches <= 0:
                    self.spare = None  # its imports are done: it runs the job now
                elif self.spare is not None and self.preloads.stuck(self.spare):
                    self._go_cold()
                elif self.spare is not None and lines is None:  # its pipe closed: it ended
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=KILL_WAIT_S)
                    code = self.proc.poll()
                    if code is None or not self.preloads.died(self.spare, code):
                        break  # not in an import ahead: what it ended with is the job's outcome
                    self._go_cold()  # a module ahead killed it: dropped; the job starts cold
                elif lines is None or (not lines and self.proc.poll() is not None):
                    break
        except Exception as err:  # what it imported is a hint: never lose the job's outcome
            log.debug("hpsearch: job %d's status pipe: %r", self.spec.num, err)
        finally:
            self.status.close()

    def _fork_failed(self, ended: bool) -> None:
        """Its forked process ended, or hangs, before it started the job: killed, the backend
        told (it stops forking), and the job given a cold process."""
        assert self._on_fork_failure is not None
        self.ready_by = None
        if self._ended:  # the sweep ended it: nothing failed
            return
        self._on_fork_failure(
            f"a forked job process (pid {self.proc.pid}) ended before it started its job"
            if ended
            else f"a forked job process (pid {self.proc.pid}) had not started its job "
            f"{FORK_READY_S:g} s after its fork (HPSEARCH_FORK_READY_TIMEOUT); it was killed"
        )
        self._go_cold()

    def _go_cold(self) -> None:
        """Its spare hangs (or died) in an import ahead: killed, and the job given a cold
        process."""
        assert self._cold is not None
        with self._lock:
            signal_tree(self.proc.pid, self.descendants(), signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=KILL_WAIT_S)
            self.status.close()
            self.leftovers.done(self.proc.pid)
            self.spare = None
            if not self._ended:  # else the sweep ended the job meanwhile: it stays ended
                self.proc, self.status = self._cold()

    def ending(self) -> None:
        """The sweep ends (or stops) this job: its process is never replaced after this."""
        with self._lock:
            self._ended = True

    def _read_outcome(self, code: int) -> Outcome:
        if self.result_path.exists():
            result = TaskResult.from_bytes(self.result_path.read_bytes())
            self.result_path.unlink()
            return outcome_of(result, self._err)
        if isinstance(self.proc, ForkedProcess) and self.proc.lost is not None:
            # Not the job's failure: it runs again (retry_kind), spawned (forking fell back).
            return Outcome(Ending.LOST, detail=f"its process was lost: {self.proc.lost}")
        if code < 0:
            struck = oom_kills()
            by_oom = None if struck is None or self._oom_kills is None else struck > self._oom_kills
            return Outcome(Ending.KILLED, code=-code, last_error=self._err(), oom_killer=by_oom)
        return Outcome(Ending.EXITED, code=code, last_error=self._err())

    def _err(self) -> str:
        return last_error_line(self.log_tail())

    def log_tail(self, max_bytes: int = 64 * 1024) -> str:
        return file_tail(Path(self.spec.stderr_path), max_bytes)

    def descendants(self) -> list[psutil.Process]:
        try:
            return list(psutil.Process(self.proc.pid).children(recursive=True))
        except psutil.Error:
            return []


def hand_over(proc: subprocess.Popen[bytes], message: bytes) -> None:
    """Give the process its job (the job file's path); OSError if it is gone."""
    assert proc.stdin is not None
    proc.stdin.write(message)
    proc.stdin.close()


def end_trees(handles: Sequence[LocalHandle], grace: float) -> None:
    """SIGTERM each job's process tree, wait up to `grace` s, then SIGKILL what is left.

    Jobs run in their own process group: signalling the group reaches descendants that psutil
    no longer sees as children (daemonised ones), and psutil's snapshot reaches those that left
    the group. The job's own process is waited for through Popen, which keeps its exit status.
    """
    trees = [(h, h.descendants()) for h in handles]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else KILL_WAIT_S)
        for handle, descendants in trees:
            signal_tree(handle.proc.pid, descendants, sig)
        for handle, descendants in trees:
            with contextlib.suppress(subprocess.TimeoutExpired):
                handle.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            psutil.wait_procs(descendants, timeout=max(0.0, deadline - time.monotonic()))
        trees = [
            (h, [p for p in d if p.is_running()])
            for h, d in trees
            if h.proc.poll() is None or any(p.is_running() for p in d)
        ]
        if not trees:
            return


def signal_tree(pid: int, descendants: Sequence[psutil.Process], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # its group (start_new_session made it the leader)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    for proc in descendants:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def oom_kills() -> int | None:
    """The kernel's count of processes its OOM killer has killed (/proc/vmstat, Linux 4.13+;
    cgroups' OOM kills included); None where it does not say."""
    try:
        with open("/proc/vmstat", "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
