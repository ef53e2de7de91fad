"""Nothing lost at any instant: results.jsonl is written before anyone hears of an end, a
killed sweep's ends are adopted or resumed, never run twice, and the study agrees with the
record. Half-written files first (unit), then kills aimed by the crash-point hook and at
random instants (slow, in subprocesses)."""

from __future__ import annotations

import collections
import json
import logging
import os
import random
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from conftest import Runner, read_records, wait_no_tagged
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from hpsearch_launcher.contract import END_FILE, REPORTS, REPORTS_FILE
from hpsearch_launcher.crash_points import CRASH_AT
from hpsearch_launcher.record.adopt import read_end
from hpsearch_launcher.record.journal import FILENAME as JOURNAL
from hpsearch_launcher.record.journal import Journal
from hpsearch_launcher.results import ResultsTable, read_results


def row(job: int, x: int) -> dict:
    return {
        "job": job,
        "status": "completed",
        "objective": float(x),
        "run_dir": f"/s/x={x}",
        "config_hash": f"h{x}",
        "error": "",
        "return": str(float(x)),
    }


# -- half-written files -------------------------------------------------------------------------


def test_a_cut_last_journal_line_is_left_out_and_cut_off_before_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    for job in range(3):
        table.put(row(job, job), {"x": str(job)})
    journal = tmp_path / JOURNAL
    data = journal.read_bytes()
    journal.write_bytes(data[:-7])  # the kill cut the third line
    with caplog.at_level(logging.WARNING):
        again = ResultsTable.load(tmp_path)
    assert sorted(again.rows) == [0, 1]
    assert "its last line is cut (a kill mid-write)" in caplog.text and "corrupt" not in caplog.text
    again.keep()  # results.csv had all three: it is rebuilt from the truth
    assert pd.read_csv(tmp_path / "results.csv")["job"].tolist() == [0, 1]
    again.put(row(2, 2), {"x": "2"})  # the next append starts on its own line
    assert sorted(Journal.read(journal).rows) == [0, 1, 2]
    assert journal.read_bytes().count(b"\n") == 3


def test_the_last_of_a_jobs_journal_lines_wins(tmp_path: Path) -> None:
    """A job's row changes by appending (its end, then superseded, then moved): read back, its
    last line is its row, wherever other jobs' lines come between."""
    journal = Journal(tmp_path / JOURNAL)
    journal.append([row(0, 0) | {"status": "interrupted"}], ["x"])
    journal.append([row(1, 1)], ["x"])
    journal.append([row(0, 0) | {"status": "superseded", "run_dir": "superseded/x=0"}], ["x"])
    journal.close()
    rows = Journal.read(tmp_path / JOURNAL).rows
    assert (rows[0]["status"], rows[0]["run_dir"]) == ("superseded", "superseded/x=0")
    assert rows[1]["status"] == row(1, 1)["status"] and sorted(rows) == [0, 1]


def test_a_bad_line_in_the_middle_of_the_journal_is_called_corrupt_by_its_number(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A kill cuts only the last line: garbage in the middle is the file's damage (an edit, a
    disk fault), said so with its line number, not blamed on a kill; the rest is read."""
    table = ResultsTable(tmp_path / "results.csv")
    for job in range(3):
        table.put(row(job, job), {"x": str(job)})
    journal = tmp_path / JOURNAL
    lines = journal.read_bytes().split(b"\n")
    journal.write_bytes(b"\n".join([lines[0], b"garbage{", *lines[1:]]))
    with caplog.at_level(logging.WARNING):
        assert sorted(Journal.read(journal).rows) == [0, 1, 2]
    assert f"{journal} is corrupt: line 2 is no results record (not a kill's doing" in caplog.text
    assert "mid-write" not in caplog.text


def test_a_lagging_results_csv_is_rebuilt_and_an_empty_one_is_no_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.min_interval = 3600.0  # the view is not rewritten: it lags as a kill leaves it
    table.put(row(0, 0), {"x": "0"})
    table.put(row(1, 1), {"x": "1"})
    assert pd.read_csv(tmp_path / "results.csv")["job"].tolist() == [0]
    with caplog.at_level(logging.INFO):
        ResultsTable.load(tmp_path).keep()
    assert "lagged behind results.jsonl" in caplog.text
    assert pd.read_csv(tmp_path / "results.csv")["job"].tolist() == [0, 1]
    (tmp_path / JOURNAL).unlink()
    (tmp_path / "results.csv").write_text("")
    with caplog.at_level(logging.WARNING):
        assert ResultsTable.load(tmp_path).rows == {}
    assert "is empty" in caplog.text


def test_an_older_sweeps_results_csv_begins_the_journal(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.put(row(0, 0), {"x": "0"})
    (tmp_path / JOURNAL).unlink()  # as a sweep before the journal left its dir
    ResultsTable.load(tmp_path).keep()
    assert list(Journal.read(tmp_path / JOURNAL).rows) == [0]


def test_a_cut_end_file_is_not_adopted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".hpsearch-end.json").write_text('{"return": 0.5, "overri')
    with caplog.at_level(logging.WARNING):
        assert read_end(tmp_path) is None
    assert "cut or unreadable" in caplog.text


def test_a_returned_task_has_its_end_written_before_the_watchdog_may_end_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end is written as the task returns (before Hydra's on_job_end callbacks), holding
    the lock the parent watchdog takes before it ends an orphaned job."""
    from hpsearch_launcher.execute.job import child

    held = []
    real = child.write_json_atomic
    monkeypatch.setattr(
        child, "write_json_atomic", lambda *a: (held.append(child._ENDING.locked()), real(*a))
    )
    # What run_job set before it calls the task: the run dir, absolute.
    hydra = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path)}}})
    monkeypatch.setattr(HydraConfig.instance(), "cfg", hydra)
    monkeypatch.setenv(REPORTS, "")  # the task sets it (a job's own process): undone after
    task = child._in_run_dir(lambda cfg: cfg * 2, ["x=1"])
    assert task(0.25) == 0.5
    assert os.environ[REPORTS] == str(tmp_path / REPORTS_FILE)  # the report channel's file
    assert held == [True] and not child._ENDING.locked()
    assert read_end(tmp_path) == {"return": 0.5, "overrides": ["x=1"]}


@pytest.mark.parametrize("key", ["error", "status", "start", "return", "run_dir", "job"])
def test_a_parameter_named_like_a_fixed_column_is_kept_apart(tmp_path: Path, key: str) -> None:
    table = ResultsTable(tmp_path / "results.csv")
    table.put(row(0, 0) | {"error": "none"}, {key: "7", "lr": "0.1"})
    frame = read_results(tmp_path)
    assert frame[f"param:{key}"].tolist() == [7.0]
    assert frame["status"].tolist() == ["completed"] and frame["job"].tolist() == [0]
    assert frame["error"].tolist() == ["none"] and frame["return"].tolist() == ["0.0"]
    assert ResultsTable.load(tmp_path).params == [f"param:{key}", "lr"]


# -- kills, in subprocesses ---------------------------------------------------------------------

GRID = ("x=range(0,6)", "hydra.launcher.n_jobs=2", "sleep=0.2")
SEARCH = (
    "hydra/sweeper=hpsearch",
    "hydra.sweeper.direction=maximize",
    "hydra/sweeper/sampler=random",
    "hydra.sweeper.sampler.seed=5",
    "hydra.sweeper.n_trials=6",
    "x=range(0,1000)",
    "hydra.launcher.n_jobs=2",
    "sleep=0.2",
)
STORAGES = {"memory": None, "sqlite": "sqlite:///{tmp}/study.db", "journal": "{tmp}/study.log"}


def search_args(tmp_path: Path, storage: str) -> tuple[str, ...]:
    url = STORAGES[storage]
    if url is None:
        return SEARCH
    return (
        *SEARCH,
        f"hydra.sweeper.storage={url.format(tmp=tmp_path)}",
        "hydra.sweeper.study_name=s",
    )


def live_rows(tmp_path: Path) -> pd.DataFrame:
    frame = read_results(tmp_path / "sweep")
    return frame[frame["status"] != "superseded"]


def superseded(run_dir: Path) -> list[Path]:
    """The dead attempts of `run_dir` moved under its sweep dir's superseded/ (`x=3`, `x=3~2`)."""
    moved = run_dir.parent / "superseded"
    return [d for d in moved.glob(f"{run_dir.name}*") if d.name.split("~")[0] == run_dir.name]


def check_nothing_lost(tmp_path: Path, marks: Path, storage: str | None) -> pd.DataFrame:
    """Every row completed with its config's objective; no job ran to its end twice (each end
    the probe made is one row); the study, if stored, holds exactly the rows, none RUNNING."""
    rows = live_rows(tmp_path)
    assert set(rows["status"]) == {"completed"}, rows[["job", "status", "error"]]
    assert (rows["objective"] == rows["x"].astype(float)).all()
    ends = collections.Counter(r["output_dir"] for r in read_records(marks))
    for path, count in ends.items():  # no run dir saw two ends, but for an attempt killed
        # between the task's last line and its return: it never ended, its dir went to
        # superseded/ without an end file, and the job ran again in its plain dir
        dead = [d for d in superseded(Path(path)) if not (d / END_FILE).exists()]
        assert count - 1 <= len(dead), (path, count, dead)
    assert len(ends) == len(rows), (sorted(ends), rows[["job", "x", "run_dir"]])
    if storage not in (None, "memory"):
        url = STORAGES[storage].format(tmp=tmp_path)  # type: ignore[union-attr]
        study = optuna.load_study(study_name="s", storage=_storage(url))
        states = collections.Counter(t.state.name for t in study.trials)
        assert states["RUNNING"] == 0, states
        done = sorted(t.params["x"] for t in study.trials if t.state.name == "COMPLETE")
        assert done == sorted(rows["x"].tolist())
    return rows


def _storage(url: str) -> optuna.storages.BaseStorage | str:
    if url.endswith(".log"):
        from hpsearch_launcher.search.study import open_storage

        return open_storage(url)
    return url


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "point"),
    [
        ("grid", "job-ended:2"),  # the job's process ended; the sweep never recorded it
        # the same, the job run in its run dir (Hydra 1.1's default) and the sweep dir relative
        # to the sweep's: the end is where the next run looks, not under the run dir again
        ("grid-chdir", "job-ended:2"),
        ("grid", "recorded:2"),  # recorded; nobody told
        ("grid", "csv-written:2"),  # results.csv's new text whole, not yet in place
        ("sqlite", "recorded:2"),  # recorded; the study holds the trial RUNNING
        ("sqlite", "csv-written:2"),
        ("journal", "job-ended:2"),
        ("memory", "job-ended:2"),  # the study died with the sweep: the end is asked again
    ],
)
def test_a_kill_at_the_worst_instant_loses_nothing_and_runs_nothing_twice(
    runner: Runner, marks: Path, tmp_path: Path, point: str, kind: str
) -> None:
    grid = (*GRID, "hydra.job.chdir=true") if kind == "grid-chdir" else GRID
    args = runner.probe_sweep(
        marks, *(grid if kind.startswith("grid") else search_args(tmp_path, kind))
    )
    killed = runner.run(args, env={CRASH_AT: point})
    assert killed.returncode == -9, killed.stdout
    assert wait_no_tagged(runner.tag, within=2) == []
    done = runner.run(args)
    assert done.returncode == 0, done.stdout
    rows = check_nothing_lost(tmp_path, marks, kind if kind in STORAGES else None)
    assert len(rows) == 6
    assert not list((tmp_path / "sweep").glob(".results.csv.*"))  # no cut rewrite left
    if point.startswith("job-ended"):  # the end the sweep never heard of: adopted, not rerun
        assert "adopted" in done.stdout
    if kind in STORAGES and point.startswith("recorded"):
        assert "1 trials a killed sweep left running told their recorded end" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["grid", "memory", "sqlite", "journal"])
def test_random_kills_then_the_same_command_ends_as_an_uninterrupted_run(
    runner: Runner, tmp_path: Path, kind: str
) -> None:
    """kill -9 at random instants a few times, then run to the end: the grid's rows are the
    uninterrupted run's; every search ends its n_trials with record and study agreeing."""
    rng = random.Random(f"chaos-{kind}")
    marks = tmp_path / "marks"
    marks.mkdir()
    args = runner.probe_sweep(marks, *(GRID if kind == "grid" else search_args(tmp_path, kind)))
    for _ in range(3):
        sweep = runner.popen(args)
        deadline = time.monotonic() + 60
        while not (marks / "records.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # once a job has ended: a kill then can cut its recording
        time.sleep(rng.uniform(0.0, 2.0))
        sweep.kill()
        sweep.communicate(timeout=30)
        assert wait_no_tagged(runner.tag, within=2) == []  # jobs end with their sweep
    done = runner.run(args)
    assert done.returncode == 0, done.stdout
    rows = check_nothing_lost(tmp_path, marks, None if kind in ("grid", "memory") else kind)
    assert len(rows) == 6
    if kind == "grid":
        assert sorted(rows["x"].tolist()) == list(range(6))  # as the uninterrupted run's
    assert json.loads((tmp_path / "sweep" / JOURNAL).read_text().splitlines()[-1])["row"]


@pytest.mark.slow
def test_a_grid_over_keys_named_like_fixed_columns_keeps_both(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    done = runner.run(runner.probe_sweep(marks, "+error=1,2", "+device=a,b"))
    assert done.returncode == 0, done.stdout
    frame = read_results(tmp_path / "sweep")
    assert sorted(frame["param:error"].tolist()) == [1.0, 1.0, 2.0, 2.0]
    assert sorted(frame["param:device"].tolist()) == ["a", "a", "b", "b"]
    assert frame["error"].tolist() == [""] * 4 and frame["device"].tolist() == ["cpu"] * 4
    assert frame["status"].tolist() == ["completed"] * 4
