"""The scheduling loop of one launch(): start jobs on free slots, watch them, retry what the
policy allows, and hand every end to the bookkeeper (bookkeeper.py), which records it.

Whatever goes wrong in here (a signal, a bug, a full disk while recording), the running jobs'
process trees are ended and the progress display is closed before the error goes on; a file
the disk refuses stops the sweep as one CannotWrite, which is said in one line.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

from ..contract import GPU_PEAK_FILE, REPORTS_FILE
from ..disk_errors import CannotWrite, cannot_write
from ..outcome import Ending, Outcome, status_of
from ..plan.jobs import Job
from ..plan.settings import LauncherSettings
from ..plan.slots import SlotPool, device_label
from ..record.progress import SweepState, counted, make_progress
from ..record.recorder import Recorder
from ..record.reports import ReportReader
from ..stream import Ask, JobSource
from .backend import Ahead, Execution
from .bookkeeper import Bookkeeper
from .failures import alone_words
from .packer import Packer
from .room import Room
from .run import Run, RunState, returned
from .running import Running
from .signals import StopRequest, stop_on_signals

log = logging.getLogger("hpsearch.launcher")

INTERRUPT_GRACE_S = 5.0  # SIGTERM -> SIGKILL for running jobs when the sweep is interrupted
POLL_S = 0.5  # the longest the loop sleeps without looking at signals and deadlines
# The same while jobs wait: for the warm process (they start once it is ready), or for the
# verdict on their reports (they train on once it is given).
HOLD_POLL_S = 0.02


class Sweep:
    """Run the jobs a `JobSource` gives, each on a free slot, until it has no more and none
    runs; every report and every end goes back to the source as it happens."""

    def __init__(
        self,
        settings: LauncherSettings,
        execution: Execution,
        recorder: Recorder,
        source: JobSource,
        make_job: Callable[[Ask], Job],
        total: int | None = None,
    ) -> None:
        self.source = source
        self.make_job = make_job  # composes the job a source asked for, when it is asked
        self.queue: deque[Run] = deque()
        self.whole_queue: list[Run] = []  # retries waiting for their group to be free
        self.settings = settings
        self.execution = execution
        self.backend = execution.backend
        self.running = Running(self.backend, settings.timeout, INTERRUPT_GRACE_S)
        self.pool = SlotPool(execution.groups, execution.slots)
        self.stop = StopRequest()
        # Jobs at once, for the time left: the slots; packed by memory, the most run so far.
        at_once = len(self.pool.groups) * (1 if execution.packs else self.pool.slots)
        self._state = SweepState(total=total or 0, slots=at_once)
        self.book = Bookkeeper(recorder, source, self._state)
        self.packer = Packer(execution)
        self.room = Room(execution, self.pool, self._state, self.packer)

    def run(self) -> None:
        progress = make_progress(self.pool.groups)
        disk: CannotWrite | None = None
        try:
            with stop_on_signals() as self.stop:
                while not self.stop.signum:
                    self.packer.pack(self.pool, self._head)
                    dry = self._ask()
                    if dry and not self.queue and self.source.exhausted():
                        self.execution.adoptions_over()  # no job will take up any more
                    if not (self.queue or self.whole_queue or self.running) and dry:
                        break  # nothing runs, and the source has nothing: nothing will come
                    waiting = bool(self.queue or not self.source.exhausted())  # for a slot
                    self.room.poll(self.running.runs(), waiting)
                    if waiting:
                        self.room.grow()
                    holding = self._start_ready()
                    if self.execution.warm:
                        self.backend.prepare(self._ahead())
                    verdicts = self.source.judges and bool(self.running)
                    self._wait(HOLD_POLL_S if holding or verdicts else POLL_S)
                    self.running.judge_reports(self.source, self.settings.prune_grace)
                    self.book.flush()
                    progress.update(self.state, event=False)
                if self.stop.signum:
                    self._stop()
        except BaseException as err:
            disk = cannot_write(err)  # the sweep dir (or the scratch dir) takes no more
            ended = self._abandon(err, quiet=disk is not None)
            if disk is None:
                raise
            disk.ended = ended
            raise disk from (None if disk is err else err)
        finally:
            progress.close()
            self.book.close(refused=disk is not None)
        log.info("hpsearch: %s; results in %s", self.state.summary(), self.book.results)
        if line := self.packer.summary():
            log.info("hpsearch: %s", line)

    def _ask(self) -> bool:
        """Ask the source for as many jobs as there are free slots beyond the queue; a job
        that finished in an earlier run of the sweep is ended at once, taking no slot.
        Whether the source is dry: exhausted, or it had nothing when asked."""
        while len(self.queue) < self.pool.free():
            if self.source.exhausted():
                return True
            ask = self.source.ask()
            if ask is None:
                return True
            job = self.make_job(ask)
            if not self.book.asked(ask, job):
                self.queue.append(Run(job, key=ask.key, kind=self.packer.kind(job)))
        return self.source.exhausted()

    @property
    def state(self) -> SweepState:
        """The counts kept as jobs end, with the queue and the running jobs read as they are."""
        # Jobs still to start: queued here, or still with the source (when it can say).
        queued = len(self.queue) + len(self.whole_queue) + (self.source.remaining() or 0)
        return self.book.counts(queued, self.running.runs(), self.execution.packs)

    @property
    def recorder(self) -> Recorder:
        return self.book.recorder

    def _ahead(self) -> Ahead:
        """Warm start: what the backend is shown to plan its processes made ahead."""
        more = self.source.remaining()  # None: it cannot say; a slot's worth for each group
        left = len(self.queue) + (self.pool.slots * len(self.pool.groups) if more is None else more)
        head = self._head
        return Ahead(self.pool, left, lambda group: self.packer.spare_env(group, head))

    @property
    def _head(self) -> Run | None:
        """The job that starts next, if one is queued."""
        return self.queue[0] if self.queue else None

    def _start_ready(self) -> bool:
        """Retries that need a whole device first (its other jobs drain meanwhile), then the
        queue on the free slots; unless they wait for the backend's warm process: whether
        they do."""
        if self._warming():
            return True
        for run in list(self.whole_queue):
            if not self.stop.signum and self.pool.acquire_whole(run.group):
                self.whole_queue.remove(run)
                self._start(run, run.group)
        while self.queue and not self.stop.signum:
            self.packer.pack(self.pool, self._head)  # its reservation may differ from the last
            if not self.pool.has_free():
                break
            self._start(self.queue.popleft(), self.pool.acquire())
        return False

    def _warming(self) -> bool:
        """Warm start, with a job to start: whether the backend's process made ahead (made now,
        with the next slot's environment, if there is none) is on its way, nearer than a cold
        process: the job waits for it (the fork server still importing)."""
        if not self.execution.warm:
            return False
        if not (self.whole_queue or (self.queue and self.pool.has_free())):
            return False
        group = self.pool.in_turn()[0]
        return self.backend.warming(self.packer.spare_env(group, self._head))

    def _start(self, run: Run, group: str) -> None:
        job = run.job
        run.group = group
        run.attempts += 1
        env = self.packer.book_start(run, group)
        run.started, run.started_wall = time.monotonic(), time.time()
        run.deadline = None  # set once the job runs (a Ray task may wait for a place first)
        try:
            adopted = self.book.left_running(run, self.execution)
            run.dir = run.dir or self.book.claim_dir(job)
            spec = run.spec(share=1.0 if run.whole else 1 / self.pool.slots)
            run.reports = run.reports or ReportReader(run.dir / REPORTS_FILE, self.source.judges)
            run.reports.heard()
            if adopted is not None:
                run.handle = adopted.take(spec)
            else:
                (run.dir / GPU_PEAK_FILE).unlink(missing_ok=True)  # an earlier attempt's
                run.handle = self.backend.start(spec, env)
        except Exception as err:  # out of processes or file descriptors: this job, not all
            if cannot_write(err) is not None:  # a disk that takes no run dir or ticket: all
                raise
            run.handle = None
            detail = f"could not start its process: {type(err).__name__}: {err}"
            self._finish(run, Outcome(Ending.NOT_STARTED, detail=detail))
            return
        self.running.add(run)
        alone = "alone, " if run.whole else ""
        attempt = f"  ({alone}attempt {run.attempts})" if run.attempts > 1 else ""
        if adopted is not None:  # the killed run's attempt, on the backend's cluster
            attempt = f"  (adopted: {adopted.what}, attempt {run.attempts}, of a killed run)"
        log.info("job %d start  %s  %s%s", job.num, device_label(group), job.label, attempt)

    def _wait(self, poll_s: float) -> None:
        """Record the jobs that end in this wait (at most `poll_s`); end those past their
        time."""
        for run, outcome in self.running.wait(poll_s):
            self._finish(run, outcome)
        now = time.monotonic()
        self.running.stop_overdue(now)
        for run, outcome in self.running.expired(now):
            self._finish(run, outcome)

    def _finish(self, run: Run, outcome: Outcome, retry: bool = True) -> None:
        outcome = returned(run, outcome)
        self.pool.release(run.group, whole=run.whole)
        self.room.freed = True
        self.packer.released(run, outcome)
        if retry and not outcome.finished and self._retry(run, outcome):
            return
        assert run.dir is not None or outcome.ending is Ending.NOT_STARTED
        placement = outcome.placement or run.group  # the backend's word when it chose
        self.book.record_end(run, outcome, placement, time.monotonic() - run.started)

    def _retry(self, run: Run, outcome: Outcome) -> bool:
        """Queue a failed job again if the policy allows: alone after running out of memory."""
        kind = run.failed(outcome, self.settings, self.execution.requeues)
        if kind is None:
            return False
        if run.whole:
            run.state = RunState.AWAITING_DEVICE
            self.whole_queue.append(run)
            log.warning(
                "job %d ran out of memory on %s: retrying %s (%s)",
                run.job.num,
                device_label(run.group),
                alone_words(run.group)[0],
                outcome.reason,
            )
        else:
            run.state = RunState.QUEUED
            self.queue.appendleft(run)
            log.warning(
                "job %d %s: retrying (%s)", run.job.num, status_of(outcome).value, outcome.reason
            )
        return True

    def _stop(self) -> None:
        """No new job starts; running jobs' process trees end and are recorded; then exit."""
        self._state.stopping = True
        log.error(
            "hpsearch: %s: stopping %s, %d never started",
            self.stop.name,
            counted(len(self.running), "running job"),
            self.state.never_started(),
        )
        self._end_running(f"interrupted by {self.stop.name}")
        log.error("hpsearch: %s; results in %s", self.state.summary(), self.book.results)
        raise SystemExit(128 + (self.stop.signum or 0))

    def _end_running(self, why: str) -> None:
        """End every running job's process tree; record each (as it ended, if it did first)."""
        for run, ended in self.running.end_all():
            if ended is not None:
                self._finish(run, ended, retry=False)
            else:
                where = run.handle.placement() if run.handle is not None else ""
                self._finish(run, Outcome(Ending.INTERRUPTED, detail=why, placement=where))

    def _abandon(self, err: BaseException, quiet: bool = False) -> int:
        """After an unexpected error: end the running jobs and record them, best effort (the
        recording itself may be what failed); the caller re-raises `err`. `quiet`: a disk
        error, which the caller says in one line, with how many jobs were ended (returned)."""
        count = len(self.running)
        if not count:
            return 0
        self._state.stopping = True
        if not quiet:
            log.error("hpsearch: %s: ending %s", type(err).__name__, counted(count, "running job"))
        try:
            self._end_running(f"the sweep stopped: {type(err).__name__}: {err}")
        except Exception as again:
            if not (quiet and cannot_write(again)):  # the disk refusing again says nothing new
                log.error("hpsearch: could not record the ended jobs: %r", again)
            # If ending failed too, whatever is left is ended once more, without recording.
            self.backend.end([r.handle for r in self.running.runs() if r.handle], 1.0)
        return count
