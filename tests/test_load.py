"""Load: 200 trivial jobs, 5% failing, on 2 slots (a soak test: `pytest -m soak`)."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner

pytestmark = [pytest.mark.slow, pytest.mark.soak]


def test_two_hundred_jobs_with_five_percent_failures(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    result = runner.run(
        runner.probe_sweep(marks, "x=range(0,200)", "fail_mod=20", "hydra.launcher.n_jobs=2"),
        timeout=900,
    )
    assert result.returncode == 1, result.stdout[-3000:]  # some jobs failed
    path = tmp_path / "sweep" / "results.csv"
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 201 and {len(r) for r in rows} == {len(rows[0])}  # no torn line
    frame = pd.read_csv(path)
    assert sorted(frame["x"]) == list(range(200))
    failed = set(frame.loc[frame["status"] == "failed", "x"])
    assert failed == set(range(0, 200, 20))
    assert set(frame.loc[~frame["x"].isin(failed), "status"]) == {"completed"}
    assert (
        frame.loc[frame["status"] == "completed", "objective"]
        == frame.loc[frame["status"] == "completed", "x"]
    ).all()
    assert "Leaderboard (max objective): 190 finished, 10 failed or unfinished, 200 jobs" in (
        result.stdout
    )
