"""An Optuna sweep (hydra-optuna-sweeper) runs its trials through our launcher.

Hydra's Optuna sweeper pins optuna < 3: its sweeps run in a venv of their own
(tests/hydra_optuna_venv.py), as a user with the `hydra-optuna` extra has it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import Runner, read_records
from hydra_optuna_venv import hydra_optuna_python  # noqa: F401 - the venv's fixture

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def in_hydra_optuna_venv(runner: Runner, hydra_optuna_python: Path) -> None:  # noqa: F811
    runner.python = str(hydra_optuna_python)


def test_optuna_gets_each_trials_objective(runner: Runner, marks: Path, tmp_path: Path) -> None:
    args = runner.probe_sweep(
        marks,
        "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=6",
        "hydra.sweeper.n_jobs=2",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.sampler.seed=3",
        "x=range(0,50)",
        "hydra.launcher.n_jobs=2",
    )
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    assert len(records) == 6
    assert len({r["pid"] for r in records}) == 6
    best = yaml.safe_load((tmp_path / "sweep" / "optimization_results.yaml").read_text())
    # The probe returns x: Optuna saw every trial's value only if its best is the largest x run.
    assert best["best_value"] == max(r["x"] for r in records)
    assert best["best_params"] == {"x": max(r["x"] for r in records)}
    # Optuna's batches of 2 still name runs after the swept key alone.
    names = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert all(name.startswith("x=") for name in names), names


@pytest.mark.parametrize(
    ("max_failure_rate", "message"),
    [
        # Optuna's default: it raises the first failure; the launcher shows the table first.
        (0.0, "ValueError: probe asked to raise"),
        # Failures tolerated: Optuna goes on; the end-of-sweep callback reports and exits 1.
        (1.0, "jobs did not finish; see sweep/results.csv"),
    ],
)
def test_optuna_sweep_with_failed_trials_exits_non_zero(
    runner: Runner, marks: Path, tmp_path: Path, max_failure_rate: float, message: str
) -> None:
    # Even x fail.
    args = runner.probe_sweep(
        marks,
        "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=6",
        "hydra.sweeper.n_jobs=3",
        "hydra.sweeper.sampler.seed=3",
        "x=range(0,50)",
        "fail_mod=2",
        f"hydra.sweeper.max_failure_rate={max_failure_rate}",
    )
    result = runner.run(args)
    assert result.returncode == 1, result.stdout
    assert result.stdout.count("Leaderboard (max objective): ") == 1
    assert message in result.stdout
    # Whatever the sampler chose: every trial that ran has its row, an even x failed with
    # its reason (also in the leaderboard), an odd x completed with its value as objective.
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
    assert len(frame) == len(starts_of(marks)) >= 3
    for _, row in frame.iterrows():
        if row["x"] % 2 == 0:
            assert (row["status"], row["error"]) == ("failed", "ValueError: probe asked to raise")
            assert f"job {row['job']} x={row['x']}: ValueError: probe asked" in result.stdout
        else:
            assert (row["status"], float(row["objective"])) == ("completed", row["x"])


def starts_of(marks: Path) -> list[str]:
    return (marks / "starts.log").read_text().split()


def test_a_study_in_sqlite_resumes_by_name(runner: Runner, marks: Path, tmp_path: Path) -> None:
    """The `optuna` extra's pins make Optuna's sqlite storage work: the same command again
    continues the named study (3 more trials), and the launcher resumes nothing it should not."""
    args = runner.probe_sweep(
        marks,
        "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.n_jobs=3",
        "hydra.sweeper.direction=maximize",
        f"hydra.sweeper.storage=sqlite:///{tmp_path / 'study.db'}",
        "hydra.sweeper.study_name=probe",
        "hydra.sweeper.sampler.seed=5",
        "x=range(0,1000)",
    )
    for _ in range(2):
        result = runner.run(args)
        assert result.returncode == 0, result.stdout
    # Read by the Optuna that wrote it (this venv's newer one would want the schema upgraded).
    read = (
        "import json, optuna, sys; "
        "s = optuna.load_study(study_name='probe', storage=sys.argv[1]); "
        "print(json.dumps([s.best_value, [t.value for t in s.trials]]))"
    )
    out = subprocess.run(
        [runner.python, "-c", read, f"sqlite:///{tmp_path / 'study.db'}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    best_value, values = json.loads(out)
    assert len(values) == 6
    assert best_value == max(values)
