"""launch()'s batch as a JobSource: its jobs in input order, one JobReturn each in that order,
and the launcher's own stopping rule (hydra.launcher.prune) applied to their reports."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from .outcome import Status
from .plan.jobs import Job
from .plan.pruning import make_rule
from .plan.settings import LauncherSettings
from .stream import Ask, JobEnd


class BatchSource:
    def __init__(self, jobs: Sequence[Job], settings: LauncherSettings) -> None:
        self.jobs = list(jobs)
        self.returns: list = [None] * len(self.jobs)  # JobReturns, by input position
        self._next = 0
        self.rule = make_rule(settings.prune, settings.prune_mode, settings.prune_warmup)
        self.curves: dict[Hashable, dict[int, float]] = {}
        self.judges = self.rule is not None

    def ask(self) -> Ask | None:
        if self._next >= len(self.jobs):
            return None
        job = self.jobs[self._next]
        self._next += 1
        return Ask(job.index, job.overrides)

    def job(self, ask: Ask) -> Job:
        """The job asked for: composed and checked already (a batch is checked whole first)."""
        assert isinstance(ask.key, int)
        return self.jobs[ask.key]

    def exhausted(self) -> bool:
        return self._next >= len(self.jobs)

    def remaining(self) -> int:
        return len(self.jobs) - self._next

    def report(self, key: Hashable, step: int, value: float) -> bool:
        curve = self.curves.setdefault(key, {})
        curve[step] = value
        return self.rule is not None and self.rule.hopeless(curve, step)

    def ended(self, key: Hashable, end: JobEnd) -> None:
        assert isinstance(key, int)
        self.returns[key] = end.job_return
        curve = self.curves.pop(key, {})
        if self.rule is not None and end.status is Status.COMPLETED:
            self.rule.complete(curve)
