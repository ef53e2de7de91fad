"""`python -m hpsearch` end to end, in subprocesses, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import Runner

pytestmark = pytest.mark.slow

TF_NOISE = ("oneDNN", "absl::InitializeLog", "cuda_", "E0000", "I0000")


def test_single_run_writes_metrics(runner: Runner, tmp_path: Path) -> None:
    result = runner.run(["-m", "hpsearch", "device=cpu", "epochs=1", "hydra.run.dir=run"])
    assert result.returncode == 0, result.stdout
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert record["status"] == "completed" and len(record["history"]) == 1
    assert 0.0 <= record["final"]["test_accuracy"] <= 1.0
    assert (tmp_path / "run" / "hpsearch.log").exists()  # hydra.job.name, not __main__
    assert "epoch 1/1" in result.stdout
    assert not [n for n in TF_NOISE if n in result.stdout], result.stdout
    assert result.stdout.rstrip().splitlines()[-1] == "hpsearch: run dir run"


# The columns of results.csv, whichever backend ran the sweep.
COLUMNS = [
    "job",
    "batch",
    "lr",
    "status",
    "objective",
    "test_accuracy",
    "test_loss",
    "train_accuracy",
    "train_loss",
    "val_accuracy",
    "val_loss",
    "train_time_s",  # metrics.json's own timing: fit and evaluation, no start-up
    "last_step",  # the trainer reports its objective each epoch (hpsearch_launcher.report)
    "last_value",
    "device",
    "gpu_peak_mb",  # measured where NVML answers: empty on the CPU
    "gpu_cap_mb",
    "start",
    "end",
    "wall_time_s",
    "attempts",
    "leftovers",  # a job's processes it left running, ended with it ("": Ray does not look)
    "run_dir",
    "config_hash",
    "error",
    "return",
]


@pytest.mark.parametrize(
    "backend",
    [
        ["hydra.launcher.n_jobs=4"],
        # A Ray the sweep starts on this machine; it is stopped after (the runner fixture
        # fails the test if any process of it is left).
        pytest.param(["hydra.launcher.backend=ray"], marks=pytest.mark.xdist_group("ray")),
    ],
    ids=["local", "ray"],
)
# Four TensorFlow jobs, two at a time on Ray (two CPUs): 5 minutes beside other work on 2
# cores (the suite's own 300 s cut one off as its last job ended). A bound for a hang only.
@pytest.mark.timeout(900)
def test_multirun_through_the_gpu_pool_launcher(
    runner: Runner, tmp_path: Path, backend: list[str]
) -> None:
    result = runner.run(
        [
            "-m",
            "hpsearch",
            "--multirun",
            "lr=1e-3,1e-2",
            "batch=32,128",
            "device=cpu",
            "epochs=1",
            "hydra.sweep.dir=sweep",
            *backend,
        ],
        timeout=840,
    )
    assert result.returncode == 0, result.stdout
    names = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert names == [
        "batch=128,lr=0.001",
        "batch=128,lr=0.01",
        "batch=32,lr=0.001",
        "batch=32,lr=0.01",
    ]
    for name in names:
        run_dir = tmp_path / "sweep" / name
        record = json.loads((run_dir / "metrics.json").read_text())
        assert record["device"]["type"] == "cpu"
        assert f"lr={record['params']['lr']}" in name
        assert "epoch 1/1" in (run_dir / "stdout.log").read_text()
        assert "hpsearch: run dir" not in (run_dir / "stdout.log").read_text()  # single runs only
        assert (run_dir / "stderr.log").exists()
    assert result.stdout.count(" done ") == 4
    # The sweep's table holds each run's real metrics; the leaderboard closes the sweep.
    table = pd.read_csv(tmp_path / "sweep" / "results.csv", dtype={"device": str})
    assert list(table.columns) == COLUMNS
    assert sorted(table["status"]) == ["completed"] * 4
    assert (
        table["device"].str.match(r"^cpu@[\d.]+/[0-9a-f]{8}$")
        if "ray" in backend[0]
        else table["device"] == "cpu"
    ).all()
    assert table["test_accuracy"].between(0, 1).all()
    assert (table["objective"] == table["val_accuracy"]).all()
    # The trainer leaves no process running; Ray's workers are not looked at (empty).
    assert (table["leftovers"].isna() if "ray" in backend[0] else table["leftovers"] == 0).all()
    assert "Leaderboard (max val_accuracy): 4 finished, 0 failed or unfinished, 4 jobs" in (
        result.stdout
    )
    assert all((tmp_path / "sweep" / name / "tb").is_dir() for name in names)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["model=transformer"], 2, "hpsearch: error: model=transformer: no such model"),
        (["lr=-1"], 2, "hpsearch: error: lr=-1: must be > 0 (e.g. lr=1e-3)"),
        (["batch=0"], 2, "hpsearch: error: batch=0: must be > 0 (e.g. batch=32)"),
        (["data=npz", "data.path=missing.npz"], 2, "data.path='missing.npz': no such file"),
        (["data=npz", "data.path=wrong.npz"], 2, "data.path='wrong.npz': missing keys y_test"),
        # A sweep says it the way a single run does: one line, exit status 2.
        (["--multirun", "lr=1e-3,-1"], 2, "hpsearch: error: job 1 (lr=-1): lr=-1: must be > 0"),
        (
            ["--multirun", "lr=1,2", "hydra.launcher.memory_fraction=1.5"],
            2,
            "hpsearch: error: hydra.launcher.memory_fraction=1.5: must be a number in (0, 1]",
        ),
    ],
)
def test_bad_input_is_one_line_before_training(
    runner: Runner, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    np.savez(
        tmp_path / "wrong.npz",
        x_train=np.zeros((4, 2)),
        y_train=np.zeros(4),
        x_test=np.zeros((2, 2)),
    )
    result = runner.run(["-m", "hpsearch", *args, "device=cpu", "hydra.sweep.dir=sweep"])
    assert result.returncode == code, result.stdout
    assert message in result.stdout
    assert "Traceback" not in result.stdout
    assert "HYDRA_FULL_ERROR" not in result.stdout  # no second format
    assert "epoch 1/" not in result.stdout  # a single run trained nothing (its output is here)
    assert not (tmp_path / "sweep").exists() or not list(
        (tmp_path / "sweep").glob("*/metrics.json")
    )
