"""The sweeper's settings, checked before any trial starts. Pure: no Optuna, no study."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from hydra.errors import CompactHydraException

from .config import SearchSettings

SAMPLERS = ("tpe", "random", "cmaes", "gp", "nsgaii")
PRUNERS = ("none", "median", "percentile", "successive_halving", "hyperband", "threshold")
DIRECTIONS = {"minimize": "minimize", "maximize": "maximize", "min": "minimize", "max": "maximize"}


class SearchSettingsError(CompactHydraException):
    """A bad hydra.sweeper.* value: the message names the value, the rule and the fix."""


def fail(key: str, value: Any, rule: str, example: str = "") -> SearchSettingsError:
    # As the user typed it: OmegaConf makes `timeout=-1` the float -1.0.
    shown = int(value) if isinstance(value, float) and value.is_integer() else value
    fix = f" (e.g. hydra.sweeper.{example})" if example else ""
    return SearchSettingsError(f"hydra.sweeper.{key}={shown!r}: {rule}{fix}")


def parse_settings(given: Mapping[str, Any]) -> SearchSettings:
    """Check hydra.sweeper's values; raise SearchSettingsError on the first bad one. The
    direction comes back as a tuple of minimize/maximize, one per objective."""
    known = dataclasses.asdict(SearchSettings())
    for key in given:
        if key not in known:
            near = difflib.get_close_matches(str(key), list(known), n=1)
            hint = (
                f"did you mean hydra.sweeper.{near[0]}?"
                if near
                else f"settings: {', '.join(known)}"
            )
            raise SearchSettingsError(f"hydra.sweeper.{key}: no such setting; {hint}")
    s = SearchSettings(**(known | dict(given)))
    _integer("n_trials", s.n_trials, 1, "n_trials=20")
    _integer("n_jobs", s.n_jobs, 1, "n_jobs=4")
    if s.timeout is not None and not (_is_number(s.timeout) and s.timeout > 0):
        raise fail("timeout", s.timeout, "must be a number of seconds > 0, or null", "timeout=3600")
    if not (_is_number(s.max_failure_rate) and 0 <= s.max_failure_rate <= 1):
        raise fail(
            "max_failure_rate",
            s.max_failure_rate,
            "must be a number in [0, 1]",
            "max_failure_rate=0.2",
        )
    directions = _directions(s.direction)
    _choose("sampler", s.sampler, SAMPLERS)
    _choose("pruner", s.pruner, PRUNERS)
    if s.seed is not None:
        _integer("seed", s.seed, 0, "seed=0")
    for key in ("sampler_args", "pruner_args"):
        if not isinstance(getattr(s, key), Mapping):
            raise fail(
                key, getattr(s, key), "must be a mapping of keyword arguments", f"{key}={{}}"
            )
    if s.pruner_args and s.pruner == "none":
        raise fail("pruner_args", s.pruner_args, "given, but pruner=none", "pruner=median")
    if s.patience is not None:
        _integer("patience", s.patience, 0, "patience=3")
    if not (_is_number(s.min_delta) and s.min_delta >= 0):
        raise fail("min_delta", s.min_delta, "must be a number >= 0", "min_delta=0.01")
    if len(directions) > 1 and (s.pruner != "none" or s.patience is not None):
        raise fail(
            "pruner",
            s.pruner,
            f"Optuna prunes single-objective searches only, and this one has {len(directions)}",
            "pruner=none",
        )
    for key in ("storage", "study_name"):
        value = getattr(s, key)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise fail(key, value, "must be a non-empty string, or null", f"{key}=null")
    return dataclasses.replace(s, direction=directions)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(key: str, value: Any, least: int, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise fail(key, value, f"must be an integer >= {least}", example)


def _choose(key: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        near = difflib.get_close_matches(str(value), options, n=1)
        raise fail(
            key, value, f"must be one of {', '.join(options)}", f"{key}={(near or options)[0]}"
        )


def _directions(value: Any) -> tuple[str, ...]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in items if v not in DIRECTIONS]
    if bad or not items:
        raise fail(
            "direction",
            value,
            "must be minimize or maximize (min, max), or a list of them, one per objective",
            "direction=maximize",
        )
    return tuple(DIRECTIONS[v] for v in items)
