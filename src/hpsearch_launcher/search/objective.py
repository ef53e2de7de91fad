"""A trial's objective from what its job returned: a number, or a list of numbers (one per
objective). Anything else is no objective: the trial is told failed."""

from __future__ import annotations

import math
from typing import Any


def objective_values(value: Any, n_objectives: int) -> list[float] | None:
    """The values to tell Optuna, or None when `value` is not `n_objectives` finite numbers."""
    items = list(value) if n_objectives > 1 and isinstance(value, (list, tuple)) else [value]
    if len(items) != n_objectives or not all(_finite(v) for v in items):
        return None
    return [float(v) for v in items]


def expected(n_objectives: int) -> str:
    """What a job must return, in words."""
    return "a finite number" if n_objectives == 1 else f"a list of {n_objectives} finite numbers"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
