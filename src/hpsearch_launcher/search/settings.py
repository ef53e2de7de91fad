"""The sweeper's settings, checked before any trial starts. Pure: no Optuna, no study."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from ..finite import is_number
from ..setting_checks import Checks, nearest
from .config import SearchSettings
from .refusal import SearchSettingsError
from .sampler_config import DEFAULT_SAMPLER, SAMPLER_CONFIGS

SAMPLERS = tuple(SAMPLER_CONFIGS)
# A sampler config's `_target_` -> its name in the group (hydra-optuna-sweeper 1.4 names motpe's
# target after the function that refuses it).
SAMPLER_TARGETS = {c._target_: name for name, c in SAMPLER_CONFIGS.items()} | {
    "hydra_plugins.hydra_optuna_sweeper.config.raise_motpe_removed": "motpe"
}
# Settings of earlier hpsearch versions, and where they went.
MOVED = {
    "seed": "hydra.sweeper.sampler.seed=123",
    "sampler_args": "hydra.sweeper.sampler.n_startup_trials=5 (the sampler's own fields)",
    "race_at_end": "hydra.sweeper.race=3 (the race runs before the end too)",
}
# A pruner's name -> Optuna's class (search/algorithms.py makes it); "none" prunes nothing.
PRUNER_CLASSES = {
    "median": "MedianPruner",
    "percentile": "PercentilePruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
    "threshold": "ThresholdPruner",
}
PRUNERS = ("none", *PRUNER_CLASSES)
DIRECTIONS = {"minimize": "minimize", "maximize": "maximize", "min": "minimize", "max": "maximize"}


SWEEPER = Checks("sweeper", SearchSettingsError)
fail = SWEEPER.fail


def parse_settings(given: Mapping[str, Any], summary_mode: str | None = None) -> SearchSettings:
    """Check hydra.sweeper's values; raise SearchSettingsError on the first bad one. The
    direction comes back as a tuple of minimize/maximize, one per objective: when not given,
    the SweepSummary callback's `summary_mode` (max/min), else minimize; when given against
    it, refused."""
    known = dataclasses.asdict(SearchSettings())
    for key in given:
        check_setting_key(str(key))
    s = SearchSettings(**(known | dict(given)))
    SWEEPER.whole("n_trials", s.n_trials, 1, "n_trials=20")
    if s.n_jobs is not None:
        SWEEPER.whole("n_jobs", s.n_jobs, 1, "n_jobs=4")
    if s.timeout is not None and not (is_number(s.timeout) and s.timeout > 0):
        raise fail("timeout", s.timeout, "must be a number of seconds > 0, or null", "timeout=3600")
    if not (is_number(s.max_failure_rate) and 0 <= s.max_failure_rate <= 1):
        raise fail(
            "max_failure_rate",
            s.max_failure_rate,
            "must be a number in [0, 1]",
            "max_failure_rate=0.2",
        )
    directions = _directions(s.direction, summary_mode)
    sampler = _sampler(s.sampler)
    SWEEPER.choose("pruner", s.pruner, PRUNERS)
    if not isinstance(s.pruner_args, Mapping):
        raise fail(
            "pruner_args", s.pruner_args, "must be a mapping of keyword arguments", "pruner_args={}"
        )
    if s.pruner_args and s.pruner == "none":
        raise fail("pruner_args", s.pruner_args, "given, but pruner=none", "pruner=median")
    if s.patience is not None:
        SWEEPER.whole("patience", s.patience, 0, "patience=3")
    if not (is_number(s.min_delta) and s.min_delta >= 0):
        raise fail("min_delta", s.min_delta, "must be a number >= 0", "min_delta=0.01")
    SWEEPER.whole("race", s.race, 0, "race=3")
    if len(directions) > 1 and (s.pruner != "none" or s.patience is not None):
        raise fail(
            "pruner",
            s.pruner,
            f"Optuna prunes single-objective searches only, and this one has {len(directions)}",
            "pruner=none",
        )
    for key in ("storage", "study_name", "custom_search_space"):
        value = getattr(s, key)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise fail(key, value, "must be a non-empty string, or null", f"{key}=null")
    if s.search_space is not None and not isinstance(s.search_space, Mapping):
        raise fail("search_space", s.search_space, "must be a mapping, or null", "params={}")
    return dataclasses.replace(s, direction=directions, sampler=sampler)


@dataclass(frozen=True)
class SamplerChoice:
    """The sampler the settings choose: its name in `hydra/sweeper/sampler`, its seed, and the
    fields set to other values than their defaults (a null field is Optuna's own default)."""

    name: str
    args: Mapping[str, Any]
    seed: int | None


def check_setting_key(path: str) -> None:
    """Refuse `hydra.sweeper.<path>` (a dotted key, as a command line names it) if it names no
    setting, with the nearest one; a sampler's field, if no sampler config has it."""
    head, _, rest = path.partition(".")
    known = [f.name for f in dataclasses.fields(SearchSettings)]
    if head in MOVED:
        raise SearchSettingsError(f"hydra.sweeper.{head}: moved to {MOVED[head]}")
    if head not in [*known, "_target_", "_recursive_"]:
        raise SWEEPER.no_such(path, head, known)
    field_name = rest.partition(".")[0]
    if head == "sampler" and field_name:
        fields = sorted({f.name for c in SAMPLER_CONFIGS.values() for f in dataclasses.fields(c)})
        if field_name not in fields:
            raise SWEEPER.no_such(path, field_name, fields, "sampler.")


def _sampler(node: Any) -> SamplerChoice:
    """The `hydra/sweeper/sampler` node (MISSING: the default, tpe) as a SamplerChoice."""
    if node == MISSING:
        return SamplerChoice(DEFAULT_SAMPLER, {}, None)
    if not isinstance(node, Mapping):
        near = nearest(str(node), SAMPLERS) or DEFAULT_SAMPLER
        raise fail(
            "sampler",
            node,
            "the sampler is a config group, as in Hydra's Optuna sweeper: choose it with "
            f"hydra/sweeper/sampler={near} (in YAML: "
            f"- override hydra/sweeper/sampler: {near}); "
            f"one of {', '.join(n for n in SAMPLERS if n != 'motpe')}",
        )
    name = SAMPLER_TARGETS.get(str(node.get("_target_")))
    if name is None:
        raise fail(
            "sampler._target_",
            node.get("_target_"),
            f"not one of the samplers of hydra/sweeper/sampler ({', '.join(SAMPLERS)})",
        )
    if name == "motpe":
        raise SearchSettingsError(
            "hydra/sweeper/sampler=motpe: Optuna 4 removed MOTPESampler; use "
            "hydra/sweeper/sampler=tpe (TPESampler handles several objectives)"
        )
    # Only the fields set otherwise than Hydra's defaults (Optuna's own, bar a deprecation
    # warning for passing some of them at all).
    declared = {f.name: f.default for f in dataclasses.fields(SAMPLER_CONFIGS[name])}
    args = {
        k: v
        for k, v in node.items()
        if not k.startswith("_") and v is not None and (k not in declared or v != declared[k])
    }
    seed = args.pop("seed", None)
    if seed is not None:
        SWEEPER.whole("sampler.seed", seed, 0, "sampler.seed=0")
    return SamplerChoice(name, args, seed)


def _directions(value: Any, summary_mode: str | None) -> tuple[str, ...]:
    if value is None:  # not set: the one place the user said which way is better, if any
        return (DIRECTIONS.get(str(summary_mode), "minimize"),)
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in items if v not in DIRECTIONS]
    if bad or not items:
        raise fail(
            "direction",
            value,
            "must be minimize or maximize (min, max), or a list of them, one per objective",
            "direction=maximize",
        )
    directions = tuple(DIRECTIONS[v] for v in items)
    wanted = DIRECTIONS.get(str(summary_mode))
    if wanted is not None and len(directions) == 1 and directions[0] != wanted:
        other = "min" if summary_mode == "max" else "max"
        raise fail(
            "direction",
            value,
            f"contradicts the SweepSummary callback's mode={summary_mode} (the leaderboard would "
            f"rank the other way): drop hydra.sweeper.direction (it follows the callback's "
            f"mode), or set the callback's mode: {other}",
        )
    return directions
