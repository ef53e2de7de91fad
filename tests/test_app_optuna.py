"""hpsearch with Optuna: the study's direction follows objective.mode, or the sweep stops."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import Runner
from hydra_optuna_venv import hydra_optuna_python  # noqa: F401 - the venv's fixture

from hpsearch.app import CONFIG_DIR, optuna_direction
from hpsearch.errors import ConfigError

OPTUNA = "hydra/sweeper=optuna"
HPSEARCH = "hydra/sweeper=hpsearch"


@pytest.mark.parametrize(
    ("args", "added"),
    [
        ([OPTUNA], "hydra.sweeper.direction=maximize"),  # val_accuracy, max: the default
        (
            [OPTUNA, "objective.mode=min", "objective.metric=val_loss"],
            "hydra.sweeper.direction=minimize",
        ),
        ([OPTUNA, "hydra.sweeper.direction=maximize"], None),  # agrees: left as given
        ([OPTUNA, "hydra.sweeper.direction=[maximize,minimize]"], None),  # several objectives
        (["lr=1e-3,1e-2"], None),  # not Optuna: nothing to do
        ([HPSEARCH], "hydra.sweeper.direction=maximize"),  # hpsearch's own Optuna sweeper too
        (
            [HPSEARCH, "objective.mode=min", "objective.metric=val_loss"],
            "hydra.sweeper.direction=minimize",
        ),
    ],
)
def test_direction_follows_objective_mode(args: list[str], added: str | None) -> None:
    out = optuna_direction(args, Path(CONFIG_DIR))
    assert out == (args if added is None else [*args, added])


@pytest.mark.parametrize("sweeper", [OPTUNA, HPSEARCH])
def test_a_direction_against_the_objective_stops_before_any_job(sweeper: str) -> None:
    with pytest.raises(ConfigError) as err:
        optuna_direction([sweeper, "hydra.sweeper.direction=minimize"], Path(CONFIG_DIR))
    assert str(err.value) == (
        "hydra.sweeper.direction=minimize contradicts objective.mode=max (val_accuracy is "
        "better higher): drop hydra.sweeper.direction (it follows objective.mode), or set "
        "objective.mode=min"
    )


@pytest.fixture
def optuna_runner(runner: Runner, hydra_optuna_python: Path) -> Runner:  # noqa: F811
    """A runner whose sweeps run in the venv that has Hydra's Optuna sweeper (optuna < 3)."""
    runner.python = str(hydra_optuna_python)
    return runner


@pytest.mark.slow
def test_optuna_maximises_val_accuracy_by_default(optuna_runner: Runner, tmp_path: Path) -> None:
    result = optuna_runner.run(
        [
            "-m",
            "hpsearch",
            "--multirun",
            OPTUNA,
            "hydra.sweeper.n_trials=3",
            "hydra.sweeper.n_jobs=3",
            "lr=tag(log,interval(1e-4,1e-1))",
            "epochs=2",
            "device=cpu",
            "hydra.sweep.dir=sweep",
        ]
    )
    assert result.returncode == 0, result.stdout
    best = yaml.safe_load((tmp_path / "sweep" / "optimization_results.yaml").read_text())
    import pandas as pd

    frame = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert best["best_value"] == pytest.approx(frame["objective"].max())  # not the worst


@pytest.mark.slow
def test_a_contradicting_direction_is_one_line_exit_2(
    optuna_runner: Runner, tmp_path: Path
) -> None:
    result = optuna_runner.run(
        [
            "-m",
            "hpsearch",
            "--multirun",
            OPTUNA,
            "hydra.sweeper.direction=minimize",
            "device=cpu",
            "hydra.sweep.dir=sweep",
        ]
    )
    assert result.returncode == 2, result.stdout
    assert result.stdout.strip().startswith("hpsearch: error: hydra.sweeper.direction=minimize")
    assert not (tmp_path / "sweep").exists()
