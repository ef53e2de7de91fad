"""Pruning: the report channel from job to sweep, the median rule, and a grid whose hopeless
jobs are stopped early, their slots given to the next job."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, assert_one_pruning_story

from hpsearch_launcher import channel, report, should_stop
from hpsearch_launcher.batch import BatchSource
from hpsearch_launcher.contract import HEARD_FILE, REPORTS, STOP_FILE
from hpsearch_launcher.outcome import Status
from hpsearch_launcher.plan.pruning import RULES, MedianRule
from hpsearch_launcher.plan.settings import LauncherSettingsError, parse_settings
from hpsearch_launcher.record.reports import ReportReader
from hpsearch_launcher.stream import JobEnd


@pytest.mark.parametrize(
    ("mode", "completed", "curve", "step", "hopeless"),
    [
        ("max", [{0: 0.5}, {0: 0.7}], {0: 0.4}, 0, True),  # below the median 0.6
        ("max", [{0: 0.5}, {0: 0.7}], {0: 0.6}, 0, False),  # at it: not worse
        ("max", [{0: 0.5}], {0: 0.1}, 0, False),  # one completed curve: too few to judge
        ("max", [{0: 0.5, 1: 0.5}, {0: 0.7, 1: 0.7}], {0: 0.9, 1: 0.1}, 1, False),  # best so far
        ("min", [{0: 0.5, 1: 0.5}, {0: 0.7, 1: 0.7}], {0: 0.1, 1: 0.9}, 1, False),  # counts
        ("max", [{0: 0.5}, {0: 0.7}, {0: 0.9}], {0: 0.6}, 0, True),  # more than 2 completed
        ("max", [{0: 0.5}, {0: 0.7}], {1: 0.1}, 1, False),  # nobody reported step 1
        ("min", [{0: 0.5}, {0: 0.7}], {0: 0.8}, 0, True),  # a loss above the median
        ("min", [{0: 0.5}, {0: 0.7}], {0: 0.4}, 0, False),
    ],
)
def test_the_median_rule(
    mode: str, completed: list, curve: dict, step: int, hopeless: bool
) -> None:
    rule = MedianRule(mode, warmup=1)
    for c in completed:
        rule.complete(c)
    assert rule.hopeless(curve, step) is hopeless


def test_the_median_rule_waits_for_the_warmup() -> None:
    rule = MedianRule("max", warmup=3)
    rule.complete({0: 1.0, 1: 1.0, 2: 1.0})
    rule.complete({0: 1.0, 1: 1.0, 2: 1.0})
    assert not rule.hopeless({0: 0.0, 1: 0.0}, 1)
    assert rule.hopeless({0: 0.0, 1: 0.0, 2: 0.0}, 2)


def test_a_grids_median_is_of_completed_jobs_only() -> None:
    """Completed curves 0.5 and 0.7 make the bar 0.6 at step 0; a pruned job's 0.1 does not
    join them (with it the median would be 0.5, and 0.55 would pass)."""
    jobs: list = [None] * 4  # only their ends and reports matter here
    source = BatchSource(jobs, parse_settings({"prune": "median", "prune_warmup": 1}))
    for key, value, status in [(0, 0.5, Status.COMPLETED), (1, 0.7, Status.COMPLETED)]:
        assert source.report(key, 0, value) is False  # nothing completed yet to judge by
        source.ended(key, JobEnd(None, status, 0, value, key))
    assert source.report(2, 0, 0.1) is True
    source.ended(2, JobEnd(None, Status.PRUNED, 0, 0.1, 2))
    assert source.report(3, 0, 0.55) is True


def test_by_default_a_grid_judges_no_job_on_its_first_report() -> None:
    """prune_warmup's default, 2 reports: a job's first (step 0, one epoch) is noise, as
    hydra.sweeper.pruner=median's default n_warmup_steps=1 has it (test_search_settings)."""
    jobs: list = [None] * 3
    source = BatchSource(jobs, parse_settings({"prune": "median"}))
    for key, value in [(0, 0.5), (1, 0.7)]:
        source.report(key, 0, value)
        source.report(key, 1, value)
        source.ended(key, JobEnd(None, Status.COMPLETED, 1, value, key))
    assert source.report(2, 0, 0.1) is False
    assert source.report(2, 1, 0.1) is True


def test_a_grid_without_prune_prunes_nothing() -> None:
    jobs: list = [None] * 3
    source = BatchSource(jobs, parse_settings({}))  # prune: none
    for key, value in [(0, 0.5), (1, 0.7)]:
        source.report(key, 0, value)
        source.ended(key, JobEnd(None, Status.COMPLETED, 0, value, key))
    assert source.report(2, 0, 0.1) is False


@pytest.mark.parametrize("name", list(RULES))
def test_each_rule_in_the_table_is_a_prune_setting_and_a_grids_rule(name: str) -> None:
    rule = BatchSource([], parse_settings({"prune": name})).rule
    make = RULES[name]
    assert rule is None if make is None else isinstance(rule, make)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"prune": "asha"}, "hydra.launcher.prune='asha': must be one of none, median"),
        (
            {"prune_mode": "maximize"},
            "hydra.launcher.prune_mode='maximize': must be one of max, min "
            "(e.g. hydra.launcher.prune_mode=max)",
        ),
        ({"prune_warmup": -1}, "hydra.launcher.prune_warmup=-1: must be an integer >= 0"),
        ({"prune_grace": -1}, "hydra.launcher.prune_grace=-1: must be a number of seconds >= 0"),
    ],
)
def test_bad_prune_settings_are_named(given: dict, message: str) -> None:
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings(given)
    assert str(err.value).startswith(message)


def test_outside_a_sweep_report_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REPORTS, raising=False)
    assert report(0.5, 0) is False and should_stop() is False


def test_reports_reach_the_reader_and_hostile_ones_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "reports.jsonl"
    monkeypatch.setenv(REPORTS, str(path))
    monkeypatch.setattr(channel._notices, "seen", set())
    monkeypatch.setattr(channel, "_next_step", 0)
    reader = ReportReader(path)
    assert reader.read() == [] and reader.last == (None, None)
    import numpy as np

    assert report(0.5) is False  # step 0
    assert report(np.float32(0.75)) is False  # step 1: numpy scalars are numbers
    for hostile in (math.nan, math.inf, "0.9", None, object()):
        report(hostile)  # type: ignore[arg-type]
    report(0.8, step="3")  # type: ignore[arg-type]
    warned = capsys.readouterr().err
    assert warned.count("hpsearch: report(") == 1  # one warning, not one per call
    with path.open("a") as f:  # what a torn write or another writer could leave
        f.write('not json\n{"step": 9}\n{"step": 4, "value": 1.0')
    assert reader.read() == [(0, 0.5), (1, 0.75)]
    with path.open("a") as f:
        f.write("}\n")
    assert reader.read() == [(4, 1.0)] and reader.last == (4, 1.0)
    (tmp_path / STOP_FILE).touch()
    assert report(math.nan) is True  # ignored, yet the answer: the sweep asks it to stop
    assert should_stop() is True and report(0.9, 5) is True
    assert json.loads(path.read_text().splitlines()[-1]) == {"step": 5, "value": 0.9}


@pytest.mark.slow
def test_a_grid_with_prune_median_stops_the_hopeless_jobs(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """x=8..1 in that order, 2 at a time: 8 and 7 complete; every later curve is below their
    median from its first step on, so it is pruned there and its slot goes to the next job.
    Pruned jobs record the step they reached, and the sweep succeeds (pruning is no failure)."""
    steps, step_s = 10, 0.3
    args = runner.probe_sweep(
        marks,
        "x=8,7,6,5,4,3,2,1",
        f"steps={steps}",
        f"step_s={step_s}",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.prune=median",
        "hydra.launcher.prune_warmup=1",
        "hydra.launcher.prune_grace=5",
    )
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    table = pd.read_csv(tmp_path / "sweep" / "results.csv")
    by_x = table.set_index("x")
    assert set(by_x.loc[[8, 7], "status"]) == {"completed"}
    assert list(by_x.loc[[8, 7], "last_step"]) == [steps - 1] * 2  # the last report, too
    pruned = by_x.loc[[6, 5, 4, 3, 2, 1]]
    assert set(pruned["status"]) == {"pruned"}, result.stdout
    assert (pruned["last_step"] < steps - 1).all()
    assert_one_pruning_story(table, result.stdout, tmp_path)
    assert pruned["error"].str.startswith("pruned at step").all()
    # Each stopped itself on seeing should_stop() (within the grace), short of its curve's
    # end: counted in steps (its own), not seconds (a loaded machine's).
    on_time = []
    stories = zip(pruned["job"], pruned["last_step"], pruned["pruned_step"], strict=True)
    for num, last_step, step in stories:
        stopped_at = int((marks / f"stopped-{num}").read_text())
        assert stopped_at < steps - 1 and last_step <= stopped_at, (num, stopped_at, last_step)
        on_time.append(stopped_at == step)
    # The report it was pruned on waited for its verdict (tests/test_verdicts.py): without it,
    # no job heard of its pruning before its next report. At most 0.5 s of wait: a loaded
    # machine may miss it for some, not all six.
    assert any(on_time), on_time
    assert not list((tmp_path / "sweep").rglob(HEARD_FILE))  # each removed at its job's end
    assert "6 pruned" in result.stdout  # the leaderboard says so
    for run_dir in pruned["run_dir"]:
        assert (tmp_path / run_dir / "reports.jsonl").exists()  # relative to the sweep cwd


@pytest.mark.slow
def test_a_pruned_job_that_ignores_the_stop_is_ended_after_the_grace(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """A task that never asks should_stop(): its process tree is ended grace + ~1 s after the
    decision, and its slot goes to the next job."""
    env = {"PROBE_IGNORE_STOP": "1"}
    args = runner.probe_sweep(
        marks,
        "x=8,7,1",
        "steps=40",
        "step_s=0.1",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.prune=median",
        "hydra.launcher.prune_warmup=1",
        "hydra.launcher.prune_grace=1",
    )
    result = runner.run(args, env=env)
    assert result.returncode == 0, result.stdout
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv")
    table = rows.set_index("x")
    assert table.loc[1, "status"] == "pruned"
    assert not (marks / f"stopped-{table.loc[1, 'job']}").exists()
    # Pruned at its first step (0.1 s in), ended within grace (1 s) + 1 s of that.
    assert table.loc[1, "wall_time_s"] < 0.1 + 1 + 1 + 1.5  # start-up slack on 2 cores
    # It went on reporting through its grace: the decision's step and the last one differ,
    # and results.csv, the console and reports.jsonl say the same of both.
    assert table.loc[1, "last_step"] > table.loc[1, "pruned_step"]
    assert_one_pruning_story(rows, result.stdout, tmp_path)


@pytest.mark.slow
def test_a_pruned_job_gets_sigterm_then_sigkill(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """x=1 ignores SIGTERM and never ends by itself: pruned, it is sent SIGTERM first (its
    chance to save a checkpoint: it notes it), then SIGKILL, which ends it. Without the
    SIGKILL it would run into hydra.launcher.timeout (far beyond grace + 1 s) and be `timeout`."""
    args = runner.probe_sweep(
        marks,
        "x=8,7,1",
        "steps=10",
        "step_s=0.1",
        "trap_x=1",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.prune=median",
        "hydra.launcher.prune_warmup=1",
        "hydra.launcher.prune_grace=0.5",
        "hydra.launcher.timeout=60",
    )
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    table = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x")
    assert table.loc[1, "status"] == "pruned", result.stdout
    assert (marks / f"sigterm-{table.loc[1, 'job']}").exists()  # SIGTERM came first


@pytest.mark.slow
def test_what_a_job_reported_survives_its_crash(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """A job that reports 3 steps, then dies (os._exit): its row keeps the last report."""
    args = runner.probe_sweep(marks, "x=3,4", "steps=3", "step_s=0.05", "mode=hard_exit")
    result = runner.run(args)
    assert result.returncode != 0
    table = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x")
    assert list(table["status"]) == ["failed", "failed"]
    assert list(table["last_step"]) == [2, 2] and list(table["last_value"]) == [3.0, 4.0]
