"""A sweep fed while it runs: the scheduling loop asks a `JobSource` for the next job whenever a
slot is free, hands it every report a running job makes (it may answer: end it now), and tells
it every job's end as it happens. `launch()`'s batch is the simple source: a list, asked in
order. An Optuna search is another: it asks a new trial the moment a slot frees.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from .outcome import Status


@dataclass(frozen=True)
class Ask:
    key: Hashable  # the source's own handle for the job (a list index, an Optuna trial number)
    overrides: tuple[str, ...]  # the job's overrides, as a sweeper hands them to launch()


@dataclass(frozen=True)
class JobEnd:
    job_return: Any  # hydra's JobReturn, as launch() returns it
    status: Status  # COMPLETED, RESUMED, FAILED, TIMEOUT, INTERRUPTED or PRUNED
    step: int | None  # the last step the job reported (None: it never reported)
    value: float | None  # what it reported at that step
    job_num: int  # its results.csv row (the `job` column)


class JobSource(Protocol):
    # Whether report() can answer True (a pruner): each job then waits for its reports to be
    # judged, so that a pruned one stops before its next epoch.
    judges: bool

    def ask(self) -> Ask | None:
        """The next job to start now, or None if there is none now."""
        ...

    def exhausted(self) -> bool:
        """No job will come any more: the sweep ends once the running ones have."""
        ...

    def remaining(self) -> int | None:
        """How many more jobs it will give at most (None: it cannot say): warm spares are
        made for no more jobs than that."""
        ...

    def report(self, key: Hashable, step: int, value: float) -> bool:
        """A running job reported `value` at `step`; True: end it now (pruned)."""
        ...

    def ended(self, key: Hashable, end: JobEnd) -> None:
        """A job ended, whatever its status (a resumed one at once, without running)."""
        ...
