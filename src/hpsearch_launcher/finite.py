"""Whether a value is a number, and a finite one: the one check behind every number the launcher
and its job-side API accept (a setting, a return value, a report, a results cell, a reported
peak)."""

from __future__ import annotations

import math


def is_number(value: object) -> bool:
    """An int or a float, not a bool (NaN and inf included): what a numeric setting or a results
    table's number is."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_float(value: object) -> float | None:
    """`value` as a finite float when float() takes it (numbers, numeric strings, numpy's and
    TensorFlow's scalars); None for NaN, inf, a number too large for a float, or anything else.
    Callers that refuse text or bools say so before they call."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
