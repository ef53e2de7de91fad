"""What happens to one job while the sweep runs: its state, its attempts, where, since when,
what it reported, why it was pruned. The job itself (plan.jobs.Job) never changes."""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from hydra.core.utils import JobStatus

from ..contract import END_FILE
from ..outcome import Ending, Outcome
from ..plan.jobs import Job, run_dir
from ..plan.settings import LauncherSettings
from ..record.adopt import read_end
from ..record.attempt import Attempt
from ..record.recorder import make_return
from ..record.reports import ReportReader
from .backend import JobHandle, JobSpec
from .failures import REQUEUED, Retry, alone_words, is_out_of_memory, retry_kind
from .payload import config_payload

log = logging.getLogger("hpsearch.launcher")


class RunState(Enum):
    """Where a job is in the sweep. A run moves down this list; a retry goes back to QUEUED
    (or AWAITING_DEVICE, to run alone on its device), a run pruned while running to STOPPING."""

    QUEUED = "queued"  # waiting for a free slot
    AWAITING_DEVICE = "awaiting its device"  # a retry alone: its device's other jobs drain
    RUNNING = "running"
    STOPPING = "stopping"  # pruned: asked to stop (its stop file), ended if still there later
    ENDED = "ended"  # recorded, its source told


@dataclass(frozen=True)
class Pruning:
    """Why the source pruned a running job, and when its process tree is ended if it is
    still there then."""

    reason: str  # "pruned at step 3 (reported 0.25)"
    step: int  # the step of the report it was pruned on
    kill_at: float  # monotonic


@dataclass
class Run:
    """What happens to one job while the sweep runs (the job itself does not change)."""

    job: Job
    state: RunState = RunState.QUEUED
    group: str = ""  # the slot group its attempt holds (a GPU id, cpu, ray:0)
    handle: JobHandle | None = None
    started: float = 0.0  # monotonic, of the current attempt
    started_wall: float = 0.0
    deadline: float | None = None
    attempts: int = 0  # attempts started so far
    oom_attempts: int = 0  # of those, attempts that ran out of memory
    lost_attempts: int = 0  # of those, attempts whose node left the cluster
    requeues: int = 0  # of those, attempts the cluster ended at its time limit or preempted
    # How the attempt shares its GPU (not a state: it holds while the attempt runs).
    whole: bool = False  # the next attempt gets its device alone (after running out of memory)
    alone: bool = False  # this attempt has its GPU alone, with the whole memory
    errors: list[str] = field(default_factory=list)  # why earlier attempts failed
    dir: Path | None = None  # claimed when the job first starts
    key: Hashable = None  # the source's handle for the job
    reports: ReportReader | None = None  # what the job reported (its run dir's reports file)
    pruning: Pruning | None = None  # set when the source prunes it (None: it did not)
    kind: Hashable = None  # what decides its GPU memory (plan.packing.kind_of)
    peak_mb: int = 0  # the most GPU memory its process tree held, as measured (this attempt)
    cap_mb: int | None = None  # the GPU memory cap this attempt runs under, in MB

    def set_deadline(self, timeout: float | None) -> None:
        """hydra.launcher.timeout counts from when the job began running, as its backend
        says (a Ray task may wait for a place first)."""
        if timeout is not None and self.deadline is None and self.handle is not None:
            began = self.handle.started_at()
            if began is not None:
                self.deadline = began + timeout

    def prune(self, step: int, value: float, grace: float) -> Pruning:
        """The source pruned it on its report (step, value): it is asked to stop, and its
        process tree is ended `grace` seconds from now if it is still there."""
        reason = f"pruned at step {step} (reported {value:.6g})"
        self.pruning = Pruning(reason, step, time.monotonic() + grace)
        self.state = RunState.STOPPING
        return self.pruning

    def spec(self, share: float) -> JobSpec:
        """What a process needs for the next attempt (its run dir claimed), on `share` of
        its GPU."""
        assert self.dir is not None
        job = self.job
        return JobSpec(
            job.num,
            self.attempts,
            config_payload(job.config),
            str(self.dir / "stdout.log"),
            str(self.dir / "stderr.log"),
            share=share,
            subdir=self.dir.name if job.name else "",
            config_hash=job.config_hash,
            overrides=job.overrides,
        )

    def attempt(self, outcome: Outcome, placement: str) -> Attempt:
        """What its last attempt became, for the recorder (`placement`: where it ran)."""
        step, value = self.reports.last if self.reports is not None else (None, None)
        return Attempt(
            self.job,
            outcome,
            placement,
            self.started_wall,
            self.attempts,
            self.dir or run_dir(self.job),
            tuple(self.errors),
            step,
            value,
            self.pruning.step if self.pruning is not None else None,
            self.peak_mb or None,
            self.cap_mb,
        )

    def failed(self, outcome: Outcome, settings: LauncherSettings, requeues: int) -> Retry | None:
        """Count a failed attempt (out of memory? its node lost?); how it runs again, if the
        policy allows (then why it failed is kept for its row). `requeues`: the most times the
        cluster may end it at its time limit or preempt it (Execution.requeues)."""
        tail = self.handle.log_tail() if self.handle is not None else ""
        oom = is_out_of_memory(outcome, tail)
        if oom and self.alone:  # more memory than this cannot be given: no retry
            cap = f" ({self.cap_mb} MB)" if self.cap_mb else ""
            alone, too_big = alone_words(self.group)
            self.errors.append(f"attempt {self.attempts}: out of memory {alone}{cap}: {too_big}")
            return None
        self.oom_attempts += oom
        self.lost_attempts += outcome.ending is Ending.LOST
        self.requeues += outcome.ending in REQUEUED
        kind = retry_kind(
            outcome,
            oom,
            self.attempts,
            self.oom_attempts,
            settings,
            self.lost_attempts,
            (self.requeues, requeues),
        )
        if kind is not None:
            prefix = "out of memory: " if oom else ""
            seconds = time.monotonic() - self.started
            self.errors.append(
                f"attempt {self.attempts} ({seconds:.1f}s): {prefix}{outcome.reason}"
            )
            self.whole = kind is Retry.ALONE
        return kind


def returned(run: Run, outcome: Outcome) -> Outcome:
    """A job whose task returned is completed, whatever its process did after that (it was
    killed, timed out, lost its server, closed its output, exited non-zero): the end file this
    attempt wrote in its run dir, the moment its task returned, holds the return value."""
    if outcome.ending in (Ending.RETURNED, Ending.RAISED, Ending.PRUNED) or run.dir is None:
        return outcome
    end_file = run.dir / END_FILE
    try:
        written = end_file.stat().st_mtime
    except OSError:
        return outcome
    end = read_end(run.dir) if written >= run.started_wall else None
    if end is None or "return" not in end:  # none, or an earlier attempt's
        return outcome
    log.warning(
        "job %d returned (its end file holds the value), then %s: it is completed",
        run.job.num,
        outcome.reason or outcome.ending.value,
    )
    ret = make_return(run.job, JobStatus.COMPLETED, end["return"], str(run.dir))
    return Outcome(
        Ending.RETURNED, job_return=ret, placement=outcome.placement, leftovers=outcome.leftovers
    )


def pruned(run: Run, outcome: Outcome) -> Outcome:
    """How a job the source pruned ended: pruned, whatever its process did once asked to stop
    (a task that saw `should_stop()` returns; one that did not is ended). Its reports are
    read to the end (not told to the source: the decision is made), so the step it stopped
    at is the last one in its reports file, as its results.csv row and its curve say."""
    if run.reports is not None:
        run.reports.read()
    assert run.pruning is not None
    stopped = run.reports.last[0] if run.reports is not None else None
    detail = run.pruning.reason
    if stopped is not None and stopped != run.pruning.step:
        detail += f", stopped at step {stopped}"
    return Outcome(Ending.PRUNED, detail=detail, placement=outcome.placement)
