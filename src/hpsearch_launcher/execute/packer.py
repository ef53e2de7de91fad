"""What the scheduling loop knows of its jobs' GPU memory: each job's measured peak and cap,
and with `jobs_per_gpu=auto` the packing (plan.packing): a job's kind, its reservation booked
where it starts (its cap too), freed when its process is gone, and learned from as it ends."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence

from ..contract import GPU_PEAK_FILE, MEMORY_LIMIT_MB
from ..nvml import GpuMemory
from ..outcome import Outcome
from ..plan.jobs import Job
from ..plan.packing import Estimates, GpuBook, advice, kind_of
from ..plan.settings import LauncherSettingsError
from ..plan.slots import SlotPool
from ..record.reports import reported_cap_mb, reported_peak_mb
from .backend import Execution
from .failures import is_out_of_memory
from .run import Run

log = logging.getLogger("hpsearch.launcher")


class Packer:
    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.settings = execution.settings
        totals = {g: t for g, t in execution.memory_total.items() if t is not None}
        # jobs_per_gpu=auto, with memory figures: the GPUs' reservations; else None.
        self.book = GpuBook(totals) if execution.packs else None
        self.estimates = Estimates()
        self.peaks: list[int] = []  # every job's measured peak GPU memory, MB
        self._next_kind: Hashable = None  # of the last job asked: the next one's, likely
        self._unmeasured: set[Hashable] = set()  # kinds whose jobs no one could measure

    def kind(self, job: Job) -> Hashable:
        """What decides the job's GPU memory, where GPUs are packed by it."""
        if self.book is None:
            return None
        try:
            self._next_kind = kind_of(job.config, self.settings.memory_keys)
        except KeyError as err:
            raise LauncherSettingsError(
                f"hydra.launcher.memory_keys={list(self.settings.memory_keys)}: job {job.num} "
                f"({job.label}) has no key {err.args[0]!r} in its config; name keys of the "
                "task's config (swept or not), e.g. memory_keys=[model]"
            ) from None
        return self._next_kind

    def need(self, run: Run | None) -> int | None:
        """The MB a job reserves; None: it runs alone (its kind unknown). With no job given,
        that of the jobs still to come (as the last one asked)."""
        return self.estimates.need(run.kind if run is not None else self._next_kind)

    def pack(self, pool: SlotPool, head: Run | None) -> None:
        """Let each group take as many more jobs as reservations like the next job's (`head`)
        fit on it now (None: one job alone, on an empty GPU)."""
        if self.book is None:
            return
        need = self.need(head)
        for group in pool.groups:
            pool.limit(group, pool.busy[group] + self.book.count(group, need))

    def observe(self, readings: Mapping[str, GpuMemory]) -> dict[str, str]:
        """Take in what NVML said; the groups that can take no job at all now, and why."""
        if self.book is None:
            return {}
        self.book.observe(readings)
        return {
            g: f"other processes hold {self.book.others[g]} MB"
            for g in readings
            if g in self.book.totals and not self.book.reserved[g] and self.book.room(g) <= 0
        }

    def spare_env(self, group: str, head: Run | None) -> dict[str, str]:
        """The environment a spare on `group` is made with: that of the next job (`head`),
        as far as it can be told now."""
        if self.book is None:
            return self.execution.job_env(group)
        need = self.need(head)
        return self.execution.job_env(group, whole=need is None, cap_mb=need)

    def book_start(self, run: Run, group: str) -> dict[str, str]:
        """The environment of the job's attempt on `group`, its reservation booked there:
        packed, capped at its kind's need (or alone with the whole GPU, its kind unknown);
        else its slot's (or the whole GPU's, for a retry alone)."""
        run.peak_mb = 0
        if self.book is None:
            run.alone = run.whole
            env = self.execution.job_env(group, whole=run.whole)
        else:
            need = None if run.whole else self.need(run)
            run.alone = need is None
            self.book.reserve(group, id(run), need)
            env = self.execution.job_env(group, whole=run.alone, cap_mb=need)
        cap = env.get(MEMORY_LIMIT_MB)
        run.cap_mb = int(cap) if cap else None
        return env

    def released(self, run: Run, outcome: Outcome) -> None:
        """The job's attempt is over, its process gone: its peak (measured, or as it reported
        it), its booking freed, and its kind's estimate learned from it."""
        if run.dir is not None:
            reported = run.dir / GPU_PEAK_FILE
            run.peak_mb = max(run.peak_mb, reported_peak_mb(reported))
            run.cap_mb = run.cap_mb or reported_cap_mb(reported)  # a Ray node's
        if run.peak_mb:
            self.peaks.append(run.peak_mb)
        if self.book is None:
            return
        self.book.release(id(run))
        tail = run.handle.log_tail() if run.handle is not None and not outcome.ok else ""
        if not outcome.finished and is_out_of_memory(outcome, tail):
            self.estimates.outgrown(run.kind)  # its next jobs run alone, and are measured
        elif run.peak_mb:
            self.estimates.learn(run.kind, run.peak_mb)
        elif outcome.ok and self.need(run) is None and run.kind not in self._unmeasured:
            self._unmeasured.add(run.kind)
            log.warning(
                "hpsearch: jobs_per_gpu=auto: job %d ended before NVML listed any of its "
                "processes (a job under a second, or one in another PID namespace) and it "
                "reported no peak (hpsearch_launcher.report_gpu_peak): until one of its kind is "
                "measured, they run one per GPU",
                run.job.num,
            )

    def summary(self) -> str:
        """The end-of-sweep line on how full the GPUs were ("" without figures)."""
        totals: Sequence[int] = [t for t in self.execution.memory_total.values() if t]
        return advice(self.peaks, totals, self.settings.jobs_per_gpu)
