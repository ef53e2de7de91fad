"""What a remote backend (Ray's, SLURM's) shares: how it sends a job (`RemoteJobs`: its ticket,
its start file on the sweep dir, the environment it ships), and its job handle (`RemoteHandle`:
the start file, written where the job runs when it begins by `execute.job.remote.run_here`, its
stderr there, and no process of its own on this machine)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, wait
from pathlib import Path

from .. import contract
from ..outcome import Outcome
from .backend import JobSpec
from .job.remote import RemoteTicket
from .log_tail import file_tail, last_error_line
from .payload import sweep_sys_path

log = logging.getLogger("hpsearch.launcher")

# Variables the cluster sets per job itself (the GPUs it gave it), or meaningless off this
# machine: not shipped with a job.
NOT_SHIPPED = ("CUDA_VISIBLE_DEVICES", contract.GPU_ID, contract.PARENT_PID)


class RemoteJobs:
    """A remote backend's jobs as it sends them: each one's ticket (its start file in the
    sweep's `<mark>.started/`, named `<run><num>-<attempt>`, the sweep's cwd and sys.path) and
    the environment it ships; the mark (execute.job.remote.write_mark) and the start files
    removed at `close`. `run`: where a killed run's jobs may still write theirs (SLURM's),
    this run's own prefix, so that its job numbers, which go on from the recorded rows, meet
    none of theirs."""

    def __init__(self, mark: tuple[str, str], run: str = "") -> None:
        self.mark = mark
        self.run = run  # begins this run's start files' names: not an earlier run's
        self.started_dir = Path(f"{mark[0]}.started")  # the jobs' start files
        self.started_dir.mkdir(exist_ok=True)
        self.sys_path = tuple(sweep_sys_path())
        self.cwd = os.getcwd()  # where the sweep started: each job works there

    def ticket(self, spec: JobSpec) -> RemoteTicket:
        started = self.started_file(spec)
        return spec.ticket(RemoteTicket, started=str(started), cwd=self.cwd, sys_path=self.sys_path)

    def started_file(self, spec: JobSpec) -> Path:
        return self.started_dir / f"{self.run}{spec.num}-{spec.attempt}"

    @staticmethod
    def shipped(env: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k not in NOT_SHIPPED}

    def close(self) -> None:
        Path(self.mark[0]).unlink(missing_ok=True)
        shutil.rmtree(self.started_dir, ignore_errors=True)


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


def wait_ended(outcomes: Sequence[Future[Outcome]], what: str, seconds: float) -> None:
    """Wait up to `seconds` for cancelled jobs' outcomes (`what` they are, in the cluster's
    words: "Ray tasks", "SLURM jobs"); say in one line how many did not end by then."""
    _, left = wait(outcomes, timeout=seconds)
    if left:
        log.warning("hpsearch: %d cancelled %s did not end within %gs", len(left), what, seconds)
