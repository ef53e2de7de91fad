"""The stopping rules for the launcher's own jobs (a plain grid's, `hydra.launcher.prune`): pure,
curves in, verdicts out. RULES is the one table: a new rule is a class here and a line there.

`median`: a running job whose best value so far is worse than the median of the completed
jobs' values at the same step is stopped, once it has reported `warmup` steps and at least
MIN_COMPLETED completed jobs reported that step (as Optuna's MedianPruner, for a grid).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Protocol

MIN_COMPLETED = 2  # completed curves at a step before a job is judged at it


class Rule(Protocol):
    def complete(self, curve: Mapping[int, float]) -> None: ...

    def hopeless(self, curve: Mapping[int, float], step: int) -> bool: ...


class MedianRule:
    def __init__(self, mode: str, warmup: int) -> None:
        self.better = max if mode == "max" else min
        self.mode = mode
        self.warmup = warmup
        self.completed: list[Mapping[int, float]] = []  # each completed job's curve

    def complete(self, curve: Mapping[int, float]) -> None:
        """A job that ran to its end: its curve joins those the others are judged against."""
        if curve:
            self.completed.append(dict(curve))

    def hopeless(self, curve: Mapping[int, float], step: int) -> bool:
        """Whether the job with this curve (its reports so far) should stop at `step`."""
        if len(curve) < self.warmup:
            return False
        others = [c[step] for c in self.completed if step in c]
        if len(others) < MIN_COMPLETED:
            return False
        best = self.better(v for s, v in curve.items() if s <= step)
        median = statistics.median(others)
        return best < median if self.mode == "max" else best > median


# hydra.launcher.prune's names -> the rule, made from (prune_mode, prune_warmup); none: no rule.
RULES: dict[str, Callable[[str, int], Rule] | None] = {"none": None, "median": MedianRule}


def make_rule(name: str, mode: str, warmup: int) -> Rule | None:
    """The rule `hydra.launcher.prune` names (checked already), or None for none."""
    make = RULES[name]
    return None if make is None else make(mode, warmup)
