"""results.csv, the leaderboard, and resume: unit tables, then sweeps in subprocesses."""

from __future__ import annotations

import collections
import logging
import re
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from conftest import Runner
from hydra_optuna_venv import hydra_optuna_python  # noqa: F401 - the venv's fixture
from omegaconf import OmegaConf

from hpsearch_launcher.callbacks import SweepSummary
from hpsearch_launcher.record import table as table_module
from hpsearch_launcher.record.table import SAVE_INTERVAL_S, TAIL
from hpsearch_launcher.results import (
    ResultsFileError,
    ResultsTable,
    leaderboard,
    ranked,
    summary_metric,
    summary_options,
)


def row(job: int, status: str, objective: object = "", error: str = "", digest: str = "") -> dict:
    return {
        "job": job,
        "status": status,
        "objective": objective,
        "run_dir": f"/s/{job}",
        "config_hash": digest or f"h{job}",
        "error": error,
        "return": "" if objective == "" else str(objective),
    }


def test_one_row_per_job_even_for_the_same_config(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.put(row(0, "completed", 0.5), {"lr": "0.1"})
    table.put(row(1, "failed", error="boom\nwith a second line"), {"lr": "0.2", "batch": "8"})
    table.put(row(2, "completed", 0.7, digest="h1") | {"acc": 0.9}, {"lr": "0.2", "batch": "8"})
    frame = pd.read_csv(tmp_path / "results.csv")
    assert list(frame.columns) == ["job", "lr", "batch", "status", "objective", "acc", *TAIL]
    assert frame["job"].tolist() == [0, 1, 2]  # job 2 ran job 1's config again: its own row
    assert frame["status"].tolist() == ["completed", "failed", "completed"]
    again = ResultsTable.load(tmp_path)
    assert again.params == ["lr", "batch"] and again.values == ["objective", "acc"]
    assert again.max_job() == 2
    assert [r["job"] for r in again.finished()["h1"]] == ["2"]
    assert not list(tmp_path.glob(".results.csv.*"))


def test_superseded_rows_are_not_failures(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.put(row(0, "failed", error="boom", digest="h1"), {})
    table.put(row(1, "interrupted", error="SIGINT", digest="h0"), {})  # another config
    table.put(row(2, "failed", error="this run's own", digest="h1"), {})
    table.put(row(4, "failed", error="this run's own too", digest="h1"), {})
    table = ResultsTable.load(tmp_path)  # as a resumed sweep reads it: strings from the file
    table.supersede("".join(["h", "1"]), before_job=2, by_job=3)  # rows from 2 on: this run's
    table.put(row(3, "completed", 0.5, digest="h1"), {})
    rows = list(ResultsTable.load(tmp_path).rows.values())
    statuses = [r["status"] for r in rows]
    assert statuses == ["superseded", "interrupted", "failed", "completed", "failed"]
    assert rows[0]["error"] == "failed: boom; re-run as job 3"
    # Five rows, four jobs: the superseded row is an earlier attempt at job 3's config.
    assert "3 failed or unfinished, 4 jobs; 1 superseded" in leaderboard(rows, [], "max")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a,b\n1,2\n", "has no job, status, run_dir, config_hash column"),
        ("job,status,run_dir,config_hash\n0,completed,d\n", "line 2: fewer cells"),
        ("job,status,run_dir,config_hash\n0,completed,d,h,extra\n", "line 2: 5 cells"),
        ("job,status,run_dir,config_hash\n0,completed,d,h,1,2,3,4\n", "line 2: 8 cells"),
        ("job,status,run_dir,config_hash\nx,completed,d,h\n", "line 2: job 'x' is not a job"),
        ("job,status,run_dir,config_hash\n0,done,d,h\n", "line 2: status 'done' is not one"),
        ("job,status,run_dir,config_hash\n0,failed,d,h\n0,failed,d,h\n", "job 0 appears twice"),
    ],
)
def test_a_results_file_not_ours_is_named_in_one_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    (tmp_path / "results.csv").write_text(text)
    with pytest.raises(ResultsFileError) as err:
        ResultsTable.load(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'results.csv'} ") and problem in message
    assert "hydra.launcher.resume=false" in message and "\n" not in message


def test_set_aside_keeps_every_earlier_file(tmp_path: Path) -> None:
    for n in range(3):
        (tmp_path / "results.csv").write_text(f"run {n}")
        ResultsTable(tmp_path / "results.csv").set_aside()
    kept = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert kept == {
        "results.csv.bak": "run 0",
        "results.csv.bak2": "run 1",
        "results.csv.bak3": "run 2",
    }


def test_files_honour_the_umask(tmp_path: Path) -> None:
    import os

    old = os.umask(0o022)
    try:
        ResultsTable(tmp_path / "results.csv").put(row(0, "completed", 1.0), {})
    finally:
        os.umask(old)
    assert (tmp_path / "results.csv").stat().st_mode & 0o777 == 0o644


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
    # The counts add up: job 4 finished, with a NaN objective the table cannot rank.
    assert f"Leaderboard ({mode} objective): 4 finished, 1 failed or unfinished, 5 jobs; 1 " in text
    assert "; 1 finished without a finite objective" in text
    assert "TIMEOUT     job 3 : timed out after 5s" in text


def test_the_leaderboard_writes_values_as_run_dirs_do_and_names_its_metric() -> None:
    """A search's lr as its run dir names it (6 significant digits), times to a tenth of a
    second, and the metric it ranks by in its header and its column."""
    best = row(0, "completed", "0.8556") | {"lr": "0.0023834587189112567"}
    best |= {"train_time_s": "12.345678", "test_accuracy": "0.8222222328186035"}
    text = leaderboard(
        [best], ["lr"], "max", columns=["test_accuracy", "train_time_s"], metric="val_accuracy"
    )
    assert text.startswith("Leaderboard (max val_accuracy): 1 finished"), text
    header, cells = (line.split() for line in text.splitlines()[1:3])
    assert header[:5] == ["rank", "val_accuracy", "lr", "test_accuracy", "train_time_s"]
    assert cells[:5] == ["1", "0.8556", "0.00238346", "0.822222", "12.3"]
    # A task's bare return value is the objective, as before.
    assert leaderboard([best], ["lr"], "max").startswith("Leaderboard (max objective): ")


def test_the_leaderboards_failed_and_pruned_lines_round_values_as_its_table_does() -> None:
    """A search's lr at 6 significant digits on every line (the failures' printed all 19)."""
    long_lr = {"lr": "0.0023834587189112567"}
    rows = [
        row(0, "completed", "0.8556") | long_lr,
        row(1, "failed", error="boom") | long_lr,
        row(2, "pruned", error="pruned at step 1 (reported 0.2)") | long_lr,
    ]
    text = leaderboard(rows, ["lr"], "max")
    assert "0.0023834587" not in text, text
    assert "job 1 lr=0.00238346: boom" in text and "job 2 lr=0.00238346: pruned at step 1" in text


@pytest.mark.parametrize(
    ("cfg", "metric"),
    [
        ({"hydra": {"callbacks": {"summary": {"metric": "val_accuracy"}}}}, "val_accuracy"),
        ({"hydra": {"callbacks": {"summary": {"mode": "min"}}}}, "objective"),
        ({"objective": {"metric": "val_loss"}}, "objective"),  # the app's keys are not read
        (None, "objective"),
    ],
)
def test_summary_metric(cfg: dict | None, metric: str) -> None:
    assert summary_metric(cfg) == metric


def test_the_end_of_sweep_leaderboard_has_no_empty_line_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ResultsTable(tmp_path / "results.csv").put(row(0, "completed", "0.9"), {"lr": "0.1"})
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
    with caplog.at_level(logging.INFO, logger="hpsearch.sweep"):
        SweepSummary(mode="max").on_multirun_end(config)
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith("Leaderboard (max objective): 1 finished"), repr(message)


@pytest.mark.parametrize(
    ("cfg", "options"),
    [
        (
            {"hydra": {"callbacks": {"summary": {"mode": "min", "columns": ["acc"]}}}},
            ("min", ["acc"]),
        ),
        ({"hydra": {"sweeper": {"direction": "minimize"}}}, ("min", [])),
        ({"hydra": {"sweeper": {"direction": ["minimize", "maximize"]}}}, ("min", [])),
        ({"objective": {"mode": "min"}}, ("max", [])),  # the app's own keys are not read
        # hpsearch's sweeper, direction not set and no callback mode: it minimises, as Optuna
        ({"hydra": {"sweeper": {"direction": None}}}, ("min", [])),
        # the callback under another key, found by its class
        (
            {"hydra": {"callbacks": {"board": {"_target_": "a.SweepSummary", "mode": "min"}}}},
            ("min", []),
        ),
        ({}, ("max", [])),
        (None, ("max", [])),
    ],
)
def test_summary_options(cfg: dict | None, options: tuple) -> None:
    assert summary_options(cfg) == options


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
    summary = [line for line in out.splitlines() if "; results in" in line][-1]
    assert "(2 done, 0 failed, 0 resumed), 2 interrupted" in summary and "ETA" not in summary
    assert "2 never started" in summary
    # The leaderboard of what finished, then the command that resumes.
    board = out.index("Leaderboard (max objective): 2 finished, 2 failed or unfinished, 4 jobs")
    assert board < out.index("hpsearch: to resume")
    first = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert dict(zip(first["x"], first["status"], strict=True)) == {
        0: "completed",
        1: "completed",
        2: "interrupted",
        3: "interrupted",
    }

    (marks / "hold").unlink()
    # As the hint says: the same command, with the sweep's absolute dir.
    (hinted,) = re.findall(r"hydra\.sweep\.dir=(/\S+)", out)
    assert Path(hinted) == tmp_path / "sweep"
    result = runner.run([*args, f"hydra.sweep.dir={hinted}"])
    assert result.returncode == 0, result.stdout
    assert starts(marks) == {0: 1, 1: 1, 2: 2, 3: 2, 4: 1, 5: 1}  # 0 and 1 did not run again
    every = pd.read_csv(tmp_path / "sweep" / "results.csv")
    superseded = every[every["status"] == "superseded"]
    assert superseded["x"].tolist() == [2, 3]  # the first run's rows of the re-run jobs
    assert all(e.startswith("interrupted: interrupted by SIGINT") for e in superseded["error"])
    final = every[every["status"] != "superseded"]
    assert sorted(final["x"]) == [0, 1, 2, 3, 4, 5]  # every job exactly once
    assert dict(zip(final["x"], final["status"], strict=True)) == {
        0: "completed",
        1: "completed",
        2: "completed",
        3: "completed",
        4: "completed",
        5: "completed",
    }
    assert final["job"].is_unique and final["run_dir"].is_unique
    # A run dir is made when its job starts: no empty husks; every job gets its clean name,
    # the re-run ones too: their interrupted attempts were moved to superseded/.
    sweep = tmp_path / "sweep"
    dirs = {p.relative_to(sweep) for p in [*sweep.glob("x=*"), *sweep.glob("superseded/*")]}
    assert dirs == {(tmp_path / d).relative_to(sweep) for d in every["run_dir"]}
    assert {Path(d).name for d in final["run_dir"]} == {f"x={x}" for x in range(6)}
    # One form of run_dir, the first run's (relative), though the hint's dir is absolute.
    assert not any(Path(d).is_absolute() for d in every["run_dir"]), every["run_dir"].tolist()
    board = [ln for ln in result.stdout.splitlines() if re.match(r"\s*\d+\s+\d\.\d{4}\s", ln)]
    assert len(board) == 6 and not [ln for ln in board if str(tmp_path) in ln], board


def starts_so_far(marks: Path) -> set[int]:
    path = marks / "starts.log"
    return set(starts(marks)) if path.exists() else set()


@pytest.mark.slow
def test_optuna_resumed_trials_return_stored_objectives(
    runner: Runner,
    marks: Path,
    tmp_path: Path,
    hydra_optuna_python: Path,  # noqa: F811
) -> None:
    runner.python = str(hydra_optuna_python)  # Hydra's Optuna sweeper: optuna < 3
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
    assert len(frame) == 4 and set(frame["status"]) == {"completed"}


def test_a_sweep_writes_the_table_at_most_so_often_and_always_at_the_end(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.flush(force=True)
    assert not table.path.exists()  # nothing recorded: nothing written
    table.min_interval = 60.0
    table.put(row(0, "completed", 1.0), {})  # the first write is at once
    table.put(row(1, "completed", 2.0), {})  # the next waits for the interval
    assert len(table.path.read_text().splitlines()) == 2
    table.flush(force=True)
    assert len(table.path.read_text().splitlines()) == 3


@pytest.mark.parametrize(("rows", "interval"), [(10, 0.5), (99, 0.5), (999, 5.0), (5000, 10.0)])
def test_a_big_table_is_written_less_often_in_proportion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, interval: float
) -> None:
    """Each write is the whole file: beyond 100 rows the wait grows with the rows (10 s at
    most), so the writes cost a 1,000-job sweep per job what they cost a 100-job one."""
    now = [0.0]
    monkeypatch.setattr(table_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    table = ResultsTable(tmp_path / "results.csv")
    table.min_interval = SAVE_INTERVAL_S
    for num in range(rows):
        table.put(row(num, "completed", 1.0), {})
    table.flush(force=True)
    now[0] = interval - 0.01
    table.put(row(rows, "completed", 1.0), {})
    assert len(table.path.read_text().splitlines()) == rows + 1  # header and the earlier rows
    now[0] = interval
    table.flush()
    assert len(table.path.read_text().splitlines()) == rows + 2


def test_an_empty_table_has_no_job_and_an_unreadable_file_is_named(tmp_path: Path) -> None:
    assert ResultsTable(tmp_path / "results.csv").max_job() == -1
    (tmp_path / "results.csv").mkdir()  # exists, cannot be read as a file
    with pytest.raises(ResultsFileError, match="cannot be read"):
        ResultsTable.load(tmp_path)
