"""What a job's last attempt became, as the scheduling loop hands it to the recorder whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn

from ..outcome import Ending, Outcome
from ..plan.jobs import Job


@dataclass(frozen=True)
class Attempt:
    """A job's last attempt: how it ended, where, since when, what it reported, its memory."""

    job: Job
    outcome: Outcome
    device: str  # where it ran, as its backend says ("": nowhere, or not known)
    started: float  # epoch seconds, when this attempt began
    attempts: int  # attempts started, this one included
    run_dir: Path
    errors: tuple[str, ...] = ()  # why earlier attempts failed
    last_step: int | None = None  # the last step it reported
    last_value: float | None = None  # and its value
    # The step of the report it was pruned on (a job goes on a little after the decision:
    # last_step is where it stopped); None: not pruned.
    pruned_step: int | None = None
    peak_mb: int | None = None  # the most GPU memory it held, MB; None: unknown
    cap_mb: int | None = None  # the GPU memory cap it ran under, MB; None: none

    @property
    def job_return(self) -> JobReturn | None:
        """The JobReturn its process handed back, if it did (it returned, or raised)."""
        ended = self.outcome.ending in (Ending.RETURNED, Ending.RAISED)
        return self.outcome.job_return if ended else None

    @property
    def value(self) -> Any:
        """What it returned, if it did; a pruned job's last reported value (None: neither)."""
        if self.outcome.ending is Ending.PRUNED:
            return self.last_value
        ret = self.job_return
        return ret._return_value if ret is not None and self.outcome.ok else None

    @property
    def error(self) -> str:
        """Its results row's `error`: why earlier attempts failed, and why this one did."""
        return "; ".join([*self.errors, *([self.outcome.reason] if not self.outcome.ok else [])])
