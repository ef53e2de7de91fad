"""The search as a JobSource: the launcher asks for a job whenever a slot frees, and gets a
new trial at once (Optuna's ask), not a batch that waits for its slowest; each report feeds the
pruner, each end is told to the study.

Everything here runs in the sweep process, from the launcher's scheduling loop: no locking.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Hashable

import optuna
from optuna.trial import TrialState

from ..notices import once_per_sweep
from ..outcome import Status
from ..plan.naming import setting_text
from ..stream import Ask, JobEnd
from ..text import short_repr
from .config import SearchSettings
from .history import INTERRUPTED, OWNER, this_sweep
from .objective import expected, objective_values
from .space import SearchSpace

log = logging.getLogger("hpsearch.sweeper")

# The race (settings' `race`): how far along a trial's way, the best completed trial's steps,
# its reports start racing while trials are still to be asked (issue 49; docs/search.md).
RACE_FROM = 1 / 3

# custom_search_space's function, bound to the sweep's config: suggests more values on a trial.
Extend = Callable[[optuna.trial.Trial], object]


class OptunaSource:
    """Trials of `study` over `space` until `n_trials` have ended in all (`ended_before` of
    them in earlier runs), the timeout passes, or too many fail."""

    def __init__(
        self,
        study: optuna.Study,
        space: SearchSpace,
        settings: SearchSettings,
        ended_before: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.study = study
        self.space = space
        self.distributions = space.distributions()
        self.n_trials = settings.n_trials
        self.n_objectives = len(study.directions)
        self.ended_before = ended_before
        self.planned = max(0, settings.n_trials - ended_before)  # this run's share of n_trials
        self.max_failure_rate = settings.max_failure_rate
        self.n_jobs = settings.n_jobs  # trials running at once at most (None: no cap)
        self.extend: Extend | None = None
        self.clock = clock
        self.deadline = None if settings.timeout is None else clock() + settings.timeout
        self.timeout = settings.timeout
        self.running: dict[int, optuna.trial.Trial] = {}
        self.curves: dict[int, dict[int, float]] = {}  # each running trial's reports by step
        self.furthest: dict[int, int] = {}  # each running trial's furthest step reported
        # Each running trial's reports in a row behind the lead's, in the race.
        self.behind: dict[int, int] = {}
        self.ended_now = 0
        self.failed_now = 0
        self.timed_out = False
        self.owner = this_sweep()
        # Optuna prunes single objectives only; NopPruner never prunes.
        nop = isinstance(study.pruner, optuna.pruners.NopPruner)
        self.judges = self.n_objectives == 1 and not nop
        self.race = settings.race
        self.maximize = study.directions[0] is optuna.study.StudyDirection.MAXIMIZE
        self.notices = once_per_sweep(log)
        # The best completed trial's reports (an earlier run's, in a resumed study), the
        # race's lead: kept here, read from the study when a trial of this run completes.
        self.lead: dict[int, float] = {}
        self.lead_end = 0  # its furthest step
        if self.judges:
            with contextlib.suppress(ValueError):  # no trial has completed yet
                self._lead(study.best_trial)

    # -- JobSource --------------------------------------------------------------------------

    def ask(self) -> Ask | None:
        if self.exhausted() or self.ended_total + len(self.running) >= self.n_trials:
            return None
        if self.n_jobs is not None and len(self.running) >= self.n_jobs:
            return None
        trial = self.study.ask(self.distributions)
        trial.set_user_attr(OWNER, self.owner)
        self.running[trial.number] = trial
        self.curves[trial.number] = {}
        self.furthest[trial.number] = -1
        self.behind[trial.number] = 0
        values = {name: trial.params[name] for name in self.space.params}
        overrides = self.space.overrides(values)
        if self.extend is not None:  # define-by-run: its suggestions become overrides
            self.extend(trial)
            overrides += tuple(
                f"{name}={value}" for name, value in trial.params.items() if name not in values
            )
        return Ask(trial.number, overrides)

    def exhausted(self) -> bool:
        if self.deadline is not None and not self.timed_out and self.clock() >= self.deadline:
            self.timed_out = True
            log.info(
                "hpsearch: the search's timeout (%ss) has passed: no new trial starts; "
                "%d running finish",
                self.timeout,
                len(self.running),
            )
        return self.ended_total >= self.n_trials or self.timed_out or self.failed_too_often

    def remaining(self) -> int:
        if self.exhausted():
            return 0
        return max(0, self.n_trials - self.ended_total - len(self.running))

    def report(self, key: Hashable, step: int, value: float) -> bool:
        trial = self.running.get(key)  # type: ignore[call-overload]
        if trial is None or self.n_objectives > 1:  # Optuna prunes single objectives only
            return False
        curve = self.curves[trial.number]
        if step not in curve:  # Optuna keeps a step's first value and warns about the rest
            try:
                trial.report(value, step)
            except (TypeError, ValueError) as err:
                self.notices.warn("report", f"trial {trial.number}: report ignored: {err}")
                return False
            curve[step] = value
            self.furthest[trial.number] = max(step, self.furthest[trial.number])
            behind = self._behind(trial.number, step, value)
            self.behind[trial.number] = self.behind[trial.number] + 1 if behind else 0
        lost = 0 < self.race <= self.behind[trial.number]
        return lost or bool(trial.should_prune())

    def _behind(self, number: int, step: int, value: float) -> bool:
        """The race (`race`): whether this report of trial `number` is behind the lead at its
        step, the best completed trial's report of that step or a running trial's that has
        gone past it (and will end sooner). Once no trial is left to ask (all asked, or the
        timeout passed), a slot a trial frees goes to no one and the search ends when its last
        trial does: every report races. Before, while a freed slot starts a new trial, a
        report races from RACE_FROM of a trial's way on (the steps of the best completed
        trial: where trials end); the pruner alone judges the earlier ones."""
        if not (self.race and self.judges):
            return False
        if self.remaining() > 0 and not (self.lead and step >= (self.lead_end + 1) * RACE_FROM):
            return False
        rivals = [
            c[step]
            for n, c in self.curves.items()
            if n != number and step in c and self.furthest[n] > step
        ]
        if step in self.lead:
            rivals.append(self.lead[step])
        if not rivals:
            return False
        return value < max(rivals) if self.maximize else value > min(rivals)

    def ended(self, key: Hashable, end: JobEnd) -> None:
        trial = self.running.pop(key, None)  # type: ignore[call-overload]
        if trial is None:
            return
        steps = self.curves.pop(trial.number)
        self.furthest.pop(trial.number)
        self.behind.pop(trial.number)
        if end.status is Status.INTERRUPTED:
            # Failed in the study (a storage keeps no RUNNING trial), marked to run again.
            trial.set_user_attr(INTERRUPTED, True)
            self._tell(trial, state=TrialState.FAIL)
            return
        self.ended_now += 1
        if end.status in (Status.COMPLETED, Status.RESUMED):
            value = end.job_return.return_value
            values = objective_values(value, self.n_objectives)
            if values is None:
                self.notices.warn(
                    "objective",
                    f"trial {trial.number} (job {end.job_num}) returned "
                    f"{short_repr(value, 60)}, not "
                    f"{expected(self.n_objectives)}: told to Optuna as failed",
                )
                self._failed(trial)
            else:
                self._tell(trial, values=values)
                self._best(trial.number, end.job_num)
        elif end.status is Status.PRUNED:
            # Its last report, if the study has not heard it (made in an earlier run, or after
            # the decision, before the job stopped): the trial's curve ends where the job's does.
            unheard = end.step is not None and end.step not in steps
            if unheard and end.value is not None and self.n_objectives == 1:
                trial.report(end.value, end.step)
            self._tell(trial, state=TrialState.PRUNED)
        else:  # FAILED, TIMEOUT
            self._failed(trial)

    # -- the search's state -----------------------------------------------------------------

    @property
    def ended_total(self) -> int:
        return self.ended_before + self.ended_now

    @property
    def failed_too_often(self) -> bool:
        """More of this run's trials failed than max_failure_rate allows of them all."""
        return self.failed_now > self.max_failure_rate * self.planned

    @property
    def none_completed(self) -> bool:
        """Every trial this run ended failed (none completed, none was pruned or resumed)."""
        return self.ended_now > 0 and self.failed_now == self.ended_now

    def failure_line(self) -> str:
        if not self.failed_too_often:
            return f"all {self.failed_now} of this run's trials failed"
        return (
            f"{self.failed_now} of this run's {self.planned} trials failed, more than "
            f"max_failure_rate={self.max_failure_rate} allows: the search stopped"
        )

    def _failed(self, trial: optuna.trial.Trial) -> None:
        self.failed_now += 1
        self._tell(trial, state=TrialState.FAIL)

    def _tell(self, trial: optuna.trial.Trial, **how: object) -> None:
        # skip_if_finished: a sweep sharing the study may have failed it already.
        try:
            self.study.tell(trial, skip_if_finished=True, **how)  # type: ignore[arg-type]
        except RuntimeError as err:
            # The grid sampler stops its study once the grid is searched: outside optimize()
            # that is this error, after the trial is told (n_trials is the grid's size anyway).
            if "Study.stop" not in str(err):
                raise

    def _lead(self, best: optuna.trial.FrozenTrial) -> None:
        self.lead = dict(best.intermediate_values)
        self.lead_end = max(self.lead, default=0)

    def _best(self, number: int, job_num: int) -> None:
        if self.n_objectives == 1 and (best := self.study.best_trial).number == number:
            self._lead(best)
            log.info(
                "hpsearch: trial %d (job %d) is the best so far: %.6g (%s)",
                number,
                job_num,
                best.value,
                setting_text(best.params, ", "),
            )
