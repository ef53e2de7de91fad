"""A report's verdict before the job trains on: where the sweep judges reports (a pruner), each
report() waits until the sweep has judged it (HEARD_FILE) or pruned the job (STOP_FILE), at
most channel.VERDICT_WAIT_S; so a pruned job stops at the report it was pruned on, not one
epoch later (issue 49: that epoch was a third of most pruned trials' slot time)."""

from __future__ import annotations

import threading
from pathlib import Path

import optuna
import pytest

from hpsearch_launcher import channel, report
from hpsearch_launcher.batch import BatchSource
from hpsearch_launcher.contract import HEARD_FILE, REPORTS, STOP_FILE
from hpsearch_launcher.plan.settings import parse_settings
from hpsearch_launcher.record.reports import ReportReader
from hpsearch_launcher.search.optuna_source import OptunaSource
from hpsearch_launcher.search.settings import parse_settings as parse_search
from hpsearch_launcher.search.space import parse_space


@pytest.fixture
def reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "reports.jsonl"
    monkeypatch.setenv(REPORTS, str(path))
    monkeypatch.setattr(channel, "_next_step", 0)
    monkeypatch.setattr(channel, "_last_report", None)  # the job's first report
    return path


def answer_when_reported(path: Path, answer: object) -> threading.Thread:
    """The sweep's side: once the report is in the file, `answer(size)`."""

    def sweep() -> None:
        while not (path.exists() and path.read_bytes().endswith(b"\n")):
            threading.Event().wait(0.001)
        answer(path.stat().st_size)  # type: ignore[operator]

    thread = threading.Thread(target=sweep)
    thread.start()
    return thread


def test_a_pruned_job_hears_it_on_the_report_it_was_pruned_on(reports: Path) -> None:
    """Without the wait, report() had returned False: the stop file came after the line."""
    (reports.parent / HEARD_FILE).write_text("0")
    sweep = answer_when_reported(reports, lambda size: (reports.parent / STOP_FILE).touch())
    assert report(0.1, 0) is True
    sweep.join()


def test_a_heard_report_goes_on(reports: Path) -> None:
    (reports.parent / HEARD_FILE).write_text("0")
    answered: list[int] = []

    def hear(size: int) -> None:
        answered.append(size)
        (reports.parent / HEARD_FILE).write_text(str(size))

    sweep = answer_when_reported(reports, hear)
    assert report(0.1, 0) is False
    assert answered == [reports.stat().st_size]  # it returned once its line was heard
    sweep.join()


def test_a_sweep_that_does_not_answer_delays_a_report_by_the_bound_at_most(
    reports: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channel, "VERDICT_WAIT_S", 0.05)
    (reports.parent / HEARD_FILE).write_text("0")
    assert report(0.1, 0) is False  # it returned, judged or not: the sweep prunes it later


def test_a_job_that_reports_often_waits_a_tenth_of_its_time_between_reports_at_most(
    reports: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report every batch is not slowed tenfold: the wait is bounded by a tenth of the time
    since the previous report, whatever VERDICT_WAIT_S says (an hour here: it would hang)."""
    monkeypatch.setattr(channel, "VERDICT_WAIT_S", 3600.0)
    monkeypatch.setattr(channel, "_last_report", channel.time.monotonic())  # one just now
    (reports.parent / HEARD_FILE).write_text("0")  # a sweep that never answers
    assert report(0.1, 0) is False


def test_without_verdicts_a_report_waits_for_nothing(
    reports: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_sleep(seconds: float) -> None:
        raise AssertionError("report() waited")

    monkeypatch.setattr(channel.time, "sleep", no_sleep)
    assert report(0.1, 0) is False


def test_the_reader_says_how_far_it_judged_and_removes_a_killed_sweeps_word(
    tmp_path: Path,
) -> None:
    path, heard = tmp_path / "reports.jsonl", tmp_path / HEARD_FILE
    judged = ReportReader(path, verdicts=True)
    judged.heard()
    assert heard.read_text() == "0"  # written before the job starts: it will wait
    path.write_text('{"step": 0, "value": 0.5}\n{"step": 1, "va')
    assert judged.read() == [(0, 0.5)]
    judged.heard()
    assert heard.read_text() == str(len('{"step": 0, "value": 0.5}\n'))  # whole lines only
    ReportReader(path).heard()  # a sweep without verdicts, in a killed one's run dir
    assert not heard.exists()


@pytest.mark.parametrize(
    ("pruner", "directions", "judges"),
    [
        (optuna.pruners.NopPruner(), ["maximize"], False),  # pruner=none
        (optuna.pruners.MedianPruner(), ["maximize"], True),
        (optuna.pruners.PercentilePruner(25.0), ["maximize"], True),
        (optuna.pruners.MedianPruner(), ["maximize", "minimize"], False),  # Optuna cannot
    ],
)
def test_a_search_judges_with_a_pruner_of_one_objective(
    pruner: optuna.pruners.BasePruner, directions: list[str], judges: bool
) -> None:
    study = optuna.create_study(directions=directions, pruner=pruner)
    space = parse_space(None, ["x=interval(0,1)"])
    assert OptunaSource(study, space, parse_search({}), 0).judges is judges


@pytest.mark.parametrize(("prune", "judges"), [("none", False), ("median", True)])
def test_a_grid_judges_with_its_rule(prune: str, judges: bool) -> None:
    assert BatchSource([], parse_settings({"prune": prune})).judges is judges
