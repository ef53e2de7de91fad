"""Whether a value is a finite number: the one check behind every "finite number" the launcher
and its job-side API accept (a return value, a report, a results cell, a reported peak)."""

from __future__ import annotations

import math


def finite_float(value: object) -> float | None:
    """`value` as a finite float when float() takes it (numbers, numeric strings, numpy's and
    TensorFlow's scalars); None for NaN, inf, a number too large for a float, or anything else.
    Callers that refuse text or bools say so before they call."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
