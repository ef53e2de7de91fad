"""Hydra's own Optuna sweeper under the hpsearch launcher: its study's direction (minimize
unless set) against the SweepSummary callback's `mode`. Hydra's sweeper cannot follow the
callback, as hpsearch's does, so a disagreement is refused in the launcher's setup(), before
the study starts: else the study hunts one way and the leaderboard ranks the other."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from .plan.refusal import LauncherSettingsError
from .record.leaderboard import summary_mode
from .search.hydra_optuna import OPTUNA_TARGET

WANTED = {"max": "maximize", "min": "minimize"}


def check_optuna_direction(config: DictConfig) -> None:
    """LauncherSettingsError when Hydra's Optuna sweeper's single direction is not the
    callback's mode; nothing with another sweeper, several objectives or no mode."""
    if OmegaConf.select(config, "hydra.sweeper._target_", default=None) != OPTUNA_TARGET:
        return
    mode = summary_mode(config)
    direction = OmegaConf.select(config, "hydra.sweeper.direction", default="minimize")
    direction = getattr(direction, "name", direction)  # Hydra's config: its Direction enum
    if mode is None or not isinstance(direction, str):
        return  # a list: several objectives, ranked by the first as the user chose
    given = {"min": "minimize", "max": "maximize"}.get(direction, direction)
    if given != WANTED[mode]:
        raise LauncherSettingsError(
            f"hydra.sweeper.direction={direction} (Hydra's Optuna sweeper; minimize unless set) "
            f"contradicts the SweepSummary callback's mode={mode}: set "
            f"hydra.sweeper.direction={WANTED[mode]}, or the callback's mode to agree"
        )
