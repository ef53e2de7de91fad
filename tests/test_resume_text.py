"""What a stopped, failed or resumed sweep says, as pure text and file moves: progress and
leaderboard counts, the resume command line, the superseded/ folder, Optuna's two bests."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from hpsearch_launcher.contract import END_FILE
from hpsearch_launcher.record.adopt import Adopter
from hpsearch_launcher.record.leaderboard import counts, study_note
from hpsearch_launcher.record.progress import SweepState
from hpsearch_launcher.record.resume_command import resume_command, sweep_dir_override
from hpsearch_launcher.record.superseded import move_aside
from hpsearch_launcher.record.table import ResultsTable


def test_interrupted_jobs_are_not_counted_as_finished() -> None:
    state = SweepState(total=6, done=2, interrupted=2, queued=2, stopping=True)
    assert state.summary().startswith(
        "2/6 finished (2 done, 0 failed, 0 resumed), 2 interrupted, 0 running, 2 never started"
    )


def row(job: int, status: str, objective: str = "", digest: str = "", run_dir: str = "") -> dict:
    return {
        "job": job,
        "status": status,
        "objective": objective,
        "run_dir": run_dir or f"/s/{job}",
        "config_hash": digest or f"h{job}",
        "return": objective,
    }


def test_counts_add_up_and_superseded_attempts_are_not_jobs() -> None:
    rows = [
        row(0, "superseded"),  # job 3's config, interrupted in an earlier run
        row(1, "resumed", "0.5"),
        row(2, "completed"),  # returned nothing: finished, without an objective
        row(3, "completed", "0.7", digest="h0"),
        row(4, "failed"),
    ]
    text = counts([{k: str(v) for k, v in r.items()} for r in rows], Path("/s/results.csv"))
    assert text == (
        "3 finished, 1 failed or unfinished, 4 jobs of this sweep dir (/s/results.csv); "
        "1 finished without a finite objective; 1 superseded (earlier attempts at jobs run again) "
        "not counted"
    )


@pytest.mark.parametrize(
    ("orig_argv", "argv", "overrides", "expected"),
    [
        (  # python -m: the module as typed, not its __main__.py
            ["python", "-m", "hpsearch", "--multirun", "lr=1e-3,1e-2"],
            ["/src/hpsearch/__main__.py", "--multirun", "lr=1e-3,1e-2"],
            ["lr=1e-3,1e-2"],
            ["python", "-m", "hpsearch", "--multirun", "lr=1e-3,1e-2", "hydra.sweep.dir=/s"],
        ),
        (  # a console script runs as `python /venv/bin/hpsearch`: shown as the script
            ["/venv/bin/python", "/venv/bin/hpsearch", "-m", "x=1,2"],
            ["/venv/bin/hpsearch", "-m", "x=1,2"],
            ["x=1,2"],
            ["/venv/bin/hpsearch", "-m", "x=1,2", "hydra.sweep.dir=/s"],
        ),
        (  # the user's hydra.sweep.dir (any form) gives way to the dir it resolved to
            ["python", "app.py", "-m", "x=range(0,6)", "+hydra.sweep.dir=out/${now:%H}", "y=a b"],
            ["app.py", "-m", "x=range(0,6)", "+hydra.sweep.dir=out/${now:%H}", "y=a b"],
            ["x=range(0,6)", "y=a b"],
            ["python", "app.py", "-m", "x=range(0,6)", "hydra.sweep.dir=/s", "y=a b"],
        ),
        (  # in-process (Hydra's API, a test runner): no command line to give
            ["python", "-m", "pytest", "tests"],
            ["pytest", "tests"],
            ["marks=/m"],
            None,
        ),
    ],
)
def test_resume_command(
    orig_argv: list[str], argv: list[str], overrides: list[str], expected: list[str] | None
) -> None:
    command = resume_command(orig_argv, argv, overrides, Path("/s"))
    assert (command and shlex.split(command)) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/a/b",
        "/a b/c",
        "/a(1)/s",
        "/a=b,c",
        "/it's/x",
        "/ends\\",
        "/x\\'y",
        "/t~1/a%2F",
        "/a+b@c%d-e_f.g",
    ],
)
def test_the_sweep_dir_override_reads_back_as_the_path(path: str) -> None:
    override = OverridesParser.create().parse_override(sweep_dir_override(Path(path)))
    assert (override.key_or_group, override.value()) == ("hydra.sweep.dir", path)


def sweep_with(tmp_path: Path, *rows: dict) -> ResultsTable:
    table = ResultsTable(tmp_path / "results.csv")
    for r in rows:
        table.put(r, {})
    return table


def test_an_earlier_unfinished_attempt_gives_its_run_dir_up(tmp_path: Path) -> None:
    (tmp_path / "x=2").mkdir()
    (tmp_path / "x=2" / "stderr.log").write_text("partial")
    (tmp_path / "superseded" / "x=2").mkdir(parents=True)  # an attempt moved before
    table = sweep_with(
        tmp_path,
        row(0, "completed", "1", run_dir=str(tmp_path / "x=0")),
        row(2, "interrupted", digest="h2", run_dir=str(tmp_path / "x=2")),
    )
    moved = move_aside(table, tmp_path / "x=2", "h2", before_job=4)
    assert moved == tmp_path / "superseded" / "x=2~2"
    assert (moved / "stderr.log").read_text() == "partial"
    assert not (tmp_path / "x=2").exists()
    assert ResultsTable.load(tmp_path).rows[2]["run_dir"] == str(moved)  # written at once


@pytest.mark.parametrize(
    ("other", "digest", "before_job"),
    [
        ({}, "h9", 4),  # another config's attempt
        ({}, "h2", 2),  # this run's own row
        (row(1, "completed", "1", run_dir="x=2"), "h2", 4),  # a finished job's dir too
    ],
)
def test_a_run_dir_is_left_alone_unless_only_superseded_attempts_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other: dict, digest: str, before_job: int
) -> None:
    monkeypatch.chdir(tmp_path)  # rows written with a relative run_dir, as a relative sweep dir
    (tmp_path / "x=2").mkdir()
    rows = [row(2, "interrupted", digest="h2", run_dir="x=2"), *([other] if other else [])]
    table = sweep_with(tmp_path, *rows)
    assert move_aside(table, tmp_path / "x=2", digest, before_job) is None
    assert (tmp_path / "x=2").is_dir()


def test_a_run_dir_no_row_holds_moves_only_if_abandoned(tmp_path: Path) -> None:
    (tmp_path / "x=2").mkdir()  # left by a sweep killed before it recorded the job
    (tmp_path / "superseded" / "x=2").mkdir(parents=True)  # an attempt moved before
    table = sweep_with(tmp_path)
    assert move_aside(table, tmp_path / "x=2", "h2", before_job=4) is None
    moved = move_aside(table, tmp_path / "x=2", "h2", before_job=4, abandoned=True)
    assert moved == tmp_path / "superseded" / "x=2~2" and moved.is_dir()
    assert not (tmp_path / "x=2").exists() and table.rows == {}  # no row to follow it


def test_an_abandoned_run_dir_has_no_row_no_end_and_no_job_of_this_run(tmp_path: Path) -> None:
    for name in ("dead", "dead-moved-before", "recorded", "recorded-elsewhere", "ended", "taken"):
        (tmp_path / name).mkdir()
    (tmp_path / "ended" / END_FILE).write_text('{"return": 1, "overrides": []}')
    rows = {
        0: row(0, "interrupted", run_dir=str(tmp_path / "recorded")),
        # relative to where an earlier run ran, not here: named by its name all the same
        1: row(1, "failed", run_dir="elsewhere/sweep/recorded-elsewhere"),
        2: row(2, "superseded", run_dir=str(tmp_path / "superseded" / "dead-moved-before")),
    }
    adopter = Adopter(rows)
    adopter.claimed(tmp_path / "taken")
    found = [p.name for p in sorted(tmp_path.iterdir()) if adopter.abandoned(p)]
    assert found == ["dead", "dead-moved-before"]


def optuna_config(direction: object = "maximize") -> object:
    sweeper = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    return OmegaConf.create({"hydra": {"sweeper": {"_target_": sweeper, "direction": direction}}})


def test_the_study_best_and_the_sweep_dir_best_are_named_apart() -> None:
    rows = [{**row(0, "completed", "0.9"), "lr": "0.1"}, {**row(1, "failed"), "lr": "0.2"}]
    note = study_note(optuna_config(), rows, ["lr"], "max")  # type: ignore[arg-type]
    assert note == (
        "hpsearch: Optuna's \"Best value\" above is its study's best, over every trial the study "
        "holds (every run of the study); the best of this sweep dir's results.csv (2 jobs) is "
        "0.9000 (lr=0.1), the leaderboard's first row"
    )
    basic = OmegaConf.create({"hydra": {"sweeper": {"_target_": "hydra.BasicSweeper"}}})
    assert study_note(basic, rows, ["lr"], "max") is None
    pareto = optuna_config(["maximize", "minimize"])  # Optuna prints no single best then
    assert study_note(pareto, rows, ["lr"], "max") is None  # type: ignore[arg-type]
