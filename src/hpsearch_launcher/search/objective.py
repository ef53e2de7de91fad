"""A trial's objective from what its job returned, read as Hydra's Optuna sweeper reads it:
`float(value)` (a list or any other iterable of them, one per objective), so numpy scalars, 0-d
arrays and "1.5" are values. Anything else, or a value that is not finite, is no objective:
the trial is told failed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..finite import finite_float


def objective_values(value: Any, n_objectives: int) -> list[float] | None:
    """The values to tell Optuna, or None when `value` is not `n_objectives` finite numbers."""
    if n_objectives == 1:
        items = [value]
    elif isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        items = list(value)
    else:
        return None
    numbers = [finite_float(v) for v in items]
    if len(numbers) != n_objectives or any(n is None for n in numbers):
        return None
    return [n for n in numbers if n is not None]


def expected(n_objectives: int) -> str:
    """What a job must return, in words."""
    if n_objectives == 1:
        return "a finite number (anything float() takes)"
    return f"a list of {n_objectives} finite numbers"
