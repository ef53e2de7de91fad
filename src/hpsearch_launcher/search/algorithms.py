"""The Optuna sampler and pruner the settings name, made before any trial starts: a name or
an argument Optuna would refuse, or a package a sampler lacks, is one line naming it."""

from __future__ import annotations

import importlib.util
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from ..hydra_line import instantiate_trusted
from .config import SearchSettings
from .sampler_config import SAMPLER_CONFIGS
from .settings import PRUNER_CLASSES, SamplerChoice, SearchSettingsError, fail

# A sampler -> the package it needs beyond Optuna. The names, and Optuna's class for each (its
# config's `_target_`), are the sampler group's (sampler_config.SAMPLER_CONFIGS).
SAMPLER_NEEDS = {
    "cmaes": "cmaes",
    "gp": "torch",  # Optuna >= 3.6; its Gaussian process runs on PyTorch
    "qmc": "scipy",
}


# TPE's own default here (issue 48; docs/search.md): trials run at once and are asked as slots
# free, so TPE counts the running ones as bad guesses (Optuna's advice for parallel searches)
# and does not ask again near them; hydra.sweeper.sampler.constant_liar=false turns it off.
LIAR = "constant_liar"


def make_sampler(
    settings: SearchSettings, grid: Mapping[str, list[Any]] | None = None, seed_offset: int = 0
) -> optuna.samplers.BaseSampler:
    """The sampler, seeded with `seed + seed_offset` when the settings give a seed; the grid
    sampler searches `grid` (the search space's values)."""
    choice: SamplerChoice = settings.sampler
    chosen = f"hydra/sweeper/sampler={choice.name}"
    class_name = SAMPLER_CONFIGS[choice.name]._target_.rsplit(".", 1)[-1]
    needs = SAMPLER_NEEDS.get(choice.name)
    cls = getattr(optuna.samplers, class_name, None)
    if cls is None:
        raise _refused(chosen, f"Optuna {optuna.__version__} has no {class_name}")
    if needs and importlib.util.find_spec(needs) is None:
        raise _refused(
            chosen,
            f"Optuna's {class_name} needs the {needs} package, which is not installed "
            f"(pip install {needs})",
        )
    settled: dict[str, Any] = {}
    if choice.name == "grid":
        settled["search_space"] = dict(grid or {})
    if choice.seed is not None:
        settled["seed"] = choice.seed + seed_offset
    args = {k: _instantiated(v) for k, v in choice.args.items()}
    with warnings.catch_warnings():
        if class_name == "TPESampler" and LIAR not in args:
            settled[LIAR] = True
            # Ours to choose, so not the user's warning: Optuna < 5 calls it experimental.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _make(cls, args, "sampler", chosen, settled)


def _refused(chosen: str, rule: str) -> SearchSettingsError:
    return SearchSettingsError(f"{chosen}: {rule} (e.g. hydra/sweeper/sampler=tpe)")


def _instantiated(value: Any) -> Any:
    """A field given as a config with `_target_` (independent_sampler: {_target_: ...}) is
    made, as Hydra's instantiate makes it: an Optuna sampler, as Hydra's Optuna sweeper allows."""
    if isinstance(value, Mapping) and "_target_" in value:
        return instantiate_trusted(dict(value), ["optuna.samplers.*"])
    return value


# hpsearch's defaults where Optuna's differ, each overridden by its own pruner_args key (issue
# 49; docs/search.md says why):
# - median and percentile judge no trial on its first report (step 0: one epoch is noise), as
#   the grid's hydra.launcher.prune_warmup=2 (reports) does;
# - successive_halving judges from the first rung on (min_resource=1): Optuna's "auto" prunes
#   nothing until a trial has completed, while every slot's first trial runs on;
# - hyperband has one bracket (ONE_BRACKET), asynchronous successive halving as Ray Tune's
#   AsyncHyperBand defaults to: Optuna's "auto" max_resource waits for a completed trial too,
#   then sends most of its budget to brackets whose trials run long (27 steps: 4 brackets).
WARMUP_STEPS = 1
PRUNER_DEFAULTS = {
    "median": {"n_warmup_steps": WARMUP_STEPS},
    "percentile": {"n_warmup_steps": WARMUP_STEPS},
    "successive_halving": {"min_resource": 1},
}


def one_bracket(args: Mapping[str, Any]) -> dict[str, Any]:
    """Hyperband's brackets number floor(log_eta(max_resource / min_resource)) + 1, and
    max_resource counts nothing else: max_resource = min_resource makes one bracket."""
    return {"max_resource": args.get("min_resource", 1)}


def make_pruner(settings: SearchSettings) -> optuna.pruners.BasePruner:
    """The pruner; with `patience`, wrapped in Optuna's PatientPruner."""
    inner: optuna.pruners.BasePruner | None = None
    if settings.pruner != "none":
        cls = getattr(optuna.pruners, PRUNER_CLASSES[settings.pruner])
        settled = PRUNER_DEFAULTS.get(settings.pruner)
        args = dict(settings.pruner_args)
        if settings.pruner == "hyperband":
            settled = one_bracket(args)
        inner = _make(cls, args, "pruner_args", f"pruner={settings.pruner}", settled)
    if settings.patience is None:
        return inner or optuna.pruners.NopPruner()
    return optuna.pruners.PatientPruner(
        inner, patience=settings.patience, min_delta=settings.min_delta
    )


def _accepted(cls: Callable[..., Any]) -> list[str]:
    return [
        p.name
        for p in inspect.signature(cls).parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def _make(
    cls: Callable[..., Any],
    args: Mapping[str, Any],
    key: str,
    chosen: str,
    settled: Mapping[str, Any] | None = None,
) -> Any:
    """cls(**settled, **args); `args` are the user's `key` setting, named in any error."""
    accepted = _accepted(cls)
    unknown = [k for k in args if k not in accepted]
    if unknown:
        raise fail(
            key,
            dict(args),
            f"{cls.__name__} ({chosen}) takes no {', '.join(unknown)}; it takes "
            f"{', '.join(accepted)}",
        )
    try:
        return cls(**{**(settled or {}), **args})
    except (TypeError, ValueError) as err:
        raise fail(key, dict(args), f"{cls.__name__} ({chosen}) refused them: {err}") from None
