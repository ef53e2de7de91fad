"""The jobs running now, by their outcome future: what the scheduling loop waits on each turn,
and what it ends for running past hydra.launcher.timeout or past its pruning grace."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Iterator

from ..contract import STOP_FILE
from ..outcome import Ending, Outcome
from ..stream import JobSource
from .backend import Backend
from .run import Run, RunState, pruned

log = logging.getLogger("hpsearch.launcher")


class Running:
    def __init__(self, backend: Backend, timeout: float | None, grace_s: float):
        self.jobs: dict[concurrent.futures.Future[Outcome], Run] = {}
        self.backend = backend
        self.timeout = timeout  # hydra.launcher.timeout
        self.grace_s = grace_s  # SIGTERM -> SIGKILL when a job is ended

    def __len__(self) -> int:
        return len(self.jobs)

    def runs(self) -> list[Run]:
        return list(self.jobs.values())

    def add(self, run: Run) -> None:
        """A run whose attempt just started (its handle made)."""
        assert run.handle is not None
        self.jobs[run.handle.outcome] = run
        run.state = RunState.RUNNING

    def wait(self, poll_s: float) -> list[tuple[Run, Outcome]]:
        """Wait, at most until the next deadline or `poll_s`, for jobs to end; those that did,
        in start order (so they free their slots in round-robin order), with how they ended
        (a pruned one: pruned, whatever its process did)."""
        for run in self.jobs.values():
            run.set_deadline(self.timeout)
        now = time.monotonic()
        deadlines = [r.deadline for r in self.jobs.values() if r.deadline is not None]
        timeout = min([poll_s, *(max(0.0, d - now) for d in deadlines)])
        if not self.jobs:  # slots wait for free memory: nothing to watch meanwhile
            time.sleep(timeout)
        done, _ = concurrent.futures.wait(
            list(self.jobs), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        ended = []
        for future in sorted(done, key=lambda f: self.jobs[f].job.num):
            run = self.jobs.pop(future)
            stopping = run.state is RunState.STOPPING
            ended.append((run, pruned(run, future.result()) if stopping else future.result()))
        return ended

    def judge_reports(self, source: JobSource, grace_s: float) -> None:
        """Hand each running job's new reports to the source, then tell the job they are
        heard; one the source condemns is asked to stop (its stop file), and its process tree
        is ended `grace_s` later."""
        for run in self.runs():
            if run.reports is None or run.state is RunState.STOPPING:
                continue
            for step, value in run.reports.read():
                if source.report(run.key, step, value):
                    self._prune(run, step, value, grace_s)
                    break
            else:
                run.reports.heard()

    def _prune(self, run: Run, step: int, value: float, grace_s: float) -> None:
        assert run.dir is not None
        pruning = run.prune(step, value, grace_s)
        (run.dir / STOP_FILE).touch()
        log.info("job %d pruned %s  %s", run.job.num, run.job.label, pruning.reason)

    def stop_overdue(self, now: float) -> None:
        """Pruned jobs past their grace: SIGTERM, then SIGKILL a second later if still there."""
        for run in self.jobs.values():
            if run.pruning is not None and now >= run.pruning.kill_at and run.handle is not None:
                self.backend.stop(run.handle, force=now >= run.pruning.kill_at + 1.0)

    def expired(self, now: float) -> Iterator[tuple[Run, Outcome]]:
        """The jobs past hydra.launcher.timeout, each ended (its process tree killed) before
        it is given."""
        expired = [(f, r) for f, r in self.jobs.items() if r.deadline and now >= r.deadline]
        for future, run in expired:
            del self.jobs[future]
            assert run.handle is not None
            self.backend.end([run.handle], grace=self.grace_s)
            detail = (
                f"timed out after {self.timeout:g}s (hydra.launcher.timeout); "
                "its process tree was killed"
            )
            where = run.handle.placement()
            yield run, Outcome(Ending.TIMED_OUT, detail=detail, placement=where)

    def end_all(self) -> list[tuple[Run, Outcome | None]]:
        """End every running job's process tree; each run with its outcome if it had ended
        before (None: it was ended here)."""
        runs = list(self.jobs.items())
        ended_first = {future for future, _ in runs if future.done()}
        self.backend.end([r.handle for _, r in runs if r.handle is not None], self.grace_s)
        self.jobs.clear()
        return [(run, future.result() if future in ended_first else None) for future, run in runs]
