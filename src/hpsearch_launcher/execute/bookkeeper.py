"""The scheduling loop's bookkeeping: what each job's end becomes (its row, its JobReturn, the
source told, the counts), jobs ended without running (resumed, adopted), attempts a killed run
left running on a cluster (taken up), and the run dirs.

The loop (sweep.py) decides what runs where and when; this keeps the books on what it did.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn

from ..contract import HEARD_FILE, STOP_FILE
from ..crash_points import crash_point
from ..disk_errors import CannotWrite
from ..outcome import Outcome, Status, status_of
from ..plan.jobs import Job, run_dir, sweep_dir
from ..plan.naming import claim_run_dir
from ..plan.slots import device_label
from ..record.progress import SweepState
from ..record.recorder import Recorder
from ..record.rows import last_report
from ..stream import Ask, JobEnd, JobSource
from ..text import short_str
from .backend import Adoption, Execution
from .run import Run, RunState

log = logging.getLogger("hpsearch.launcher")


class Bookkeeper:
    """The records (a `Recorder`), the source's side of each end, and the sweep's counts."""

    def __init__(self, recorder: Recorder, source: JobSource, state: SweepState) -> None:
        self.recorder = recorder
        self.source = source
        self.state = state  # the counts; the loop sets what is queued and running

    def asked(self, ask: Ask, job: Job) -> bool:
        """Count a job the source gave; end it at once, taking no slot, if an earlier run of
        the sweep finished it (resumed) or ran it to its end unrecorded (adopted). Whether
        it was ended so."""
        self.state.total = max(self.state.total, self.state.asked + 1)
        self.state.asked += 1
        if job.previous is not None:
            self._resumed(ask, job)
            return True
        return self._adopted(ask, job)

    def _resumed(self, ask: Ask, job: Job) -> None:
        assert job.previous is not None
        ret = self.recorder.resumed(job)
        self.state.resumed += 1
        log.info("job %d resumed  %s  (finished in an earlier run)", job.num, job.label)
        pruned_before = job.previous.get("status") == Status.PRUNED.value
        status = Status.PRUNED if pruned_before else Status.RESUMED
        step, value = last_report(job.previous)
        self.source.ended(ask.key, JobEnd(ret, status, step, value, job.num))

    def _adopted(self, ask: Ask, job: Job) -> bool:
        """Whether `job` ran to its end in a run of the sweep that was killed before it
        recorded that end: then it is recorded now and its source told, not run again."""
        found = self.recorder.adopt(job)
        if found is None:
            return False
        ret, points = found
        for point in points:
            self.source.report(ask.key, *point)
        step, value = points[-1] if points else (None, None)
        self.source.ended(ask.key, JobEnd(ret, Status.COMPLETED, step, value, job.num))
        self.state.done += 1
        log.info("job %d adopted  %s  (it ended before the sweep was killed)", job.num, job.label)
        return True

    def claim_dir(self, job: Job) -> Path:
        """The job's run dir, created now: named from its overrides (an earlier run's
        unfinished attempt moved out of the way, else `name~2` if taken), or where the user's
        hydra.sweep.subdir puts it."""
        if job.name:
            make_way = functools.partial(self.recorder.free_run_dir, job)
            path = sweep_dir(job) / claim_run_dir(sweep_dir(job), job.name, make_way)
            self.recorder.adopter.claimed(path)
            return path
        path = run_dir(job)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def left_running(self, run: Run, execution: Execution) -> Adoption | None:
        """A job's first attempt: the attempt a killed run of the sweep left to the backend's
        cluster, if there is one whose run dir is there and no results row names nor a job of
        this run took; taken up then (its run dir this run's, its number and start the
        run's), instead of started again."""
        if run.dir is not None:
            return None
        while (found := execution.adoption(run.job)) is not None:
            if found.run_dir.is_dir() and self.recorder.adopter.take(found.run_dir):
                run.dir, run.attempts = found.run_dir, found.attempt
                run.started_wall = found.started
                return found
        return None

    def record_end(self, run: Run, outcome: Outcome, placement: str, seconds: float) -> JobReturn:
        """Record a run's end (its last attempt, at `placement`, for `seconds`), tell its
        source, count it; the JobReturn the sweeper gets for it."""
        if run.reports is not None and run.pruning is None:
            for late in run.reports.read():  # written just before it ended: the source hears all
                self.source.report(run.key, *late)
        if run.dir is not None:  # its process is gone: answered, and heard no more
            (run.dir / HEARD_FILE).unlink(missing_ok=True)
            if run.pruning is not None:
                (run.dir / STOP_FILE).unlink(missing_ok=True)
        attempt = run.attempt(outcome, placement)
        crash_point("job-ended")
        ret = self.recorder.write_end(attempt)
        run.state = RunState.ENDED
        status = status_of(outcome)
        crash_point("recorded")  # in results.jsonl; the source (a study) not yet told
        end = JobEnd(ret, status, attempt.last_step, attempt.last_value, run.job.num)
        self.source.ended(run.key, end)
        if outcome.ok:
            self.state.done += 1
            self.state.durations.append(seconds)
        elif status is Status.PRUNED:
            self.state.pruned += 1
        elif status is Status.INTERRUPTED:
            self.state.interrupted += 1
        else:
            self.state.failed += 1
        _log_end(run, outcome, ret, f"{device_label(placement)}  {run.job.label}  {seconds:.1f}s")
        return ret

    def counts(self, queued: int, running: Sequence[Run], packs: bool) -> SweepState:
        """The counts kept as jobs end, with what is `queued` and `running` now (packed by
        memory: the most jobs run at once so far are its slots)."""
        self.state.queued = queued
        self.state.running = {}
        if packs:
            self.state.slots = max(self.state.slots, len(running))
        for run in running:
            self.state.running.setdefault(run.group, []).append(run.job.label)
        return self.state

    def flush(self, force: bool = False) -> None:
        """results.csv written, if due (or `force`)."""
        self.recorder.table.flush(force=force)

    def close(self, refused: bool = False) -> None:
        """The end of one launch(): results.csv written; the journal closed (a later
        launch()'s first end opens it again). Where the disk `refused` an earlier write, its
        refusal of this one says nothing new: what the journal holds is safe."""
        try:
            self.recorder.table.flush(force=True)
        except CannotWrite:
            if not refused:
                raise
        finally:
            self.recorder.table.journal.close()

    @property
    def results(self) -> Path:
        """The sweep's results.csv."""
        return self.recorder.table.path


def _log_end(run: Run, outcome: Outcome, ret: JobReturn, label: str) -> None:
    num, status = run.job.num, status_of(outcome)
    if outcome.ok:
        log.info("job %d done   %s  -> %s", num, label, short_str(ret._return_value, 120))
    elif status is Status.PRUNED:
        log.info("job %d ended  %s: %s", num, label, outcome.reason)
    else:
        log.error("job %d %s %s: %s", num, status.value.upper(), label, outcome.reason)
