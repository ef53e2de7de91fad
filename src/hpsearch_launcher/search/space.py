"""The search space: hydra-optuna-sweeper's grammar, read by Hydra's own override parser, as
Optuna distributions; and back again: a trial's values as the job's overrides, a results.csv
cell as a trial's value.

    interval(low,high)              a float in [low, high]  (int(interval(1,8)): an int)
    tag(log,interval(low,high))     the same, sampled on a log scale
    range(start,stop[,step])        start, start+step, ... up to stop, as the Hydra line's
                                    hydra-optuna-sweeper searches it: stop included on 1.3,
                                    left out on 1.4 (shuffle(range(...)): Hydra's values)
    choice(a,b,...), a,b,...        one of these (a config group's options: model=choice(mlp,cnn))
    anything else                   a fixed value, every trial's
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    RangeSweep,
    Transformer,
)
from hydra.errors import HydraException
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ..hydra_line import RANGE_STOP_INCLUDED
from .refusal import SearchSpaceError

GRAMMAR = (
    "interval(low,high), int(interval(low,high)), tag(log,interval(low,high)), "
    "range(start,stop[,step]), choice(a,b,...), or a fixed value"
)


@dataclass(frozen=True)
class Param:
    """One searched parameter."""

    key: str  # the override's key as written (`+extra` keeps its `+`: every job needs it)
    name: str  # its name in the study and in results.csv: the key without +/~
    distribution: BaseDistribution
    texts: tuple[str, ...] = ()  # a choice's options as override text, in the choices' order

    def override(self, value: Any) -> str:
        """The job's override for the trial's `value`."""
        if isinstance(self.distribution, CategoricalDistribution):
            return f"{self.key}={self.texts[int(self.distribution.to_internal_repr(value))]}"
        return f"{self.key}={value!r}"

    def value_of(self, cell: str) -> Any:
        """The value a results.csv cell (the override text after `=`) stands for; None when
        it is not in this space (the space changed since that run)."""
        dist = self.distribution
        try:
            if isinstance(dist, CategoricalDistribution):
                return dist.choices[self.texts.index(cell)]
            number: int | float = int(cell) if isinstance(dist, IntDistribution) else float(cell)
        except ValueError:
            return None
        return number if dist._contains(dist.to_internal_repr(number)) else None


@dataclass(frozen=True)
class SearchSpace:
    params: Mapping[str, Param]  # by name, in the order given
    fixed: tuple[str, ...]  # overrides every trial gets as written

    def distributions(self) -> dict[str, BaseDistribution]:
        return {name: p.distribution for name, p in self.params.items()}

    def overrides(self, values: Mapping[str, Any]) -> tuple[str, ...]:
        """A trial's overrides: the fixed ones, then its sampled values."""
        return (*self.fixed, *(p.override(values[name]) for name, p in self.params.items()))


def _why(err: HydraException) -> str:
    """The parser's reason, its first line (Hydra 1.4 puts "Error when parsing index: 0, ..."
    before it, which repeats the override)."""
    lines = str(err).splitlines()
    return next((x for x in lines if not x.startswith("Error when parsing index")), lines[0])


def parse_space(params: Mapping[str, Any] | None, arguments: Sequence[str]) -> SearchSpace:
    """The space of `hydra.sweeper.params` and the command line's overrides (which win)."""
    texts = [
        ("in hydra.sweeper.params", f"{k}={v if isinstance(v, str) else Transformer.str(v)}")
        for k, v in (params or {}).items()
    ]
    texts += [("on the command line", arg) for arg in arguments]
    parser = OverridesParser.create()
    entries: dict[str, Param | str] = {}  # by name: a later entry for the same name wins
    for where, text in texts:
        try:
            override = parser.parse_overrides([text])[0]
        except HydraException as err:
            raise _error(where, text, _why(err)) from None
        name = override.key_or_group + (f"@{override.package}" if override.package else "")
        entries.pop(name, None)
        if not override.is_sweep_override():
            entries[name] = override.input_line or text
            continue
        try:
            distribution, choices = _distribution(override)
        except (ValueError, HydraException) as err:
            raise _error(where, text, str(err)) from None
        entries[name] = Param(override.get_key_element(), name, distribution, choices)
    return SearchSpace(
        params={n: e for n, e in entries.items() if isinstance(e, Param)},
        fixed=tuple(e for e in entries.values() if isinstance(e, str)),
    )


def _distribution(override: Override) -> tuple[BaseDistribution, tuple[str, ...]]:
    value = override.value()
    tags = set(getattr(value, "tags", ()) or ())
    if tags - {"log"}:
        raise ValueError(f"unknown tag {', '.join(sorted(tags - {'log'}))} (only log is known)")
    if isinstance(value, IntervalSweep):
        assert value.start is not None and value.end is not None
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log="log" in tags), ()
        return FloatDistribution(float(value.start), float(value.end), log="log" in tags), ()
    if isinstance(value, RangeSweep) and not value.shuffle:
        if "log" in tags:
            raise ValueError("a log scale is for interval(...): tag(log,interval(low,high))")
        return _range(value), ()
    if "log" in tags:
        raise ValueError("a log scale is for interval(...): tag(log,interval(low,high))")
    if isinstance(value, (ChoiceSweep, RangeSweep, list)):  # a shuffled range: its values
        return _categorical(list(override.sweep_iterator(transformer=Transformer.identity)))
    raise ValueError(f"{type(value).__name__.lower()}(...) is not a sweep this sweeper knows")


def _range(value: RangeSweep) -> BaseDistribution:
    """range(start, stop, step) as the Hydra line's hydra-optuna-sweeper searches it: start,
    start + step, ... up to stop, stop included on 1.3 and left out on 1.4
    (hydra_line.RANGE_STOP_INCLUDED), as Optuna's IntDistribution/FloatDistribution."""
    start, stop, step = value.start, value.stop, value.step
    assert start is not None and stop is not None and step is not None
    if not step:
        raise ValueError(f"range({start},{stop},{step}): the step must not be 0")
    if all(isinstance(v, int) for v in (start, stop, step)):
        past = (1 if step > 0 else -1) if RANGE_STOP_INCLUDED else 0
        values = range(int(start), int(stop) + past, int(step))
        if not values:
            raise ValueError(f"range({start},{stop},{step}) holds no value")
        first, end = values[0], values[-1]
        return IntDistribution(min(first, end), max(first, end), step=abs(int(step)))
    # In decimals as written, so range(0,1,0.1) holds 1.0 as Optuna's FloatDistribution does.
    start_d, stop_d, step_d = (decimal.Decimal(repr(float(v))) for v in (start, stop, step))
    steps = (stop_d - start_d) / step_d
    n = math.floor(steps) + 1 if RANGE_STOP_INCLUDED else math.ceil(steps)
    if n <= 0:
        raise ValueError(f"range({start},{stop},{step}) holds no value")
    low, high = float(start_d), float(start_d + (n - 1) * step_d)
    return FloatDistribution(min(low, high), max(low, high), step=abs(float(step_d)))


def _categorical(options: list[Any]) -> tuple[BaseDistribution, tuple[str, ...]]:
    """A choice: plain values as they are; a list or a mapping as its override text."""
    choices = [o if isinstance(o, (str, int, float, bool)) else Transformer.str(o) for o in options]
    seen = [(type(c), c) for c in choices]
    twice = next((c for i, c in enumerate(choices) if (type(c), c) in seen[:i]), None)
    if twice is not None:
        raise ValueError(f"{Transformer.str(twice)} is given twice")
    return CategoricalDistribution(choices), tuple(Transformer.str(o) for o in options)


def grid_of(space: SearchSpace) -> dict[str, list[Any]]:
    """The grid sampler's grid: every value of each parameter (Hydra's Optuna sweeper, too,
    takes the grid from the search space)."""
    return {name: _values(name, p.distribution) for name, p in space.params.items()}


def _values(name: str, dist: BaseDistribution) -> list[Any]:
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution) and not dist.log:
        return list(range(dist.low, dist.high + 1, dist.step))
    if isinstance(dist, FloatDistribution) and dist.step is not None:
        n = round((dist.high - dist.low) / dist.step)
        return [
            float(decimal.Decimal(repr(dist.low)) + i * decimal.Decimal(repr(dist.step)))
            for i in range(n + 1)
        ]
    raise SearchSpaceError(
        f"{name}: hydra/sweeper/sampler=grid needs a finite set of values, and this one is "
        "continuous; give range(a,b,step) or choice(a,b,...) (e.g. "
        f"'{name}=range(0,1,0.25)')"
    )


def _error(where: str, text: str, problem: str) -> SearchSpaceError:
    return SearchSpaceError(
        f"{text} ({where}): {problem.rstrip('.')}; a searched value is one of {GRAMMAR}"
    )
