"""What the sweep report draws, computed without a figure: axes, ticks, the best runs, and the
positions of each run on the parallel-coordinates view.

Pure functions of the sweep's rows, so the tests check what is drawn without reading pixels.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.ticker import LogLocator, MaxNLocator

from hpsearch_launcher.api import finite_float
from hpsearch_launcher.results import PRUNED

LOG_SPAN = 20.0  # positive values spanning more than this factor get a log axis
MAX_TICKS = 6  # ticks per axis at most: Optuna's floats must not crowd an axis with labels
MIN_TICK_GAP = 0.12  # the least distance between two ticks, as a fraction of the axis
MAX_CATEGORY_CHARS = 14  # longer category names are cut, so labels stay beside their axis
# The 2-D panel: runs at one spot are set this far apart (as a fraction of the x axis), over
# at most SPREAD of it, and each value of a third parameter gets one of MARKERS.
DODGE = 0.07
SPREAD = 0.2
MARKERS = "osD^vP"


@dataclass(frozen=True)
class Sweep:
    """What the report needs from a sweep dir."""

    name: str
    rows: list[dict[str, str]]
    params: list[str]
    mode: str  # "max" or "min"
    metric: str
    scores: list[float]  # per row: its objective if it finished, else NaN
    columns: list[str] = field(default_factory=list)  # the leaderboard's, beside the objective
    # Rows of an earlier run's unfinished jobs that a later run ran again: history, not runs.
    superseded: list[dict[str, str]] = field(default_factory=list)
    # Row index -> [(step, value), ...]: what each run reported as it trained (if it did).
    curves: dict[int, list[tuple[int, float]]] = field(default_factory=dict)

    @property
    def finished(self) -> list[int]:
        return [i for i, s in enumerate(self.scores) if not math.isnan(s)]

    @property
    def failed(self) -> list[int]:
        """Rows without an objective: failed or unfinished, but not pruned."""
        pruned = set(self.pruned)
        return [i for i, s in enumerate(self.scores) if math.isnan(s) and i not in pruned]

    @property
    def pruned(self) -> list[int]:
        """Rows the sweep's pruner stopped early: they ended, they did not fail."""
        return [i for i, r in enumerate(self.rows) if r.get("status") == PRUNED]

    def best(self) -> list[int]:
        """Every finished row whose objective is the best one: ties are all the best."""
        done = [self.scores[i] for i in self.finished]
        if not done:
            return []
        top = max(done) if self.mode == "max" else min(done)
        return [i for i, s in enumerate(self.scores) if s == top]


@dataclass(frozen=True)
class Axis:
    """One quantity across the rows: a number (or a category's index) per row, and its ticks."""

    label: str
    positions: list[float]  # per row, in data units; NaN where the row has no value
    categories: list[str]  # names of positions 0, 1, ...; empty on a numeric axis
    log: bool
    ticks: list[float]
    tick_labels: list[str]

    @property
    def numeric(self) -> bool:
        return not self.categories

    @property
    def distinct(self) -> int:
        return len({p for p in self.positions if not math.isnan(p)})

    def unit(self, value: float) -> float:
        """Where `value` sits between the axis' lowest and highest value, from 0 to 1."""
        if self.categories:
            return value / (len(self.categories) - 1) if len(self.categories) > 1 else 0.5
        low, high = self.scaled_range()
        return (_scaled(value, self.log) - low) / (high - low) if high > low else 0.5

    def scaled_range(self) -> tuple[float, float]:
        """The lowest and highest value, in log10 on a log axis."""
        known = [p for p in self.positions if not math.isnan(p)]
        return _scaled(min(known), self.log), _scaled(max(known), self.log)


def param_axis(label: str, values: Sequence[str], allow_log: bool = True) -> Axis:
    """A numeric axis when every value is a finite number, else a categorical one."""
    numbers = [as_float(v) for v in values]
    if values and all(n is not None for n in numbers):
        return numeric_axis(label, [float(n) for n in numbers if n is not None], allow_log)
    names = [v if v else "(unset)" for v in values]
    categories = sorted(set(names), key=_natural_key)
    indices = [float(categories.index(v)) for v in names]
    shown = categories[:: math.ceil(len(categories) / MAX_TICKS)]
    return Axis(
        label,
        indices,
        categories,
        log=False,
        ticks=[float(categories.index(c)) for c in shown],
        tick_labels=[_shorten(c) for c in shown],
    )


def numeric_axis(label: str, positions: Sequence[float], allow_log: bool = True) -> Axis:
    """`positions` may hold NaN for rows without a value (a failed run's objective)."""
    known = [p for p in positions if not math.isnan(p)]
    log = allow_log and min(known) > 0 and max(known) / min(known) > LOG_SPAN
    ticks = spaced(candidate_ticks(known, log), log)
    return Axis(label, list(positions), [], log, ticks, [tick_label(t) for t in ticks])


def candidate_ticks(values: Sequence[float], log: bool) -> list[float]:
    """Each value when there are few (a grid); round numbers inside the range when many."""
    distinct = sorted(set(values))
    if len(distinct) <= MAX_TICKS:
        return distinct
    low, high = distinct[0], distinct[-1]
    locator = LogLocator(numticks=MAX_TICKS) if log else MaxNLocator(nbins=MAX_TICKS - 1)
    slack = (high - low) * 1e-9
    inside = [float(t) for t in locator.tick_values(low, high) if low - slack <= t <= high + slack]
    return inside if len(inside) >= 2 else sorted({low, *inside, high})


def spaced(ticks: Sequence[float], log: bool) -> list[float]:
    """Drop ticks that would sit closer than MIN_TICK_GAP to the one before: no label overlaps."""
    if len(ticks) < 2:
        return list(ticks)
    low, high = _scaled(ticks[0], log), _scaled(ticks[-1], log)
    kept = [ticks[0]]
    for tick in ticks[1:]:
        if (_scaled(tick, log) - _scaled(kept[-1], log)) / (high - low) >= MIN_TICK_GAP:
            kept.append(tick)
    return kept


def tick_label(value: float) -> str:
    """At most about 3 significant digits: 0.0012345678 -> 0.00123, 3e-4 rather than 0.0003."""
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    if value == round(value):
        return str(round(value))  # batch sizes and epochs: 1024, not 1.02e+03
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def scatter_pair(axes: Sequence[Axis]) -> tuple[Axis, Axis] | None:
    """The two numeric axes with the most distinct values (in their order), or None."""
    numeric = [a for a in axes if a.numeric and a.distinct > 1]
    if len(numeric) < 2:
        return None
    first, second = sorted(numeric, key=lambda a: -a.distinct)[:2]
    return (first, second) if axes.index(first) < axes.index(second) else (second, first)


def marker_axis(axes: Sequence[Axis], pair: tuple[Axis, Axis]) -> Axis | None:
    """The parameter whose values get a marker shape each on the 2-D panel, so that runs
    differing only in it are told apart: the first one not plotted with 2 to len(MARKERS)
    values, a categorical one first; None when there is none."""
    rest = [a for a in axes if all(a is not p for p in pair) and 2 <= a.distinct <= len(MARKERS)]
    return sorted(rest, key=lambda a: a.numeric)[0] if rest else None


def value_names(axis: Axis) -> tuple[list[str], list[int]]:
    """The axis' distinct values by name, and each row's index among them."""
    values = sorted(set(axis.positions))
    names = axis.categories or [tick_label(v) for v in values]
    return names, [values.index(p) for p in axis.positions]


def dodged(x: Axis, y: Axis, rows: Sequence[int]) -> list[float]:
    """The x position of each of `rows` on the 2-D panel: runs at one (x, y) spot (a grid's
    runs that differ only in a third parameter) are set side by side, in the order given, so
    that none hides another."""
    spots: dict[tuple[float, float], list[int]] = {}
    for row in rows:
        spots.setdefault((x.positions[row], y.positions[row]), []).append(row)
    low, high = x.scaled_range()
    shifted: dict[int, float] = {}
    for (position, _), group in spots.items():
        step = min(DODGE, SPREAD / max(len(group) - 1, 1)) * (high - low)
        for k, row in enumerate(group):
            offset = (k - (len(group) - 1) / 2) * step
            shifted[row] = _unscaled(_scaled(position, x.log) + offset, x.log)
    return [shifted[row] for row in rows]


def padded_limits(axis: Axis, pad: float) -> tuple[float, float]:
    """The axis' range widened by `pad` of it on each side (in log10 on a log axis): markers
    at the lowest and highest value stay inside the frame."""
    low, high = axis.scaled_range()
    margin = pad * ((high - low) or 1.0)
    return _unscaled(low - margin, axis.log), _unscaled(high + margin, axis.log)


def parallel_lines(axes: Sequence[Axis], rows: Sequence[int]) -> list[list[tuple[float, float]]]:
    """Each row's polyline over the axes, as (axis number, 0..1) points; a row with no value on
    an axis (a failed run's objective) stops before it."""
    lines = []
    for row in rows:
        points = []
        for i, axis in enumerate(axes):
            position = axis.positions[row]
            if math.isnan(position):
                break
            points.append((float(i), axis.unit(position)))
        lines.append(points)
    return lines


OUTLIER_IQRS = 3.0  # a value beyond this many interquartile ranges of the quartiles: an outlier


def robust_bounds(values: Sequence[float], mode: str) -> tuple[float, float]:
    """The lowest and highest of `values` but those far worse than the rest (beyond Tukey's
    far fence, OUTLIER_IQRS interquartile ranges past the quartile on the worse side, as
    `mode`, max or min, says): what one diverged run cannot stretch. A run far better than
    the rest is kept: it is the one to see. With fewer than 4 values, the plain min and max."""
    ordered = sorted(values)
    if len(ordered) < 4:
        return ordered[0], ordered[-1]
    q1, q3 = statistics.quantiles(ordered, n=4, method="inclusive")[::2]
    fence = OUTLIER_IQRS * (q3 - q1)
    if mode == "max":
        return next(v for v in ordered if v >= q1 - fence), ordered[-1]
    return ordered[0], next(v for v in reversed(ordered) if v <= q3 + fence)


def as_float(value: str) -> float | None:
    return finite_float(value)


def _natural_key(value: str) -> tuple[int, float, str]:
    number = as_float(value)
    return (1, 0.0, value) if number is None else (0, number, value)


def _scaled(value: float, log: bool) -> float:
    return math.log10(value) if log else value


def _unscaled(value: float, log: bool) -> float:
    return 10**value if log else value


def _shorten(name: str) -> str:
    if len(name) <= MAX_CATEGORY_CHARS:
        return name
    return name[: MAX_CATEGORY_CHARS - 1] + "\N{HORIZONTAL ELLIPSIS}"
