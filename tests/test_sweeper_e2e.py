"""hydra/sweeper=hpsearch end to end: trials streamed to the launcher's free slots, pruned from
their reports, resumed by the same command, and batched for another launcher."""

from __future__ import annotations

import itertools
import re
import signal
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml
from conftest import Runner, assert_one_pruning_story, read_records, wait_for, wait_no_tagged

from hpsearch_launcher.search.algorithms import make_sampler
from hpsearch_launcher.search.settings import parse_settings

pytestmark = pytest.mark.slow

SEARCH = ("hydra/sweeper=hpsearch", "hydra.sweeper.direction=maximize", "x=range(0,100)")


def starts(marks: Path) -> list[int]:
    path = marks / "starts.log"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def results(tmp_path: Path) -> pd.DataFrame:
    return pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)


def best(tmp_path: Path) -> dict:
    """What the sweeper wrote of its best trial."""
    return yaml.safe_load((tmp_path / "sweep" / "optimization_results.yaml").read_text())


def first_draws(seed: int, n: int) -> list[int]:
    """The x values the random sampler with `seed` draws first, as the sweep's would."""
    study = optuna.create_study(
        sampler=make_sampler(
            parse_settings({"sampler": {"_target_": "optuna.samplers.RandomSampler", "seed": seed}})
        )
    )
    space = {"x": optuna.distributions.IntDistribution(0, 100)}  # range(0,100): 100 included
    return [int(study.ask(space).params["x"]) for _ in range(n)]


def test_a_free_slot_gets_a_new_trial_while_another_still_runs(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Trial 0 is held; the other slot runs trials 1..4 meanwhile. Batches of two (Hydra's
    Optuna sweeper) would wait for trial 0 before starting trial 2."""
    seed = next(s for s in range(200) if (d := first_draws(s, 5))[0] >= 50 > max(d[1:]))
    (marks / "hold").touch()
    args = runner.probe_sweep(
        marks,
        *SEARCH,
        "hydra/sweeper/sampler=random",
        f"hydra.sweeper.sampler.seed={seed}",
        "hydra.sweeper.n_trials=5",
        "hold_from=50",
        "hydra.launcher.n_jobs=2",
    )
    sweep = runner.popen(args)
    try:
        deadline = time.monotonic() + 90
        while len(list(marks.glob("end-*"))) < 4:
            assert sweep.poll() is None and time.monotonic() < deadline, "trials 1..4 did not end"
            time.sleep(0.1)
        assert not (marks / "end-0").exists()  # all the while, trial 0 held its slot
    finally:
        (marks / "hold").unlink()
    out, _ = sweep.communicate(timeout=60)
    assert sweep.returncode == 0, out
    # Trial 0 took a slot first, beside trial 1, before trial 2 was asked: the sweep's own
    # start lines say so (its cold process may log its start after trials 1 and 2 ended).
    started = [int(n) for n in re.findall(r"\bjob (\d+) start\b", out)]
    assert started == [0, 1, 2, 3, 4], out
    assert results(tmp_path).set_index("job").loc[0, "x"] == first_draws(seed, 1)[0]
    assert sorted(starts(marks)) == sorted(first_draws(seed, 5))
    assert len(read_records(marks)) == 5
    assert best(tmp_path)["best_value"] == max(r["x"] for r in read_records(marks))


def test_the_same_command_resumes_and_more_trials_search_further(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    args = runner.probe_sweep(
        marks, *SEARCH, "hydra.sweeper.sampler.seed=1", "hydra.launcher.n_jobs=2"
    )
    done = runner.run([*args, "hydra.sweeper.n_trials=4"])
    assert done.returncode == 0, done.stdout
    assert len(starts(marks)) == 4
    again = runner.run([*args, "hydra.sweeper.n_trials=4"])
    assert again.returncode == 0, again.stdout
    assert len(starts(marks)) == 4  # a finished search starts nothing
    assert "the search is complete (n_trials=4)" in again.stdout
    more = runner.run([*args, "hydra.sweeper.n_trials=6"])
    assert more.returncode == 0, more.stdout
    assert "4 of 6 trials done, 2 to go" in more.stdout
    frame = results(tmp_path)
    assert len(frame) == 6 and set(frame["status"]) == {"completed"}
    assert len(starts(marks)) == 6 and len(set(starts(marks))) == 6  # new values, not repeats


def test_resume_false_reads_nothing_and_searches_afresh(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """With hydra.launcher.resume=false the sweep dir's rows are not told to the study: the
    same 2-trial search runs 2 trials again (told them, it would be complete at once)."""
    args = runner.probe_sweep(
        marks,
        *SEARCH,
        "hydra.sweeper.sampler.seed=1",
        "hydra.sweeper.n_trials=2",
        "hydra.launcher.n_jobs=2",
    )
    done = runner.run(args)
    assert done.returncode == 0, done.stdout
    again = runner.run([*args, "hydra.launcher.resume=false"])
    assert again.returncode == 0, again.stdout
    assert "the search is complete" not in again.stdout
    assert len(starts(marks)) == 4  # both trials ran again
    frame = results(tmp_path)
    assert len(frame) == 2 and set(frame["status"]) == {"completed"}
    assert (tmp_path / "sweep" / "results.csv.bak").exists()  # the first run's, unread


def test_hopeless_trials_are_pruned(runner: Runner, marks: Path, tmp_path: Path) -> None:
    done = runner.run(
        runner.probe_sweep(
            marks,
            *SEARCH,
            "hydra.sweeper.sampler.seed=2",
            "hydra.sweeper.n_trials=8",
            "hydra.sweeper.pruner=median",
            "+hydra.sweeper.pruner_args.n_startup_trials=2",
            "steps=4",
            "step_s=0.2",
            "hydra.launcher.n_jobs=2",
        )
    )
    assert done.returncode == 0, done.stdout
    frame = results(tmp_path)
    assert len(frame) == 8
    assert set(frame["status"]) == {"completed", "pruned"}, frame
    assert (frame["status"] == "pruned").sum() >= 1
    best_done = frame.loc[frame["status"] == "completed", "x"].max()
    assert frame.loc[frame["status"] == "pruned", "x"].max() < best_done
    assert_one_pruning_story(pd.read_csv(tmp_path / "sweep" / "results.csv"), done.stdout, tmp_path)


def stop_during_the_first_trial(runner: Runner, marks: Path, args: list[str], sig: int) -> int:
    """Run the sweep with its trials held, stop it with `sig` once the first has started,
    release the hold: the x of the trial that was cut short."""
    (marks / "hold").touch()
    sweep = runner.popen(args)
    deadline = time.monotonic() + 60
    while not starts(marks):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    sweep.send_signal(sig)
    out, _ = sweep.communicate(timeout=30)
    assert sweep.returncode == (-9 if sig == signal.SIGKILL else 128 + sig), out
    if sig != signal.SIGKILL:  # the counts add up to n_trials, in words that agree
        assert "stopping 1 running job, " in out, out
        counts = re.search(
            r"(\d+)/(\d+) finished .*?, (\d+) interrupted, (\d+) running, (\d+) never started", out
        )
        assert counts is not None, out
        ended, total, interrupted, running, never = map(int, counts.groups())
        assert ended + interrupted + running + never == total, counts.group(0)
    assert wait_no_tagged(runner.tag, within=10) == []
    (marks / "hold").unlink()
    return starts(marks)[0]


def test_an_interrupted_trial_runs_again_with_the_same_values(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    args = runner.probe_sweep(
        marks,
        *SEARCH,
        "hydra.sweeper.sampler.seed=3",
        "hydra.sweeper.n_trials=3",
        "hydra.launcher.n_jobs=1",
    )
    held = stop_during_the_first_trial(runner, marks, args, signal.SIGINT)
    done = runner.run(args)
    assert done.returncode == 0, done.stdout
    assert starts(marks)[:2] == [held, held]  # run again first, with its values
    frame = results(tmp_path)
    assert list(frame["status"]) == ["superseded", "completed", "completed", "completed"]


def test_a_trial_a_killed_sweep_left_in_flight_runs_again_first_in_memory(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """SIGKILL after trial 0 ended, during trial 1: the study in memory dies with the sweep,
    trial 1's run dir stays (Hydra's .hydra/overrides.yaml, no end). The rerun (its sampler
    told trial 0, so drawing anew) asks trial 1's values first, not a new draw."""
    args = runner.probe_sweep(
        marks, *SEARCH, "hydra.sweeper.sampler.seed=3", "hydra.sweeper.n_trials=3",
        "hydra.launcher.n_jobs=1", "gate=true",
    )  # fmt: skip
    sweep = runner.popen(args)  # each job waits, before it ends, for marks/go-<its num>
    wait_for(marks / "start-0")
    (marks / "go-0").touch()
    wait_for(marks / "start-1")
    sweep.kill()
    sweep.communicate()
    assert wait_no_tagged(runner.tag, within=10) == []
    for num in range(1, 4):
        (marks / f"go-{num}").touch()
    done = runner.run(args)
    assert done.returncode == 0, done.stdout
    _, held, *rest = starts(marks)
    assert rest[:1] == [held], starts(marks)  # run again first, with its values
    assert list(results(tmp_path)["status"]) == ["completed"] * 3, done.stdout


def test_a_storage_fails_and_reruns_the_trial_of_a_killed_sweep(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    args = runner.probe_sweep(
        marks,
        *SEARCH,
        f"hydra.sweeper.storage={url}",
        "hydra.sweeper.study_name=probe",
        "hydra.sweeper.n_trials=2",
        "hydra.launcher.n_jobs=1",
    )
    # SIGKILL: nothing tells the study, which keeps the trial RUNNING.
    held = stop_during_the_first_trial(runner, marks, args, signal.SIGKILL)
    done = runner.run(args)
    assert done.returncode == 0, done.stdout
    assert starts(marks)[:2] == [held, held]  # the killed trial ran again
    study = optuna.load_study(study_name="probe", storage=url)
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "COMPLETE", "COMPLETE"]  # never left RUNNING; 2 trials ended


def test_another_launcher_gets_batches(runner: Runner, marks: Path, tmp_path: Path) -> None:
    done = runner.run(
        runner.probe_sweep(
            marks,
            *SEARCH,
            "hydra/launcher=basic",
            "hydra.sweeper.n_trials=3",
            "hydra.sweeper.n_jobs=2",
        )
    )
    assert done.returncode == 0, done.stdout
    assert "trials run in batches of hydra.sweeper.n_jobs=2" in done.stdout
    assert len(read_records(marks)) == 3
    assert best(tmp_path)["best_value"] == max(r["x"] for r in read_records(marks))


def test_too_many_failures_stop_the_search_exit_1(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    done = runner.run(
        runner.probe_sweep(
            marks,
            "hydra/sweeper=hpsearch",
            "x=range(0,100,2)",  # every x fails (fail_mod=2)
            "fail_mod=2",
            "hydra.sweeper.n_trials=10",
            "hydra.launcher.n_jobs=1",
        )
    )
    assert done.returncode == 1, done.stdout
    assert len(starts(marks)) == 1  # max_failure_rate=0: the first failure stops it
    assert (
        "hpsearch: 1 of this run's 10 trials failed, more than max_failure_rate=0.0 allows: "
        "the search stopped; each trial's logs are in its run dir"
    ) in done.stdout
    # On its own logged line, as the end-of-sweep leaderboard is: no empty `[HYDRA] ` line.
    assert "][HYDRA] Leaderboard (min objective)" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x=interval(5,1)"], "hpsearch: error: x=interval(5,1) (on the command line): "),
        (["x=range(0,10)", "hydra.sweeper.sampler=tpe"], "hpsearch: error: hydra.sweeper.sampler="),
        (["marks=x"], "hpsearch: error: nothing to search: "),
        (
            ["x=range(0,10)", "hydra.launcher.prune=median"],
            "hpsearch: error: hydra.launcher.prune='median' prunes grids only: with "
            "hydra/sweeper=hpsearch set hydra.sweeper.pruner=median instead",
        ),
    ],
)
def test_a_bad_search_is_one_line_exit_2_before_any_job(
    runner: Runner, marks: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    done = runner.run(runner.probe_sweep(marks, "hydra/sweeper=hpsearch", *args))
    assert done.returncode == 2, done.stdout
    assert done.stdout.strip().startswith(message), done.stdout
    assert len(done.stdout.strip().splitlines()) == 1
    assert not starts(marks)


def test_hpsearch_searches_and_prunes_maximising_val_accuracy(
    runner: Runner, tmp_path: Path
) -> None:
    """The issue's command, small: the direction follows objective.mode (max)."""
    done = runner.run(
        [
            "-m",
            "hpsearch",
            "--multirun",
            "hydra/sweeper=hpsearch",
            "hydra.sweeper.n_trials=4",
            "hydra.sweeper.pruner=median",
            "lr=tag(log,interval(1e-4,1e-1))",
            "batch=choice(32,64,128)",
            "device=cpu",
            "epochs=2",
            "hydra.sweep.dir=sweep",
        ]
    )
    assert done.returncode == 0, done.stdout
    assert "MedianPruner, maximize" in done.stdout
    frame = results(tmp_path)
    assert len(frame) == 4
    finished = frame[frame["status"] == "completed"]
    assert best(tmp_path)["best_value"] == pytest.approx(finished["objective"].astype(float).max())


def test_the_first_line_says_how_many_trials_really_run_at_once(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """hydra.sweeper.n_jobs=1 beside 2 slots: one trial at a time, and the sweep says so and
    why (it said the slots' 2)."""
    args = ("hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=1", "sleep=0.3")
    done = runner.run(runner.probe_sweep(marks, *SEARCH, *args, "hydra.launcher.n_jobs=2"))
    assert done.returncode == 0, done.stdout
    said = "1 at a time (hydra.sweeper.n_jobs=1; the slots would take 2 at a time)"
    assert said in done.stdout, done.stdout
    spans = sorted((r["start"], r["end"]) for r in read_records(marks))
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans  # none overlapped


def test_a_study_another_sweeper_began_is_continued_as_the_sweep_says(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """A stored study holding 3 trials that Hydra's Optuna sweeper ran (no hpsearch owner):
    n_trials=3 counts them, so nothing runs, and the sweep says so and what to set for 3 more;
    with that, 3 more run."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=storage, study_name="theirs", direction="maximize")
    space = {"x": optuna.distributions.IntDistribution(0, 100)}
    for x in (1, 2, 3):
        study.add_trial(optuna.trial.create_trial(params={"x": x}, distributions=space, value=x))
    stored = (f"hydra.sweeper.storage={storage}", "hydra.sweeper.study_name=theirs")
    first = runner.run(runner.probe_sweep(marks, *SEARCH, *stored, "hydra.sweeper.n_trials=3"))
    assert first.returncode == 0, first.stdout
    said = "3 of the study's trials were run by another sweeper"
    assert said in first.stdout and "set hydra.sweeper.n_trials=6" in first.stdout, first.stdout
    assert starts(marks) == []
    more = runner.run(runner.probe_sweep(marks, *SEARCH, *stored, "hydra.sweeper.n_trials=6"))
    assert more.returncode == 0, more.stdout
    assert len(starts(marks)) == 3
