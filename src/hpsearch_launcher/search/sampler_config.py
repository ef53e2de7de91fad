"""The `hydra/sweeper/sampler` config group: Hydra's Optuna sweeper's sampler configs, field for
field (hydra-optuna-sweeper 1.3.2 and the 1.4 line), so a config written for
`hydra/sweeper=optuna` (`- override hydra/sweeper/sampler: tpe`, `sampler: {seed: 123}`,
`hydra.sweeper.sampler.n_startup_trials=5`) means the same with `hydra/sweeper=hpsearch`.
The `_target_`s are Hydra's too: with both plugins installed, either registration serves.

Light on purpose (no Optuna): Hydra's plugin scan imports it in every Hydra process. A null
field means "Optuna's own default"; a field left at its default is not passed to Optuna.
No `from __future__ import annotations`: OmegaConf reads these annotations as types.
"""

import importlib.util
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import MISSING

from ..hydra_line import store

# ruff: noqa: UP045 - OmegaConf reads Optional


@dataclass
class SamplerConfig:
    _target_: str = MISSING


@dataclass
class GridSamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.GridSampler"
    # The grid is the search space's values (hydra.sweeper.params), made at the sweep's start.
    _partial_: bool = True


@dataclass
class TPESamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.TPESampler"
    seed: Optional[int] = None
    # 1.3.2's values (Optuna's defaults), not 1.4's nulls: with hydra-optuna-sweeper 1.3 in the
    # same environment, its sweeper may get this node, and Optuna 2.x asserts on a null.
    consider_prior: Optional[bool] = True
    prior_weight: Optional[float] = 1.0
    consider_magic_clip: Optional[bool] = True
    consider_endpoints: Optional[bool] = False
    n_startup_trials: int = 10
    n_ei_candidates: int = 24
    multivariate: bool = False
    warn_independent_sampling: Optional[bool] = True


@dataclass
class RandomSamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.RandomSampler"
    seed: Optional[int] = None


@dataclass
class CmaEsSamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.CmaEsSampler"
    seed: Optional[int] = None
    x0: Optional[dict[str, Any]] = None
    sigma0: Optional[float] = None
    independent_sampler: Optional[Any] = None
    warn_independent_sampling: bool = True
    consider_pruned_trials: bool = False
    restart_strategy: Optional[Any] = None
    inc_popsize: int = 2
    use_separable_cma: bool = False
    source_trials: Optional[Any] = None


@dataclass
class NSGAIISamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.NSGAIISampler"
    seed: Optional[int] = None
    population_size: int = 50
    mutation_prob: Optional[float] = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5
    constraints_func: Optional[Any] = None


@dataclass
class MOTPESamplerConfig(SamplerConfig):
    # 1.3.2's fields, so its configs compose; refused before any trial (Optuna 4 removed it).
    _target_: str = "optuna.samplers.MOTPESampler"
    seed: Optional[int] = None
    consider_prior: bool = True
    prior_weight: float = 1.0
    consider_magic_clip: bool = True
    consider_endpoints: bool = False
    n_startup_trials: int = 10
    n_ehvi_candidates: int = 24


@dataclass
class GPSamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.GPSampler"
    seed: Optional[int] = None
    independent_sampler: Optional[Any] = None
    n_startup_trials: int = 10
    deterministic_objective: bool = False
    constraints_func: Optional[Any] = None
    warn_independent_sampling: bool = True


@dataclass
class QMCSamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.QMCSampler"
    seed: Optional[int] = None
    qmc_type: str = "sobol"
    scramble: bool = False
    independent_sampler: Optional[Any] = None
    warn_asynchronous_seeding: bool = True
    warn_independent_sampling: bool = True


# The group's options, by name; `hydra/sweeper/sampler=<name>`.
SAMPLER_CONFIGS: dict[str, type[SamplerConfig]] = {
    "tpe": TPESamplerConfig,
    "random": RandomSamplerConfig,
    "cmaes": CmaEsSamplerConfig,
    "nsgaii": NSGAIISamplerConfig,
    "grid": GridSamplerConfig,
    "gp": GPSamplerConfig,
    "qmc": QMCSamplerConfig,
    "motpe": MOTPESamplerConfig,
}
DEFAULT_SAMPLER = "tpe"


def store_samplers() -> None:
    """The group, unless Hydra's Optuna sweeper is installed: its own registration (in the
    same plugin scan, after ours) serves, and on Hydra 1.4 it warns when ours came first."""
    if importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is not None:
        return
    for name, node in SAMPLER_CONFIGS.items():
        store(group="hydra/sweeper/sampler", name=name, node=node, provider="hpsearch")
