"""What a stopped, failed or resumed sweep tells its user, end to end: job numbers that agree
everywhere, plain run dirs for re-runs, counts that add up, the exact command that resumes it,
and an Optuna study's best named apart from the sweep dir's."""

from __future__ import annotations

import collections
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROBE, Runner, wait_no_tagged
from hydra_optuna_venv import hydra_optuna_python  # noqa: F401 - the venv's fixture

# -- a sweep interrupted, then resumed by the command it printed --------------------------------


@dataclass
class Resumed:
    sweep: Path  # the sweep dir, absolute
    marks: Path
    first: str  # the interrupted run's output
    first_status: int
    command: str  # the resume command it printed
    second: str  # the output of that command, run by a shell
    second_status: int

    def live(self) -> pd.DataFrame:
        frame = pd.read_csv(self.sweep / "results.csv")
        return frame[frame["status"] != "superseded"]


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Resumed:
    tmp = tmp_path_factory.mktemp("resume")
    runner, marks = Runner(tmp), tmp / "marks"
    marks.mkdir()
    # A relative sweep dir with a space and a range sweep: both need quoting to resume.
    args = runner.probe_sweep(
        marks, "x=range(0,6)", "hold_from=2", "hydra.launcher.n_jobs=2", "hydra.sweep.dir=my sweep"
    )
    (marks / "hold").touch()
    sweep = runner.popen(args)
    deadline = time.monotonic() + 60
    while not ((marks / "start-2").exists() and (marks / "start-3").exists()):
        assert time.monotonic() < deadline, "jobs 2 and 3 never started"
        time.sleep(0.1)
    sweep.send_signal(signal.SIGINT)
    first, _ = sweep.communicate(timeout=30)
    (marks / "hold").unlink()
    found = re.search(r"to resume \(jobs that finished are not run again\), run: (.*)", first)
    command = found[1] if found else ""
    # No command printed (the first test below fails then): the same sweep again, so that the
    # other tests still look at a resumed run.
    second = subprocess.run(
        ["bash", "-c", command or shlex.join([sys.executable, *args])],
        cwd=tmp,
        env=runner.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wait_no_tagged(runner.tag, within=10) == []
    return Resumed(
        tmp / "my sweep",
        marks,
        first,
        sweep.returncode,
        command,
        second.stdout + second.stderr,
        second.returncode,
    )


@pytest.mark.slow
def test_an_interrupted_sweep_prints_the_command_that_resumes_it(resumed: Resumed) -> None:
    assert resumed.first_status == 130, resumed.first
    assert shlex.split(resumed.command) == [
        sys.executable,
        str(PROBE),
        "--multirun",
        f"marks={resumed.marks}",
        "x=range(0,6)",
        "hold_from=2",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir='{resumed.sweep}'",  # absolute, in the place of the relative one
    ]
    assert resumed.second_status == 0, resumed.second
    started = collections.Counter((resumed.marks / "starts.log").read_text().split())
    assert started == {"0": 1, "1": 1, "2": 2, "3": 2, "4": 1, "5": 1}


@pytest.mark.slow
def test_interrupted_jobs_are_not_finished_in_the_stop_summary(resumed: Resumed) -> None:
    summary = [line for line in resumed.first.splitlines() if "; results in" in line][-1]
    assert "2/6 finished (2 done, 0 failed, 0 resumed), 2 interrupted, 0 running, 2 never" in (
        summary
    )


@pytest.mark.slow
def test_the_console_numbers_jobs_as_results_csv_does(resumed: Resumed) -> None:
    said = collections.defaultdict(set)
    for num, x in re.findall(
        r"job (\d+) (?:resumed|start|done)\s+(?:cpu\s+)?x=(\d+)", resumed.second
    ):
        said[int(x)].add(int(num))
    live = resumed.live()
    assert {int(r.x): {int(r.job)} for r in live.itertuples()} == said
    # Resumed jobs keep their numbers; the jobs that ran go on from the first run's highest (3).
    assert dict(zip(live["x"], live["job"], strict=True)) == {0: 0, 1: 1, 2: 4, 3: 5, 4: 6, 5: 7}


@pytest.mark.slow
def test_a_rerun_takes_the_plain_run_dir(resumed: Resumed) -> None:
    frame = pd.read_csv(resumed.sweep / "results.csv")
    for x in (2, 3):
        rerun, earlier = (
            frame[(frame["x"] == x) & (frame["status"] == s)] for s in ("completed", "superseded")
        )
        # run_dir in one form, the first run's (relative to the working dir the sweeps ran in),
        # though the resume command gives the sweep dir absolute.
        assert rerun["run_dir"].item() == f"my sweep/x={x}"
        # The interrupted attempt, logs included, is kept where its row says.
        assert earlier["run_dir"].item() == f"my sweep/superseded/x={x}"
        assert (resumed.sweep / "superseded" / f"x={x}" / "stderr.log").exists()
    assert not list(resumed.sweep.glob("*~*"))


@pytest.mark.slow
def test_the_leaderboard_counts_jobs_not_attempts(resumed: Resumed) -> None:
    assert (
        "Leaderboard (max objective): 6 finished, 0 failed or unfinished, 6 jobs of this sweep "
        f"dir ({resumed.sweep / 'results.csv'}); 2 superseded (earlier attempts at jobs run "
        "again) not counted"
    ) in resumed.second


@pytest.mark.slow
def test_a_failed_sweep_prints_the_command_that_resumes_it(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    result = runner.run(runner.probe_sweep(marks, "x=1,2,3", "fail_x=2"))
    assert result.returncode == 1, result.stdout
    found = re.search(
        r"to resume \(jobs that finished are not run again\), run: (.*)", result.stdout
    )
    assert found, result.stdout
    again = subprocess.run(
        ["bash", "-c", found[1]], cwd=tmp_path, env=runner.env(), capture_output=True, text=True
    )
    assert again.returncode == 1, again.stdout  # x=2 fails again; the others are resumed
    assert again.stdout.count(" resumed  x=") == 2, again.stdout
    assert collections.Counter((marks / "starts.log").read_text().split()) == {
        "1": 1,
        "2": 2,
        "3": 1,
    }


# -- Optuna: the study's best and this sweep dir's ----------------------------------------------


@pytest.mark.slow
def test_an_optuna_study_kept_in_its_sweep_dir_and_its_best_named_apart(
    runner: Runner,
    marks: Path,
    tmp_path: Path,
    hydra_optuna_python: Path,  # noqa: F811
) -> None:
    runner.python = str(hydra_optuna_python)  # Hydra's Optuna sweeper: optuna < 3

    def run(sweep: str, storage: str, seed: int) -> str:
        result = runner.run(
            runner.probe_sweep(
                marks,
                "hydra/sweeper=optuna",
                "hydra.sweeper.n_trials=3",
                "hydra.sweeper.n_jobs=3",
                "hydra.sweeper.direction=maximize",
                f"hydra.sweeper.sampler.seed={seed}",
                "hydra.sweeper.study_name=probe",
                f"hydra.sweeper.storage={storage}",
                f"hydra.sweep.dir={sweep}",
                "x=range(0,1000)",
            )
        )
        assert result.returncode == 0, result.stdout
        return result.stdout

    # As docs/search.md has it: the study in the sweep dir, which exists before Optuna opens it.
    run("first", "sqlite:///${hydra.sweep.dir}/study.db", seed=1)
    assert (tmp_path / "first" / "study.db").exists()
    # The same study, run again into another sweep dir: two bests, each named for what it is.
    out = run("second", f"sqlite:///{tmp_path / 'first' / 'study.db'}", seed=2)
    study_best = yaml.safe_load((tmp_path / "second" / "optimization_results.yaml").read_text())
    here = pd.read_csv(tmp_path / "second" / "results.csv")
    best = here.loc[here["objective"].idxmax()]
    assert f"Best value: {study_best['best_value']}" in out
    assert (
        "hpsearch: Optuna's \"Best value\" above is its study's best, over every trial the study "
        "holds (every run of the study); the best of this sweep dir's results.csv (3 jobs) is "
        f"{best['objective']:.4f} (x={best['x']})"
    ) in out
    assert out.index("Best value:") < out.index("hpsearch: Optuna's") < out.index("Leaderboard")
    assert "3 jobs of this sweep dir (second/results.csv)" in out
