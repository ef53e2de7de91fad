"""results.csv, the leaderboard, and resume: unit tables, then sweeps in subprocesses."""

from __future__ import annotations

import collections
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import Runner

from hpsearch.leaderboard import leaderboard, objective_mode, ranked
from hpsearch.results_table import HEAD, TAIL, ResultsTable


def row(job: int, status: str, objective: object = "", error: str = "") -> dict:
    return {
        "job": job,
        "status": status,
        "objective": objective,
        "run_dir": f"/s/{job}",
        "config_hash": f"h{job}",
        "error": error,
    }


def test_table_is_rewritten_whole_and_rows_replace_by_config(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.put(row(0, "completed", 0.5), {"lr": "0.1"})
    table.put(row(1, "failed", error="boom\nwith a second line"), {"lr": "0.2", "batch": "8"})
    table.put(row(2, "completed", 0.7) | {"config_hash": "h1"}, {"lr": "0.2", "batch": "8"})
    frame = pd.read_csv(tmp_path / "results.csv")
    assert list(frame.columns) == [*HEAD, "lr", "batch", *TAIL]
    assert frame["job"].tolist() == [0, 2]  # job 2 re-ran job 1's config: one row
    assert frame["status"].tolist() == ["completed", "completed"]
    again = ResultsTable.load(tmp_path)
    assert again.params == ["lr", "batch"] and again.max_job() == 2
    assert not list(tmp_path.glob(".results.csv.*"))


def test_errors_stay_on_one_line(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.put(row(0, "failed", error='Traceback:\n  File "x", line 1\nValueError: "bad", x'), {})
    lines = (tmp_path / "results.csv").read_text().splitlines()
    assert len(lines) == 2
    assert pd.read_csv(tmp_path / "results.csv")["error"][0].endswith('ValueError: "bad", x')


@pytest.mark.parametrize(("mode", "best"), [("max", 2), ("min", 0)])
def test_leaderboard_ranks_by_direction_and_lists_failures(mode: str, best: int) -> None:
    rows = [
        row(0, "completed", "0.1"),
        row(1, "resumed", "0.5"),
        row(2, "completed", "0.9"),
        row(3, "timeout", error="timed out after 5s"),
        row(4, "completed", "nan"),
    ]
    assert ranked(rows, mode)[0]["job"] == best
    text = leaderboard(rows, [], mode)
    assert f"Leaderboard ({mode} objective): 3 finished, 1 failed or unfinished, 5 jobs" in text
    assert "TIMEOUT     job 3 : timed out after 5s" in text


@pytest.mark.parametrize(
    ("cfg", "mode"),
    [
        ({"objective": {"mode": "min"}}, "min"),
        ({"hydra": {"sweeper": {"direction": "minimize"}}}, "min"),
        ({}, "max"),
        (None, "max"),
    ],
)
def test_objective_mode(cfg: dict | None, mode: str) -> None:
    assert objective_mode(cfg) == mode


def starts(marks: Path) -> collections.Counter:
    return collections.Counter(int(x) for x in (marks / "starts.log").read_text().split())


@pytest.mark.slow
def test_six_jobs_one_failure(runner: Runner, marks: Path, tmp_path: Path) -> None:
    result = runner.run(runner.probe_sweep(marks, "x=1,2,3,4,5,6", "fail_x=4"))
    assert result.returncode == 1, result.stdout  # the basic sweeper stops on the failure
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert sorted(frame["x"]) == [1, 2, 3, 4, 5, 6]
    statuses = dict(zip(frame["x"], frame["status"], strict=True))
    assert statuses == {
        1: "completed",
        2: "completed",
        3: "completed",
        4: "failed",
        5: "completed",
        6: "completed",
    }
    assert frame.loc[frame["x"] == 4, "error"].item() == "ValueError: probe asked to raise"
    assert frame.loc[frame["x"] == 6, "objective"].item() == 6.0
    assert "Leaderboard (max objective): 5 finished, 1 failed or unfinished, 6 jobs" in (
        result.stdout
    )
    assert "FAILED      job 3 x=4: ValueError: probe asked to raise" in result.stdout
    report = runner.run(["-m", "hpsearch.report", str(tmp_path / "sweep")])
    assert report.returncode == 0, report.stdout
    assert "Leaderboard (max objective): 5 finished, 1 failed" in report.stdout
    assert (tmp_path / "sweep" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_resume_after_sigint_runs_only_unfinished_jobs(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    args = runner.probe_sweep(marks, "x=0,1,2,3,4,5", "hold_from=2", "hydra.launcher.n_jobs=2")
    (marks / "hold").touch()
    sweep = runner.popen(args)
    deadline = time.monotonic() + 60
    while starts_so_far(marks) < {0, 1, 2, 3}:
        assert time.monotonic() < deadline, "jobs 2 and 3 never started"
        time.sleep(0.1)
    sweep.send_signal(signal.SIGINT)
    out, _ = sweep.communicate(timeout=30)
    assert sweep.returncode == 130, out
    first = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert dict(zip(first["x"], first["status"], strict=True)) == {
        0: "completed",
        1: "completed",
        2: "interrupted",
        3: "interrupted",
    }

    (marks / "hold").unlink()
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    assert starts(marks) == {0: 1, 1: 1, 2: 2, 3: 2, 4: 1, 5: 1}  # 0 and 1 did not run again
    final = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert sorted(final["x"]) == [0, 1, 2, 3, 4, 5]  # every job exactly once
    assert dict(zip(final["x"], final["status"], strict=True)) == {
        0: "resumed",
        1: "resumed",
        2: "completed",
        3: "completed",
        4: "completed",
        5: "completed",
    }
    assert final["job"].is_unique and final["run_dir"].is_unique
    first_dirs = set(first["run_dir"])
    assert all(d not in first_dirs for d in final.loc[final["x"] >= 2, "run_dir"])


def starts_so_far(marks: Path) -> set[int]:
    path = marks / "starts.log"
    return set(starts(marks)) if path.exists() else set()


@pytest.mark.slow
def test_optuna_resumed_trials_return_stored_objectives(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    args = runner.probe_sweep(
        marks,
        "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=4",
        "hydra.sweeper.n_jobs=2",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.sampler.seed=7",
        "x=range(0,1000)",
    )
    first = runner.run(args)
    assert first.returncode == 0, first.stdout
    results = tmp_path / "sweep" / "optimization_results.yaml"
    best_first = yaml.safe_load(results.read_text())
    ran_first = sum(starts(marks).values())
    again = runner.run(args)
    assert again.returncode == 0, again.stdout
    assert sum(starts(marks).values()) == ran_first, "resumed trials must not run again"
    assert again.stdout.count("resumed  x=") == 4
    assert yaml.safe_load(results.read_text()) == best_first  # Optuna got the stored values
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert len(frame) == 4 and set(frame["status"]) == {"resumed"}
