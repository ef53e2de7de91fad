"""The race (hydra.sweeper.race, issue 49): a running trial whose reports are behind the lead
at the same steps, `race` (3) of them in a row, is pruned; the lead is the best completed
trial's report of the step, or a running trial's that has gone past that step. Every report
races once no trial is left to ask; before, those from a third of a trial's way on (the best
completed trial's steps). With it off, without a pruner or without a trial ahead, only the
pruner decides."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from hpsearch_launcher.outcome import Status
from hpsearch_launcher.search.optuna_source import OptunaSource
from hpsearch_launcher.search.settings import parse_settings
from hpsearch_launcher.search.space import parse_space
from hpsearch_launcher.stream import JobEnd

BEST = [0.5, 0.6, 0.7, 0.8, 0.9]  # the first trial's curve, completed: the best
BEHIND = [0.45, 0.55, 0.65]


class NeverPrunes(optuna.pruners.BasePruner):
    """A pruner that judges and never prunes: what is pruned here, the race pruned."""

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        return False


def a_source(n_trials: int, direction: str = "maximize", **settings: Any) -> OptunaSource:
    pruner: optuna.pruners.BasePruner = settings.pop("pruner", NeverPrunes())
    study = optuna.create_study(direction=direction, pruner=pruner)
    given = parse_settings({"n_trials": n_trials, "direction": direction, **settings})
    return OptunaSource(study, parse_space(None, ["x=interval(0,1)"]), given, 0)


def completed(src: OptunaSource, curve: list[float]) -> None:
    ask = src.ask()
    assert ask is not None
    for step, value in enumerate(curve):
        assert src.report(ask.key, step, value) is False
    ret = JobReturn(status=JobStatus.COMPLETED, _return_value=curve[-1])
    src.ended(ask.key, JobEnd(ret, Status.COMPLETED, len(curve) - 1, curve[-1], 0))


def verdicts(src: OptunaSource, curve: list[float], others: int = 0) -> list[bool]:
    """A trial's verdict on each of its reports, `others` more trials asked beside it."""
    ask = src.ask()
    assert ask is not None
    for _ in range(others):
        assert src.ask() is not None
    return [src.report(ask.key, step, value) for step, value in enumerate(curve)]


@pytest.mark.parametrize(
    ("n_trials", "others", "curve", "expected"),
    [
        (2, 0, BEHIND, [False, False, True]),  # the last trial, 3 reports in a row behind
        (2, 0, [0.45, 0.65, 0.65, 0.75, 0.85], [False] * 4 + [True]),  # ahead once: anew
        (2, 0, [0.55, 0.65, 0.75], [False] * 3),  # ahead all the way
        (2, 0, BEST, [False] * 5),  # level is not behind
        (3, 0, BEHIND, [False] * 3),  # one trial is still to be asked: not a third of the way
        (3, 0, [0.1] * 5, [False, False, False, False, True]),  # from step 5/3 on: 2, 3, 4
        (3, 1, BEHIND, [False, False, True]),  # the last one asked beside it
        (2, 0, [0.55, 0.65, 0.75, 0.85, 0.95, 0.1, 0.1, 0.1], [False] * 8),  # past the best's
    ],
)
def test_the_last_trials_race_the_best(
    n_trials: int, others: int, curve: list[float], expected: list[bool]
) -> None:
    src = a_source(n_trials)
    completed(src, BEST)
    assert verdicts(src, curve, others) == expected


def test_race_is_the_reports_in_a_row() -> None:
    src = a_source(2, race=1)
    completed(src, BEST)
    assert verdicts(src, [0.45]) == [True]


def test_minimizing_behind_is_above() -> None:
    src = a_source(2, "minimize")
    completed(src, [0.5, 0.4, 0.3])
    assert verdicts(src, [0.55, 0.45, 0.35]) == [False, False, True]


@pytest.mark.parametrize(
    "settings",
    [{"race": 0}, {"pruner": optuna.pruners.NopPruner()}],
    ids=["race=0", "no pruner"],
)
def test_no_race_when_off_or_without_a_pruner(settings: dict[str, Any]) -> None:
    src = a_source(2, **settings)
    completed(src, BEST)
    assert verdicts(src, [0.1] * 5) == [False] * 5


def test_a_running_trial_further_along_is_raced() -> None:
    """A trial behind one that has gone past its steps will end later and is not better: it
    stops, as it would behind a completed trial; the one ahead runs on."""
    src = a_source(2)
    ahead, last = src.ask(), src.ask()
    assert ahead is not None and last is not None
    assert [src.report(ahead.key, step, v) for step, v in enumerate(BEST[:4])] == [False] * 4
    assert [src.report(last.key, step, v) for step, v in enumerate(BEHIND)] == [
        False,
        False,
        True,
    ]
    assert src.report(ahead.key, 4, 0.1) is False  # nobody is past its step 4


def test_a_running_trial_level_is_no_rival() -> None:
    """A running trial's report counts once it has reported a later step: at the same step
    neither will end sooner, and neither stops the other."""
    src = a_source(2)
    first, last = src.ask(), src.ask()
    assert first is not None and last is not None
    for step, (high, low) in enumerate(zip(BEST, BEHIND, strict=False)):
        assert src.report(first.key, step, high) is False
        assert src.report(last.key, step, low) is False


def test_no_race_without_a_trial_ahead() -> None:
    src = a_source(2)
    first = src.ask()
    assert first is not None
    assert src.report(first.key, 0, 0.9) is False
    assert verdicts(src, [0.1] * 5) == [False] * 5


def test_the_race_runs_once_the_timeout_has_passed() -> None:
    now = [0.0]
    settings = parse_settings({"n_trials": 10, "direction": "maximize", "timeout": 60})
    study = optuna.create_study(direction="maximize", pruner=NeverPrunes())
    src = OptunaSource(study, parse_space(None, ["x=interval(0,1)"]), settings, 0, lambda: now[0])
    completed(src, [0.9] * 30)  # a third of its way: step 10
    ask = src.ask()
    assert ask is not None
    for step in range(5):  # 8 trials are still to be asked
        assert src.report(ask.key, step, 0.4) is False
    now[0] = 60.0
    assert [src.report(ask.key, step, 0.4) for step in range(5, 8)] == [False, False, True]


def test_a_resumed_search_races_its_earlier_runs_best() -> None:
    """The lead of a resumed study is the best its earlier runs completed."""
    study = optuna.create_study(direction="maximize", pruner=NeverPrunes())
    given = parse_settings({"n_trials": 3, "direction": "maximize"})
    space = parse_space(None, ["x=interval(0,1)"])
    completed(OptunaSource(study, space, given, 0), BEST)
    src = OptunaSource(study, space, given, 1)
    assert verdicts(src, [0.1] * 5) == [False] * 4 + [True]  # steps 2, 3, 4: from 5/3 on


def test_a_raced_trial_is_told_pruned() -> None:
    src = a_source(2)
    completed(src, BEST)
    ask = src.ask()
    assert ask is not None
    assert [src.report(ask.key, step, 0.1) for step in range(3)] == [False, False, True]
    ret = JobReturn(status=JobStatus.COMPLETED, _return_value=0.1)
    src.ended(ask.key, JobEnd(ret, Status.PRUNED, 2, 0.1, 1))
    assert [t.state for t in src.study.trials] == [TrialState.COMPLETE, TrialState.PRUNED]
