"""The search as a JobSource, driven in-process by a fake launcher loop: trials asked while
slots are free up to n_trials, every end told to the study, reports fed to the pruner, and
what earlier runs left (results.csv, a storage with trials left running) continued."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from hpsearch_launcher.contract import END_FILE, REPORTS_FILE
from hpsearch_launcher.outcome import Status
from hpsearch_launcher.record.table import FILENAME, ResultsTable
from hpsearch_launcher.search.history import INTERRUPTED, OWNER, RERUN_OF, ROW_ONLY
from hpsearch_launcher.search.optuna_source import OptunaSource
from hpsearch_launcher.search.settings import parse_settings
from hpsearch_launcher.search.space import parse_space
from hpsearch_launcher.search.sweeper import open_search, time_line
from hpsearch_launcher.stream import Ask, JobEnd

Job = Callable[[dict[str, str]], tuple[Sequence[float], Any]]  # overrides -> (reports, return)


def source(
    sweep_dir: Path, *overrides: str, replay: bool = True, seed: int = 0, **settings: Any
) -> OptunaSource:
    tpe = {"_target_": "optuna.samplers.TPESampler", "seed": seed}
    return open_search(
        parse_settings({"sampler": tpe, **settings}),
        parse_space(None, list(overrides)),
        sweep_dir,
        replay=replay,
    )


def values_of(ask: Ask) -> dict[str, str]:
    return dict(o.split("=", 1) for o in ask.overrides)


def done(value: Any, status: Status = Status.COMPLETED, num: int = 0) -> JobEnd:
    ok = status in (Status.COMPLETED, Status.RESUMED)
    ret = JobReturn(status=JobStatus.COMPLETED if ok else JobStatus.FAILED, _return_value=value)
    return JobEnd(ret, status, None, None, num)


def drive(src: OptunaSource, job: Job, slots: int = 2) -> list[tuple[Ask, Status]]:
    """The launcher's loop in miniature: ask while a slot is free; the oldest job reports its
    curve (ended as pruned when the source says so), then ends."""
    running: list[Ask] = []
    ended: list[tuple[Ask, Status]] = []
    while True:
        while len(running) < slots and not src.exhausted() and (ask := src.ask()) is not None:
            running.append(ask)
        if not running:
            return ended
        ask = running.pop(0)
        curve, value = job(values_of(ask))
        status, step = Status.COMPLETED, None
        for step, reported in enumerate(curve):
            if src.report(ask.key, step, reported):
                status = Status.PRUNED
                break
        ret = JobReturn(status=JobStatus.COMPLETED, _return_value=value)
        last = curve[step] if step is not None else None
        src.ended(ask.key, JobEnd(ret, status, step, last, len(ended)))
        ended.append((ask, status))


def probe(values: dict[str, str]) -> tuple[list[float], float]:
    return [], float(values["x"])


def test_asks_until_n_trials_then_is_exhausted(tmp_path: Path) -> None:
    src = source(tmp_path, "x=range(0,50)", "fixed=3", n_trials=5, direction="maximize")
    first = [src.ask(), src.ask(), src.ask()]
    assert [a.key for a in first if a] == [0, 1, 2]
    assert all(a and a.overrides[0] == "fixed=3" and a.overrides[1].startswith("x=") for a in first)
    ended = drive(src, probe, slots=3)
    assert len(ended) == 2  # 3 were running already: 5 in all, never more
    assert src.ask() is None
    assert src.exhausted() is False  # three still run
    for ask in first:
        assert ask is not None
        src.ended(ask.key, done(float(values_of(ask)["x"])))
    assert src.exhausted() is True and src.ask() is None
    study = src.study
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 5
    assert study.best_value == max(float(t.params["x"]) for t in study.trials)


def test_what_remains_to_ask_leaves_out_the_running_trials(tmp_path: Path) -> None:
    """Spares are made, and the progress line counts queued jobs, from remaining()."""
    src = source(tmp_path, "x=range(0,50)", n_trials=5)
    assert src.remaining() == 5
    asks = [src.ask(), src.ask()]
    assert src.remaining() == 3  # 2 run: 3 more will be asked, not 5
    first = asks[0]
    assert first is not None
    src.ended(first.key, done(1.0))
    assert src.remaining() == 3  # 1 ended, 1 runs


def test_no_more_than_n_trials_run_at_once_even_with_more_slots(tmp_path: Path) -> None:
    src = source(tmp_path, "x=range(0,50)", n_trials=3)
    asks = [src.ask() for _ in range(5)]
    assert [a is not None for a in asks] == [True, True, True, False, False]


@pytest.mark.parametrize(
    ("status", "value", "state", "counted"),
    [
        (Status.COMPLETED, 0.5, TrialState.COMPLETE, True),
        (Status.RESUMED, 0.5, TrialState.COMPLETE, True),
        (Status.PRUNED, None, TrialState.PRUNED, True),
        (Status.FAILED, None, TrialState.FAIL, True),
        (Status.TIMEOUT, None, TrialState.FAIL, True),
        (Status.COMPLETED, "not a number", TrialState.FAIL, True),
        (Status.COMPLETED, float("nan"), TrialState.FAIL, True),
        (Status.COMPLETED, [0.1, 0.2], TrialState.FAIL, True),  # one objective, two numbers
        (Status.INTERRUPTED, None, TrialState.FAIL, False),  # to run again: not counted
    ],
)
def test_each_end_is_told(
    tmp_path: Path, status: Status, value: Any, state: TrialState, counted: bool
) -> None:
    src = source(tmp_path, "x=interval(0,1)", n_trials=1, max_failure_rate=1.0)
    ask = src.ask()
    assert ask is not None
    src.ended(ask.key, done(value, status))
    (trial,) = src.study.trials
    assert trial.state is state
    assert trial.value == (value if state is TrialState.COMPLETE else None)
    assert trial.user_attrs.get(INTERRUPTED, False) is (status is Status.INTERRUPTED)
    assert src.exhausted() is counted


def test_an_objective_that_is_no_number_is_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = source(tmp_path, "x=interval(0,1)", n_trials=3, max_failure_rate=1.0)
    for _ in range(2):
        ask = src.ask()
        assert ask is not None
        src.ended(ask.key, done({"acc": 1}))
    warnings = [r.getMessage() for r in caplog.records if "not a finite number" in r.getMessage()]
    assert warnings == [
        "hpsearch: trial 0 (job 0) returned {'acc': 1}, not a finite number (anything float() "
        "takes): told to Optuna as failed (said once per sweep)"
    ]


@pytest.mark.parametrize(
    ("value", "told"),
    [  # as Hydra's Optuna sweeper reads a return: float(value)
        (np.float32(0.5), 0.5),
        (np.int64(3), 3.0),
        (np.array(2.5), 2.5),
        ("1.5", 1.5),
        (True, 1.0),
        (float("nan"), None),
        (float("inf"), None),
        ("abc", None),
        (None, None),
    ],
)
def test_an_objective_is_what_float_takes(tmp_path: Path, value: Any, told: float | None) -> None:
    src = source(tmp_path, "x=interval(0,1)", n_trials=1, max_failure_rate=1.0)
    ask = src.ask()
    assert ask is not None
    src.ended(ask.key, done(value))
    (trial,) = src.study.trials
    assert trial.value == told
    assert trial.state.name == ("FAIL" if told is None else "COMPLETE")


def test_several_objectives_from_an_array(tmp_path: Path) -> None:
    src = source(tmp_path, "x=interval(0,1)", n_trials=1, direction=["maximize", "minimize"])
    ask = src.ask()
    assert ask is not None
    src.ended(ask.key, done(np.array([0.25, np.float32(0.5)])))
    assert src.study.trials[0].values == [0.25, 0.5]


def test_n_jobs_caps_the_trials_at_once(tmp_path: Path) -> None:
    src = source(tmp_path, "x=interval(0,1)", n_trials=5, n_jobs=2)
    a, b = src.ask(), src.ask()
    assert a is not None and b is not None and src.ask() is None  # 2 running: no third
    src.ended(a.key, done(0.1))
    assert src.ask() is not None  # a slot of the 2 freed


def test_several_objectives(tmp_path: Path) -> None:
    src = source(tmp_path, "x=interval(0,1)", n_trials=2, direction=["maximize", "minimize"])
    a, b = src.ask(), src.ask()
    assert a is not None and b is not None
    assert src.report(a.key, 0, 0.3) is False  # Optuna prunes single objectives only
    src.ended(a.key, done([0.9, 0.1]))
    src.ended(b.key, done((0.8, 0.2)))
    assert [t.values for t in src.study.trials] == [[0.9, 0.1], [0.8, 0.2]]


def test_a_bad_curve_is_pruned(tmp_path: Path) -> None:
    """A median pruner stops a trial whose reports fall below the finished trials' median."""
    src = source(
        tmp_path,
        "x=range(0,10)",
        n_trials=12,
        direction="maximize",
        pruner="median",
        pruner_args={"n_startup_trials": 3},
    )

    def job(values: dict[str, str]) -> tuple[list[float], float]:
        x = int(values["x"])
        return [x * (step + 1) / 4 for step in range(4)], float(x)

    ended = drive(src, job, slots=1)
    pruned = [int(values_of(a)["x"]) for a, status in ended if status is Status.PRUNED]
    finished = [int(values_of(a)["x"]) for a, status in ended if status is Status.COMPLETED]
    assert pruned, ended
    assert len(pruned) + len(finished) == 12
    states = [t.state for t in src.study.trials]
    assert states.count(TrialState.PRUNED) == len(pruned)
    # A pruned trial keeps its curve up to where it stopped; the pruner judged it worse.
    for trial in src.study.get_trials(states=(TrialState.PRUNED,)):
        assert trial.intermediate_values
        assert trial.params["x"] < max(finished)


def test_a_timeout_stops_new_trials_the_running_ones_finish(tmp_path: Path) -> None:
    now = [0.0]
    settings = parse_settings({"n_trials": 10, "timeout": 60})
    space = parse_space(None, ["x=interval(0,1)"])
    src = OptunaSource(optuna.create_study(), space, settings, 0, clock=lambda: now[0])
    a = src.ask()
    assert a is not None
    now[0] = 59.0
    assert src.exhausted() is False
    now[0] = 60.0
    assert src.exhausted() is True
    assert src.ask() is None
    src.ended(a.key, done(0.5))  # told as usual
    assert src.study.trials[0].state is TrialState.COMPLETE


def test_max_failure_rate_counts_this_runs_trials(tmp_path: Path) -> None:
    src = source(tmp_path, "x=range(0,100)", n_trials=8, max_failure_rate=0.25)
    for failures in (1, 2, 3):
        ask = src.ask()
        assert ask is not None
        src.ended(ask.key, done(None, Status.FAILED))
        assert src.exhausted() is (failures > 2)  # 3 of 8 is more than 0.25 of them
    assert src.ask() is None
    assert src.failure_line() == (
        "3 of this run's 8 trials failed, more than max_failure_rate=0.25 allows: the search "
        "stopped"
    )


def test_a_resumed_runs_failure_rate_counts_its_own_share(tmp_path: Path) -> None:
    """4 of 8 trials done before: this run plans 4, and 0.25 of them is 1 failure; the 2nd
    stops the search (counted against all 8, it would take a 3rd)."""
    write_results(tmp_path, [{"x": x, "status": "completed", "ret": float(x)} for x in range(4)])
    src = source(tmp_path, "x=range(0,100)", n_trials=8, max_failure_rate=0.25)
    assert src.ended_before == 4 and src.planned == 4
    for failures in (1, 2):
        ask = src.ask()
        assert ask is not None
        src.ended(ask.key, done(None, Status.FAILED))
        assert src.exhausted() is (failures == 2)
    assert src.failure_line().startswith("2 of this run's 4 trials failed")


def write_results(sweep_dir: Path, rows: list[dict[str, Any]]) -> None:
    table = ResultsTable(sweep_dir / FILENAME)
    for num, row in enumerate(rows):
        run_dir = sweep_dir / f"x={row['x']}"
        run_dir.mkdir(parents=True, exist_ok=True)
        reports = row.pop("reports", [])
        lines = [json.dumps({"step": s, "value": v}) for s, v in enumerate(reports)]
        (run_dir / REPORTS_FILE).write_text("".join(f"{line}\n" for line in lines))
        ret = row.pop("ret", None)
        cells = {"job": num, **row, "run_dir": str(run_dir), "config_hash": f"h{num}"}
        cells["return"] = json.dumps(ret) if ret is not None else ""
        table.put(cells, {"x": str(row["x"])})
    table.save()


def test_resume_from_results_csv(tmp_path: Path) -> None:
    write_results(
        tmp_path,
        [
            {"x": 3, "status": "completed", "ret": 3.0, "reports": [1.0, 2.0, 3.0]},
            {"x": 4, "status": "resumed", "ret": 4.0},
            {"x": 1, "status": "pruned", "reports": [0.5]},
            {"x": 5, "status": "failed"},
            {"x": 6, "status": "timeout"},
            {"x": 7, "status": "interrupted"},
            {"x": 8, "status": "superseded"},  # run again later: its new row counts
            {"x": 99, "status": "completed", "ret": 99.0},  # outside range(0,10): left out
            {"x": 2, "status": "completed", "ret": "not a number"},
        ],
    )
    src = source(tmp_path, "x=range(0,10)", n_trials=8, direction="maximize")
    study = src.study
    trials = study.get_trials(states=src_ended())
    told = [(t.params["x"], t.state, t.value) for t in trials if not t.user_attrs.get(ROW_ONLY)]
    assert told == [
        (3, TrialState.COMPLETE, 3.0),
        (4, TrialState.COMPLETE, 4.0),
        (1, TrialState.PRUNED, None),
        (5, TrialState.FAIL, None),
        (6, TrialState.FAIL, None),
        (2, TrialState.FAIL, None),
    ]
    assert study.trials[0].intermediate_values == {0: 1.0, 1: 2.0, 2: 3.0}  # for the pruner
    assert study.trials[2].intermediate_values == {0: 0.5}
    assert src.ended_before == 6
    # The interrupted trial runs first; then only what is left of n_trials: 8 - 6 = 2.
    first = src.ask()
    assert first is not None and values_of(first) == {"x": "7"}
    assert first.key == 9  # trial 9, as its job will be: one trial per row before it
    assert src.ask() is not None
    assert src.ask() is None


def test_what_a_killed_run_left_unrecorded_is_asked_first_ends_then_trials_in_flight(
    tmp_path: Path,
) -> None:
    """kill -9 of a search in memory: its study dies, its run dirs stay. The ends it never
    recorded are asked first (each adopted from its dir), then the trials it left in flight
    (Hydra's .hydra/overrides.yaml, no end: taken up where SLURM still runs them, else run
    again), then the interrupted rows: none lost, none asked twice, n_trials kept."""
    write_results(tmp_path, [{"x": 3, "status": "completed", "ret": 3.0}])
    for name, began in (("x=6", 2.0), ("x=5", 1.0)):  # in the order they began: 5, then 6
        hydra = tmp_path / name / ".hydra"
        hydra.mkdir(parents=True)
        (hydra / "overrides.yaml").write_text(f"- {name}\n")
        os.utime(hydra / "overrides.yaml", (began, began))
    ended = tmp_path / "x=7"
    ended.mkdir()
    (ended / END_FILE).write_text(json.dumps({"return": 7.0, "overrides": ["x=7"]}))
    (tmp_path / "x=8" / ".hydra").mkdir(parents=True)  # began, its file cut by the kill
    (tmp_path / "x=8" / ".hydra" / "overrides.yaml").write_text("- x=8\n- [")
    src = source(tmp_path, "x=range(0,10)", n_trials=5, direction="maximize")
    asked = [values_of(a)["x"] for a in iter(src.ask, None)]
    assert asked[:3] == ["7", "5", "6"]  # x=8's cut file names no overrides: not among them
    assert len(asked) == 4  # 5 trials: one told from its row, four asked


def test_a_resumed_searchs_trial_numbers_are_its_job_numbers(tmp_path: Path) -> None:
    """Job 1 was interrupted (run again as a new job, 3) and job 2 lies outside the search
    space: each keeps its place as a failed placeholder, so the next trial is 3, as its job
    is (the log said `trial 2 (job 3)`), and neither counts toward n_trials."""
    write_results(
        tmp_path,
        [
            {"x": 3, "status": "completed", "ret": 3.0},
            {"x": 7, "status": "interrupted"},
            {"x": 99, "status": "completed", "ret": 99.0},
        ],
    )
    src = source(tmp_path, "x=range(0,10)", n_trials=3, direction="maximize")
    assert len(src.study.get_trials(states=src_ended())) == 3 and src.ended_before == 1
    rerun = src.ask()
    assert rerun is not None and (rerun.key, values_of(rerun)) == (3, {"x": "7"})
    new = src.ask()
    assert new is not None and new.key == 4
    assert src.ask() is None  # 1 before + 2 now: n_trials=3


def src_ended() -> tuple[TrialState, ...]:
    return (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def test_rows_of_a_value_now_fixed_otherwise_are_left_out(tmp_path: Path) -> None:
    table = ResultsTable(tmp_path / FILENAME)
    for num, y in enumerate(["a", "b"]):
        row = {"job": num, "status": "completed", "run_dir": f"r{num}", "config_hash": f"h{num}"}
        table.put(row | {"return": "1.0"}, {"x": "3", "y": y})
    table.save()
    src = source(tmp_path, "x=range(0,10)", "y=b", n_trials=5)
    assert src.ended_before == 1  # y=a was another config than every trial of this search


def test_resume_false_starts_afresh(tmp_path: Path) -> None:
    write_results(tmp_path, [{"x": 3, "status": "completed", "ret": 3.0}])
    src = source(tmp_path, "x=range(0,10)", n_trials=1, replay=False)
    assert src.study.trials == [] and src.ask() is not None


def test_a_finished_search_starts_nothing_and_more_trials_search_further(tmp_path: Path) -> None:
    write_results(tmp_path, [{"x": x, "status": "completed", "ret": float(x)} for x in (1, 2)])
    assert source(tmp_path, "x=range(0,10)", n_trials=2).ask() is None
    more = source(tmp_path, "x=range(0,10)", n_trials=3)
    assert more.exhausted() is False
    assert more.ask() is not None and more.ask() is None


def dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(proc.stdout)


def test_a_storage_continues_across_runs_and_fails_what_a_killed_sweep_left(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"

    def run() -> OptunaSource:
        return source(tmp_path, "x=range(0,100)", n_trials=5, storage=url, study_name="s")

    first = run()
    a, b, c = first.ask(), first.ask(), first.ask()
    assert a and b and c
    first.ended(a.key, done(1.0))
    first.ended(b.key, done(None, Status.INTERRUPTED))  # Ctrl-C: told failed, to run again
    # c is left RUNNING, as by a SIGKILLed sweep: its owner is a process that no longer exists.
    optuna_storage = optuna.storages.RDBStorage(url)
    trial_c = first.study.trials[c.key]
    optuna_storage.set_trial_user_attr(trial_c._trial_id, OWNER, f"{owner_host()}:{dead_pid()}")

    second = run()
    trials = second.study.get_trials()
    assert [t.state for t in trials[:3]] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL]
    assert trials[2].user_attrs[INTERRUPTED] is True  # never left RUNNING
    assert second.ended_before == 1  # the two cut short run again: not counted
    again = [second.ask(), second.ask()]
    assert [values_of(x) for x in again if x] == [values_of(b), values_of(c)]  # queued, in order
    assert [t.user_attrs.get(RERUN_OF) for t in second.study.trials[3:]] == [b.key, c.key]
    for ask in again:
        assert ask is not None
        second.ended(ask.key, done(2.0))
    # A third run queues nothing again, and runs only what is left: 5 - 3.
    third = run()
    assert third.ended_before == 3
    assert [third.ask() is not None for _ in range(3)] == [True, True, False]


def test_a_trial_a_live_sweep_runs_is_left_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    first = source(tmp_path, "x=range(0,100)", n_trials=5, storage=url, study_name="s")
    assert first.ask() is not None  # this process is alive: its trial stays RUNNING
    second = source(tmp_path, "x=range(0,100)", n_trials=5, storage=url, study_name="s")
    assert second.study.trials[0].state is TrialState.RUNNING
    assert second.study.get_trials(states=(TrialState.WAITING,)) == []


def owner_host() -> str:
    import socket

    return socket.gethostname()


def test_a_journal_file_storage_resumes_too(tmp_path: Path) -> None:
    path = str(tmp_path / "study.log")
    first = source(tmp_path, "x=range(0,100)", n_trials=2, storage=path)
    ask = first.ask()
    assert ask is not None
    first.ended(ask.key, done(1.0))
    second = source(tmp_path, "x=range(0,100)", n_trials=2, storage=path)
    assert second.ended_before == 1
    assert second.study.study_name == first.study.study_name  # the sweep dir names the study


def test_a_resumed_seeded_search_does_not_draw_the_first_runs_choices_again(
    tmp_path: Path,
) -> None:
    first = source(tmp_path, "x=range(0,1000)", n_trials=4, seed=3)
    asked = [first.ask() for _ in range(2)]
    rows = [{"x": int(values_of(a)["x"]), "status": "completed", "ret": 1.0} for a in asked if a]
    write_results(tmp_path, rows)
    again = source(tmp_path, "x=range(0,1000)", n_trials=4, seed=3)
    more = [again.ask() for _ in range(2)]
    # The same seed from scratch would give the first run's draws, which resume would only
    # hand back as already finished: no search at all.
    assert {values_of(a)["x"] for a in more if a}.isdisjoint({str(r["x"]) for r in rows})


def test_the_summary_sets_the_searchs_time_against_its_best_trials_own(tmp_path: Path) -> None:
    src = source(tmp_path, "x=range(0,50)", n_trials=3, direction="maximize")
    drive(src, probe, slots=3)
    best = src.study.best_trial
    own = best.duration.total_seconds() if best.duration else 0.0
    line = time_line(src, took=12.5)
    assert line == (
        f"the search took 12.5s, {12.5 / own:.2f}x its best trial's own time "
        f"(trial {best.number}: {own:.1f}s)"
    )


def test_no_time_line_for_a_best_trial_an_earlier_run_trained(tmp_path: Path) -> None:
    """Resumed: its best trial was replayed from results.csv, not trained by this run."""
    src = source(tmp_path, "x=range(0,50)", n_trials=2, direction="maximize")
    trial = src.study.ask({"x": optuna.distributions.IntDistribution(0, 50)})
    src.study.tell(trial, 50.0)  # as a replayed row: no OWNER of this sweep
    drive(src, probe, slots=1)
    assert src.study.best_trial.number == trial.number
    assert time_line(src, took=1.0) is None


def test_no_time_line_without_a_completed_trial(tmp_path: Path) -> None:
    src = source(tmp_path, "x=range(0,50)", n_trials=1, max_failure_rate=1.0)
    ask = src.ask()
    assert ask is not None
    src.ended(ask.key, done(None, Status.FAILED))
    assert time_line(src, took=1.0) is None
