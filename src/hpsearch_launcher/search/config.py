"""The hpsearch sweeper's settings, declared once: every setting's name, type, default and
meaning. `SearchSettings` is what the search reads (frozen, checked by `search.settings`);
`HpsearchSweeperConf`, what Hydra registers as `hydra/sweeper=hpsearch`, is derived from it.

Light on purpose (no Optuna): Hydra's plugin scan imports it in every Hydra process.
No `from __future__ import annotations`: OmegaConf reads these annotations as types.
"""

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from ..config import hydra_config_class
from .sampler_config import DEFAULT_SAMPLER

TARGET = "hydra_plugins.hpsearch_launcher.hpsearch_sweeper.HpsearchSweeper"


@dataclass(frozen=True)
class SearchSettings:
    # The search space, key -> interval(a,b), range(a,b[,step]), choice(a,b,...),
    # tag(log,interval(a,b)) or a fixed value; command-line overrides add to it and win.
    params: Optional[dict[str, Any]] = None  # noqa: UP045 - OmegaConf reads Optional
    # Trials of the whole search, across runs of the sweep dir: a resumed run runs the rest.
    n_trials: int = 20
    # Seconds this run may start trials for (null: no limit); the running ones then finish.
    timeout: Optional[float] = None  # noqa: UP045
    # minimize or maximize (or min, max); a list of them for several objectives. null: the
    # SweepSummary callback's mode (max: maximize), else minimize (Optuna's default).
    direction: Any = None
    # How trials are chosen: the `hydra/sweeper/sampler` group's node (tpe, random, cmaes,
    # nsgaii, grid, gp, qmc: Hydra's Optuna sweeper's), e.g. hydra.sweeper.sampler.seed=123.
    # MISSING, not null: merged after the group's node, it must not replace it.
    sampler: Any = MISSING
    # Which trials end early: none, median, percentile, successive_halving, hyperband, threshold.
    pruner: str = "none"
    # Keyword arguments for the pruner, e.g. {n_warmup_steps: 2} ({percentile: 25} is required).
    pruner_args: dict[str, Any] = field(default_factory=dict)
    # Prune only after this many reports without improvement (Optuna's PatientPruner; null: off).
    patience: Optional[int] = None  # noqa: UP045
    # With patience: the least change that counts as an improvement.
    min_delta: float = 0.0
    # With a pruner: stop a trial after this many reports in a row behind the lead at the
    # same steps, the best completed trial's or a running trial's that has gone further;
    # from a third of a trial's way on, and once no trial is left to ask, from its first
    # report (0: off, only the pruner stops trials).
    race: int = 3
    # Where the study lives: null (memory; a resumed run reads results.csv), an RDB URL
    # (sqlite:///study.db), or a journal file (a path ending in .log).
    storage: Optional[str] = None  # noqa: UP045
    # The study's name in the storage (null: the sweep dir's last two parts and a hash of its
    # absolute path, e.g. 2026-12-07/10-00-00-3fa9c1d2).
    study_name: Optional[str] = None  # noqa: UP045
    # The search stops, and the sweep fails, once failures pass this fraction of this run's
    # trials (0.0: the first failure).
    max_failure_rate: float = 0.0
    # Trials at once: a batch of launch() with another launcher; with hpsearch's, a cap on
    # the trials running (null: as many as the launcher has slots).
    n_jobs: Optional[int] = None  # noqa: UP045
    # Called on each asked trial as f(cfg, trial) to suggest more values (a dotted path, as
    # Hydra's Optuna sweeper's custom_search_space); each `trial.suggest_*(name)` is `name=value`.
    custom_search_space: Optional[str] = None  # noqa: UP045
    # hydra-optuna-sweeper 1.1's search space, key -> {type, low, high, step, log, choices}:
    # deprecated there since 1.2 and here; read, with a warning, when `params` is not given.
    search_space: Optional[dict[str, Any]] = None  # noqa: UP045


# Hydra's defaults list: the sampler is a config group, as in Hydra's Optuna sweeper.
SWEEPER_DEFAULTS = [{"sampler": DEFAULT_SAMPLER}]
HpsearchSweeperConf = hydra_config_class(
    SearchSettings, "HpsearchSweeperConf", __name__, TARGET, defaults=SWEEPER_DEFAULTS
)
