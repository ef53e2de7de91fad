"""Hydra's own Optuna sweeper under the hpsearch launcher: a direction (minimize unless set)
against the SweepSummary callback's mode is refused in one line (issue 46: the study hunted
one way, the leaderboard ranked the other)."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from omegaconf import OmegaConf

from hpsearch_launcher.optuna_direction import check_optuna_direction
from hpsearch_launcher.plan.refusal import LauncherSettingsError
from hpsearch_launcher.search.hydra_optuna import OPTUNA_TARGET


class Direction(enum.Enum):  # as Hydra's Optuna sweeper's config holds it
    minimize = 1
    maximize = 2


def config(mode: str | None, direction: Any = None, target: str = OPTUNA_TARGET) -> Any:
    sweeper: dict[str, Any] = {"_target_": target}
    if direction is not None:
        sweeper["direction"] = direction
    summary = {"_target_": "hpsearch_launcher.callbacks.SweepSummary", "mode": mode}
    return OmegaConf.create({"hydra": {"sweeper": sweeper, "callbacks": {"summary": summary}}})


@pytest.mark.parametrize(
    ("mode", "direction"),
    [("max", None), ("max", "minimize"), ("max", Direction.minimize), ("min", "max")],
)
def test_a_direction_against_the_callbacks_mode_is_one_line(mode: str, direction: Any) -> None:
    with pytest.raises(LauncherSettingsError) as err:
        check_optuna_direction(config(mode, direction))
    wanted = "maximize" if mode == "max" else "minimize"
    assert f"contradicts the SweepSummary callback's mode={mode}: set " in str(err.value)
    assert f"hydra.sweeper.direction={wanted}" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("mode", "direction", "target"),
    [
        ("max", "maximize", OPTUNA_TARGET),
        ("max", Direction.maximize, OPTUNA_TARGET),
        ("min", None, OPTUNA_TARGET),  # Hydra's default, minimize
        (None, "minimize", OPTUNA_TARGET),  # no mode: nothing to agree with
        ("max", ["minimize", "maximize"], OPTUNA_TARGET),  # several objectives
        ("max", "minimize", "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"),
    ],
)
def test_what_agrees_or_is_not_hydras_optuna_sweeper_passes(
    mode: str | None, direction: Any, target: str
) -> None:
    check_optuna_direction(config(mode, direction, target))
