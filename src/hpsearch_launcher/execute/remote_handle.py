"""What a remote backend's job handle (Ray's, SLURM's) shares: the job's start file on the
sweep dir (written where it runs, when it begins: `execute.job.remote.run_here`), its stderr
there, and no process of its own on this machine."""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path

from ..outcome import Outcome
from .backend import JobSpec
from .log_tail import file_tail, last_error_line


class RemoteHandle:
    """One job running elsewhere; `outcome` is resolved by the backend's own subclass."""

    def __init__(self, spec: JobSpec, started_file: Path) -> None:
        self.spec = spec
        self.started_file = started_file  # the job creates it when it begins
        self._started: float | None = None
        self.outcome: Future[Outcome] = Future()

    def started_at(self) -> float | None:
        """When the sweep first saw the job's start file (a job may wait in the cluster's
        queue for a place first); on a shared filesystem, a second or so late at worst."""
        if self._started is None and (self.outcome.done() or self.started_file.exists()):
            self._started = time.monotonic()
        return self._started

    def last_error(self) -> str:
        return last_error_line(self.log_tail())

    def placement(self) -> str:
        """Where the job ran, as it wrote it at its start ("" if it never began)."""
        try:
            return self.started_file.read_text()
        except OSError:
            return ""

    def log_tail(self, max_bytes: int = 64 * 1024) -> str:
        return file_tail(Path(self.spec.stderr_path), max_bytes)

    def pids(self) -> list[int]:
        return []  # its process may be on another machine: the cluster owns it
