"""A search refused before its first trial, through `python -m hpsearch` as a user types it:
one line, exit status 2, and the disk as it was (no empty outputs/multirun/<date>/<time>/, no
.hpsearch-lock); a mistyped hydra.sweeper key gets the nearest setting's name."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Runner

SEARCH = ["-m", "hpsearch", "--multirun", "hydra/sweeper=hpsearch", "device=cpu", "epochs=1"]
SPACE = "batch=choice(32,64)"


def left_on_disk(cwd: Path) -> list[str]:
    return sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*"))


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["hydra.sweeper.n_trial=4", SPACE],
            "hydra.sweeper.n_trial: no such setting; did you mean hydra.sweeper.n_trials?",
        ),
        (
            ["+hydra.sweeper.n_trial=4", SPACE],
            "hydra.sweeper.n_trial: no such setting; did you mean hydra.sweeper.n_trials?",
        ),
        (
            ["hydra.sweeper.sampler.n_startup_trial=2", SPACE],
            "did you mean hydra.sweeper.sampler.n_startup_trials?",
        ),
        (["hydra.sweeper.seed=3", SPACE], "hydra.sweeper.seed: moved to hydra.sweeper.sampler"),
        (["hydra.sweeper.n_trials=0", SPACE], "hydra.sweeper.n_trials=0: must be an integer"),
        (["hydra.sweeper.pruner=medain", SPACE], "hydra.sweeper.pruner='medain': must be one of"),
        (["+hydra.sweeper.pruner_args.n_warmup_step=2", SPACE], "given, but pruner=none"),
        (["lr=tag(log,interval(0,1e-1))"], "lr=tag(log,interval(0,1e-1)) (on the command line)"),
        (["hydra.launcher.prune=median", SPACE], "hydra.launcher.prune='median' prunes grids"),
        (["hydra/sweeper/sampler=motpe", SPACE], "hydra/sweeper/sampler=motpe: Optuna 4 removed"),
        (["seed=1"], "nothing to search: "),
        (["lr=interval(-1,-0.5)"], "lr=-"),  # the job's own check, when its trial is asked
    ],
)
def test_a_refused_search_is_one_line_and_leaves_nothing(
    runner: Runner, tmp_path: Path, args: list[str], line: str
) -> None:
    done = runner.run([*SEARCH, *args])
    assert done.returncode == 2, done.stdout
    errors = [row for row in done.stdout.splitlines() if row.startswith("hpsearch: error:")]
    assert len(errors) == 1 and line in errors[0], done.stdout
    assert "Traceback" not in done.stdout
    assert left_on_disk(tmp_path) == [], done.stdout


def test_the_search_without_optuna_names_the_extra(runner: Runner, tmp_path: Path) -> None:
    """As after the README's `.[cpu]` install: Optuna cannot be imported (None in
    sys.modules is Python's own way to make an import fail)."""
    code = (
        "import runpy, sys; sys.modules['optuna'] = None; sys.argv[0] = 'hpsearch'; "
        "runpy.run_module('hpsearch', run_name='__main__', alter_sys=True)"
    )
    done = runner.run(["-c", code, *SEARCH[2:], SPACE])
    assert done.returncode == 2, done.stdout
    assert done.stdout.strip() == (
        "hpsearch: error: hydra/sweeper=hpsearch needs Optuna, which is not installed here: "
        'install the search extra (pip install -e ".[search]" in a checkout, pip install '
        '"hpsearch[search]" otherwise)'
    )
    assert left_on_disk(tmp_path) == []


@pytest.mark.slow
def test_a_search_over_a_key_the_app_lacks_is_refused_in_any_app(
    runner: Runner, tmp_path: Path, marks: Path
) -> None:
    """Not only the hpsearch app's: before the study starts (Hydra would refuse the first
    trial's config, advising `+xs=<a sampled number>`, with the sweep's lock left behind)."""
    done = runner.run(runner.probe_sweep(marks, "hydra/sweeper=hpsearch", "xs=interval(0,1)"))
    assert done.returncode == 2, done.stdout
    assert done.stdout.strip() == (
        "hpsearch: error: xs: no such key; did you mean x? (to search a key the config lacks, "
        "add it with +: '+xs=...')"
    )
    assert left_on_disk(tmp_path) == ["marks"]


@pytest.mark.slow
def test_a_key_added_with_plus_is_searched_on_purpose(
    runner: Runner, tmp_path: Path, marks: Path
) -> None:
    args = ["hydra/sweeper=hpsearch", "+xs=interval(0,1)", "hydra.sweeper.n_trials=2"]
    done = runner.run(runner.probe_sweep(marks, *args))
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "sweep" / "results.csv").read_text().count("\n") == 3  # header, 2 trials


# A search in an app whose SweepSummary callback says higher is better.
SAYS_MAX = ("hydra/sweeper=hpsearch", "x=choice(1,5)", "+hydra.callbacks.summary.mode=max")


@pytest.mark.slow
def test_a_search_in_any_app_follows_the_summary_callbacks_mode(
    runner: Runner, tmp_path: Path, marks: Path
) -> None:
    """The app's SweepSummary says `mode: max` and hydra.sweeper.direction is not set: the
    study maximises (it minimised, while the leaderboard ranked by max)."""
    done = runner.run(runner.probe_sweep(marks, *SAYS_MAX, "hydra/sweeper/sampler=grid"))
    assert done.returncode == 0, done.stdout
    assert "GridSampler, NopPruner, maximize\n" in done.stdout, done.stdout
    (best,) = [line for line in done.stdout.splitlines() if "hpsearch: best trial" in line]
    assert best.endswith(": 5 (x=5)"), done.stdout


@pytest.mark.slow
def test_a_direction_against_the_summary_callbacks_mode_is_refused_in_any_app(
    runner: Runner, tmp_path: Path, marks: Path
) -> None:
    done = runner.run(runner.probe_sweep(marks, *SAYS_MAX, "hydra.sweeper.direction=minimize"))
    assert done.returncode == 2, done.stdout
    assert done.stdout.strip() == (
        "hpsearch: error: hydra.sweeper.direction='minimize': contradicts the SweepSummary "
        "callback's mode=max (the leaderboard would rank the other way): drop "
        "hydra.sweeper.direction (it follows the callback's mode), or set the callback's "
        "mode: min"
    )
    assert left_on_disk(tmp_path) == ["marks"]
