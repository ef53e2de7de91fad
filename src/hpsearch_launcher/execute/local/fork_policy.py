"""`warm_start: fork` as the local backend sees it: the fork server made at the first job (which
waits for it), kept up to date with the modules learned, each job's process forked from it while
that is safe; else one warning and the sweep goes on with spawned spares (execute.local.spare_pool).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..backend import JobSpec
from ..job.wire import Said
from .fork_client import FORK_READY_S, ForkRefused, ForkServer
from .forked_process import REAP_S, is_stopped
from .job_process import Listeners, LocalHandle, WarmPath
from .spare import PRELOAD_BOUND_S, Spare, StatusReader

log = logging.getLogger("hpsearch.launcher")

# A fresh process (LocalBackend's): with the server's end of its control socket, the server.
ServerSpawn = Callable[
    [Mapping[str, str], str, list[str], socket.socket],
    tuple[subprocess.Popen[bytes], StatusReader],
]
Cold = Callable[[], tuple[subprocess.Popen[bytes], StatusReader]]


class Forking:
    """The fork server of one sweep, while `active` (warm_start=fork, not yet fallen back)."""

    def __init__(
        self,
        dir: Path,
        listeners: Listeners,
        spawn: ServerSpawn,
        active: bool,
        holds_gpu: Callable[[int], bool],
    ) -> None:
        self.dir = dir
        self.listeners = listeners
        self.leftovers = listeners.leftovers
        self.preloads = listeners.preloads
        self.spawn = spawn
        # warm_start=fork: the fork server, until the sweep falls back to spawned spares.
        self.active = active
        self.server: ForkServer | None = None
        self._made = 0  # fork servers made so far: names their logs
        self._holds_gpu = holds_gpu  # NVML: whether a process holds a CUDA context
        self._fork_failure: str | None = None  # a job's watcher saw a forked process fail
        self._unreaped: int | None = None  # a job's process the server left unreaped (it hangs)
        # When the server was made, until its first `ready` (the task's module imported): jobs
        # wait for it meanwhile, so that wait is bounded too.
        self._loading_since: float | None = None

    def fork(
        self,
        spec: JobSpec,
        job_file: Path,
        result: Path,
        env: Mapping[str, str],
        cold: Cold,
    ) -> LocalHandle | None:
        """The job's process forked from the server, if it is ready and forking is safe."""
        self.check()
        server = self.server
        if not self.active or server is None or not server.ready():
            return None
        try:
            proc, read_end = server.fork(str(job_file), {**os.environ, **env})
        except ForkRefused as err:
            self._fall_back(str(err))
            return None
        ready_by = time.monotonic() + FORK_READY_S
        warm = WarmPath(cold, ready_by=ready_by, on_fork_failure=self._fork_failed)
        return LocalHandle(proc, spec, result, StatusReader(read_end), self.listeners, warm)

    def coming(self, env: Mapping[str, str]) -> bool:
        """Whether the next job should wait for the server rather than start cold: forking,
        and the server (made now, with `env`, if there is none) still imports. A cold process
        would import all that again from the start, on the same cores; the server can only
        be nearer. Any failure (it died, hangs in an import, holds a CUDA context) ends the
        wait: the sweep falls back to spawning."""
        self.check()
        if not self.active:
            return False
        if self.server is None:
            self._make(env)
        assert self.server is not None
        return not self.server.ready()

    def prepare(self, jobs_left: bool) -> None:
        """Have the server import what the jobs were seen to import since it was made, once it
        is ready (the server itself is made by `coming`, at the first job), and keep one
        process forked ahead while `jobs_left` (jobs still to start on a busy slot): it takes
        the next freed slot's job without a fork in between. One is enough: another is forked
        as soon as it is taken, in milliseconds."""
        server = self.server
        if server is None:
            return
        missing = [m for m in self.preloads.modules() if m not in server.spare.has]
        if missing and server.ready():
            server.ask_more(missing)
        server.keep_ahead(1 if jobs_left else 0)

    def _make(self, env: Mapping[str, str]) -> None:
        """Spawn the server, to import the task's module and the modules learned so far."""
        modules = self.preloads.modules()
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._made += 1
        path = self.dir / f"fork-server-{self._made}.log"
        try:
            proc, status = self.spawn(env, str(path), modules, theirs)
        finally:
            theirs.close()
        spare = Spare(proc, path, status, set(modules))
        self.server = ForkServer(
            spare, control, {**os.environ, **env}, self.leftovers.started, self._unreaped_job
        )
        self._unreaped = None
        self._loading_since = time.monotonic()

    def check(self) -> None:
        """Take in what the server said; fall back to spawned spares (one warning) if it died,
        hangs in an import, holds a CUDA context, or a forked process failed to start. Once
        fallen back, the server ends when the last of its children has; one that is stopped or
        hung is killed at once (its jobs go on, adopted by the sweep: execute.local.leftovers)."""
        server = self.server
        if server is None:
            return
        stuck = self._stuck(server)
        if self.active:
            why = stuck or self._unfit(server)
            if why is not None:
                self._fall_back(why)
        if not self.active and (stuck is not None or not server.busy()):
            server.close()
            self.server = None

    def _unfit(self, server: ForkServer) -> str | None:
        """Why the server should fork no more jobs, having heard what it said; None: none."""
        code = server.spare.proc.poll()
        lines = server.spare.status.lines() if code is None else None
        why = None
        for line in lines or ():
            if line.said is Said.THREADS:
                server.threads = line.threads
                log.debug("hpsearch: the fork server has %d threads", line.threads)
            else:
                self.preloads.heard(line, server.spare)
            if line.said is Said.READY:
                self._loading_since = None
                if self._holds_gpu(server.spare.proc.pid):
                    why = "it holds a CUDA context (NVML lists it on a GPU)"
        if code is not None:
            self.preloads.died(server.spare, code)
            return f"the fork server ended ({code}): see {server.spare.log}"
        if self.preloads.stuck(server.spare):
            return "the fork server hangs in an import ahead"
        if self._loading_too_long():
            return (
                f"the fork server had not imported the task's module {PRELOAD_BOUND_S:g} s "
                "after it started (HPSEARCH_PRELOAD_TIMEOUT)"
            )
        return why or self._fork_failure

    def _stuck(self, server: ForkServer) -> str | None:
        """Why the server no longer serves (stopped, or it left a job's end unreaped), so that
        it is killed at once; None: it serves."""
        pid = server.spare.proc.pid
        if is_stopped(pid):
            return f"the fork server (pid {pid}) is stopped (SIGSTOP, or a debugger); it was killed"
        if self._unreaped is not None:
            return (
                f"the fork server did not reap job process {self._unreaped} within {REAP_S:g} s "
                "of its end (it hangs); it was killed"
            )
        return None

    def _unreaped_job(self, pid: int) -> None:
        """From a job's watcher: its process exited, and the server has not reaped it."""
        self._unreaped = self._unreaped or pid

    def _loading_too_long(self) -> bool:
        since = self._loading_since
        return since is not None and time.monotonic() - since > PRELOAD_BOUND_S

    def _fork_failed(self, why: str) -> None:
        """From a job's watcher: a forked process did not start (it then runs cold)."""
        self._fork_failure = self._fork_failure or why

    def _fall_back(self, why: str) -> None:
        if self.active:
            self.active = False
            log.warning(
                "hpsearch: warm_start=fork: not forking: %s; the sweep goes on with spawned "
                "spares (warm_start=spawn)",
                why,
            )

    def close(self) -> None:
        """End the fork server, if there is one."""
        if self.server is not None:
            self.server.close()
            self.server = None
