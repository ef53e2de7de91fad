"""`python -m hpsearch.report`: the leaderboard and plot of a sweep dir, from disk alone."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib.image
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from hpsearch.report import build_figure, load_sweep, main
from hpsearch.report_axes import (
    MAX_TICKS,
    MIN_TICK_GAP,
    Sweep,
    param_axis,
    scatter_pair,
    tick_label,
)
from hpsearch_launcher.results import ResultsTable

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# lr x model, with one failed and one timed-out job; val_accuracy is the objective.
RUNS: list[tuple[str, str, str, str, str]] = [
    # lr, model, status, objective, error
    ("0.0001", "mlp", "completed", "0.71", ""),
    ("0.001", "mlp", "completed", "0.88", ""),
    ("0.01", "cnn", "completed", "0.95", ""),
    ("0.1", "cnn", "failed", "", "TrainingDiverged: loss is nan at epoch 2"),
    ("0.001", "cnn", "resumed", "0.91", ""),
    ("0.1", "mlp", "timeout", "", "no result within 600s"),
]


def make_sweep(
    sweep_dir: Path,
    runs: Sequence[tuple[str, str, str, str, str]] = RUNS,
    multirun: str | None = "objective:\n  metric: val_accuracy\n  mode: max\n",
) -> Path:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if multirun is not None:
        (sweep_dir / "multirun.yaml").write_text(multirun)
    table = ResultsTable(sweep_dir / "results.csv")
    for job, (lr, model, status, objective, error) in enumerate(runs):
        table.put(row(job, status, objective, error, sweep_dir), {"lr": lr, "model": model})
    return sweep_dir


def row(job: int, status: str, objective: str, error: str, sweep_dir: Path) -> dict[str, object]:
    return {
        "job": job,
        "status": status,
        "objective": objective,
        "val_accuracy": objective,
        "test_accuracy": objective,
        "wall_time_s": 12.5,
        "run_dir": str(sweep_dir / str(job)),
        "config_hash": f"hash{job}",
        "error": error,
    }


def ranked_objectives(stdout: str) -> list[str]:
    """The objective column of the leaderboard's rank lines, in printed order."""
    lines = [line.split() for line in stdout.splitlines()]
    return [cells[1] for cells in lines if cells and cells[0].isdigit()]


def assert_png(path: Path, min_width: int = 400, min_height: int = 300) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert min_width <= width <= 3000 and min_height <= height <= 3000


def test_no_sweep_dir_or_latest_reports_the_newest_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hpsearch-report` alone (or `latest`): the sweep under outputs/multirun/ whose
    results.csv changed last, without typing its timestamped path."""
    monkeypatch.chdir(tmp_path)
    older = make_sweep(tmp_path / "outputs/multirun/2026-12-01/09-00-00", RUNS[:1])
    newer = make_sweep(tmp_path / "outputs/multirun/2026-12-02/10-00-00", RUNS[:3])
    os.utime(older / "results.csv", (1e9, 1e9))
    for argv in ([], ["latest"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"the latest sweep: {newer.relative_to(tmp_path)}\n"), out
        assert ranked_objectives(out) == ["0.9500", "0.8800", "0.7100"]


def test_latest_finds_a_sweep_under_hydras_own_multirun_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any other Hydra app sweeps into multirun/ (Hydra's default), not outputs/multirun/:
    the newest of both is the latest."""
    monkeypatch.chdir(tmp_path)
    older = make_sweep(tmp_path / "outputs/multirun/2026-12-01/09-00-00", RUNS[:1])
    newer = make_sweep(tmp_path / "multirun/2026-12-02/10-00-00", RUNS[:3])
    os.utime(older / "results.csv", (1e9, 1e9))
    assert main([]) == 0
    assert capsys.readouterr().out.startswith(f"the latest sweep: {newer.relative_to(tmp_path)}\n")


def test_latest_without_a_sweep_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([]) == 2
    assert capsys.readouterr().err == (
        "hpsearch.report: no sweep under outputs/multirun/ or multirun/ here (no results.csv): "
        "run this "
        "where you ran the sweep, or pass its SWEEP_DIR\n"
    )


def test_report_prints_best_first_and_the_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep")

    assert main([str(sweep_dir)]) == 0

    out = capsys.readouterr().out
    assert ranked_objectives(out) == ["0.9500", "0.9100", "0.8800", "0.7100"]
    assert "TrainingDiverged: loss is nan at epoch 2" in out
    assert "no result within 600s" in out
    assert "FAILED" in out and "TIMEOUT" in out
    assert out.rstrip().splitlines()[-1] == f"plot: {sweep_dir / 'report.png'}"
    # Parallel coordinates over two panels side by side, 4.5 inches each at 120 dpi.
    assert_png(sweep_dir / "report.png", min_width=900, min_height=800)


def test_min_mode_ranks_the_lowest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = make_sweep(
        tmp_path / "sweep", multirun="objective:\n  metric: val_loss\n  mode: min\n"
    )

    assert main([str(sweep_dir), "--top", "2"]) == 0

    assert ranked_objectives(capsys.readouterr().out) == ["0.7100", "0.8800"]


def test_without_multirun_yaml_higher_is_better(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep", multirun=None)

    assert main([str(sweep_dir)]) == 0

    assert ranked_objectives(capsys.readouterr().out)[0] == "0.9500"
    assert load_sweep(sweep_dir).metric == "objective"


def panels_by_xlabel(fig: Figure) -> dict[str, Axes]:
    return {ax.get_xlabel(): ax for ax in fig.axes if ax.get_xlabel()}


def test_plot_has_log_lr_categorical_model_best_and_failures(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(make_sweep(tmp_path / "sweep")))
    panels = panels_by_xlabel(fig)
    lr, model = panels["lr"], panels["model"]

    assert lr.get_xscale() == "log"
    assert lr.get_ylabel() == "val_accuracy"
    assert [t.get_text() for t in model.get_xticklabels()] == ["cnn", "mlp"]
    legend = lr.get_legend()
    assert legend is not None
    assert {t.get_text() for t in legend.get_texts()} == {"runs", "failed", "best"}
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "best 0.95" in texts
    assert "\N{MULTIPLICATION SIGN}2" in texts  # both failures sit at lr=0.1
    assert fig.get_suptitle() == "sweep: 6 runs, best val_accuracy=0.95"


def parallel_y(value: float, low: float, high: float) -> float:
    """Where a value sits on a log axis from low to high, from 0 to 1."""
    return (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low))


def collection(fig: Figure, gid: str) -> LineCollection:
    (found,) = [c for ax in fig.axes for c in ax.collections if c.get_gid() == gid]
    assert isinstance(found, LineCollection)
    return found


def test_parallel_coordinates_one_line_per_run_failed_ones_stop_short(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(make_sweep(tmp_path / "sweep")))

    finished = collection(fig, "finished").get_segments()
    failed = collection(fig, "failed").get_segments()
    assert len(finished) == 4 and len(failed) == 2
    # lr, model, then the objective: a failed run has no point on the objective axis.
    assert {len(line) for line in finished} == {3}
    assert {len(line) for line in failed} == {2}
    # The best run (lr=0.01, cnn, 0.95) sits at the top of the objective axis.
    parallel = next(ax for ax in fig.axes if any(c.get_gid() == "finished" for c in ax.collections))
    (best,) = [line for line in parallel.lines if line.get_gid() == "best"]
    assert list(best.get_ydata()) == [parallel_y(0.01, 1e-4, 0.1), 0.0, 1.0]
    names = [t.get_text() for t in parallel.get_xticklabels()]
    assert names == ["lr\n(log)", "model", "val_accuracy"]
    assert any(
        ax.get_ylabel() == "val_accuracy" for ax in fig.axes if ax is not parallel
    )  # colorbar


def test_no_parallel_coordinates_for_one_param(tmp_path: Path) -> None:
    runs = [(lr, "mlp", "completed", f"0.{i + 5}", "") for i, lr in enumerate(["0.1", "0.01"])]
    sweep = load_sweep(make_sweep(tmp_path / "sweep", runs))
    fig = build_figure(dataclasses.replace(sweep, params=["lr"]))

    assert not [c for ax in fig.axes for c in ax.collections if isinstance(c, LineCollection)]


TIED = [
    ("0.001", "32", "completed", "0.9", ""),
    ("0.001", "128", "completed", "0.8", ""),
    ("0.01", "32", "completed", "0.7", ""),
    ("0.01", "128", "completed", "0.9", ""),
    ("0.1", "32", "failed", "", "TrainingDiverged: loss is nan at epoch 1"),
]


def two_numeric_sweep(sweep_dir: Path, runs: Sequence[tuple[str, str, str, str, str]]) -> Sweep:
    """A sweep of lr x batch: two numeric params (make_sweep's `model` column holds batch)."""
    sweep_dir.mkdir(parents=True)
    table = ResultsTable(sweep_dir / "results.csv")
    for job, (lr, batch, status, objective, error) in enumerate(runs):
        table.put(row(job, status, objective, error, sweep_dir), {"lr": lr, "batch": batch})
    return load_sweep(sweep_dir)


@pytest.mark.parametrize("mode", ["max", "min"])
def test_ties_for_best_are_all_marked(tmp_path: Path, mode: str) -> None:
    sweep = two_numeric_sweep(tmp_path / "sweep", TIED)
    sweep = dataclasses.replace(sweep, mode=mode)
    best = [0, 3] if mode == "max" else [2]

    assert sweep.best() == best
    fig = build_figure(sweep)
    stars = [c for ax in fig.axes for c in ax.collections if c.get_label() == "best"]
    assert len(stars) == 3  # in the scatter and in the marginal panel of each param
    assert all(len(c.get_offsets()) == len(best) for c in stars)
    assert len([ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == "best"]) == len(best)
    if mode == "max":
        assert fig.get_suptitle().endswith("best objective=0.9 (2 runs)")


def test_scatter_of_two_numeric_params_coloured_by_objective(tmp_path: Path) -> None:
    fig = build_figure(two_numeric_sweep(tmp_path / "sweep", TIED))

    (scatter,) = [ax for ax in fig.axes if ax.get_title() == "lr \N{MULTIPLICATION SIGN} batch"]
    (dots,) = [c for c in scatter.collections if c.get_gid() == "runs"]
    assert sorted(dots.get_array()) == [0.7, 0.8, 0.9, 0.9]
    assert (scatter.get_xlabel(), scatter.get_ylabel()) == ("lr", "batch")
    # lr spans 0.001..0.1 (the failed run's value counts: it is drawn too), batch only 4x.
    assert (scatter.get_xscale(), scatter.get_yscale()) == ("log", "linear")


def test_no_scatter_with_one_numeric_param(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(make_sweep(tmp_path / "sweep")))  # lr, and model: categorical

    assert not [ax for ax in fig.axes if "\N{MULTIPLICATION SIGN}" in ax.get_title()]


@pytest.mark.parametrize(
    ("names", "pair"),
    [
        (["lr", "batch"], ("lr", "batch")),
        (["model", "lr"], None),  # model is categorical
        (["lr", "batch", "dropout"], ("lr", "dropout")),  # the two with the most values
        (["const", "lr", "batch"], ("lr", "batch")),  # one value: no axis to plot on
    ],
)
def test_scatter_pair_is_the_two_numeric_params_with_most_values(
    names: list[str], pair: tuple[str, str] | None
) -> None:
    columns = {
        "lr": ["1e-3", "1e-2", "1e-1", "1e-3"],
        "batch": ["32", "32", "64", "64"],
        "dropout": ["0.1", "0.2", "0.3", "0.4"],
        "model": ["mlp", "cnn", "mlp", "cnn"],
        "const": ["5", "5", "5", "5"],
    }
    chosen = scatter_pair([param_axis(n, columns[n]) for n in names])

    assert (None if chosen is None else (chosen[0].label, chosen[1].label)) == pair


@pytest.mark.parametrize(
    ("values", "log"),
    [
        (["1e-4", "1e-3", "1e-2"], True),
        (["0.001", "0.01"], False),  # 10x: linear
        (["0", "0.001", "0.1"], False),  # zero has no logarithm
        (["32", "1024"], True),
    ],
)
def test_log_axis_when_positive_values_span_over_20x(values: list[str], log: bool) -> None:
    assert param_axis("lr", values).log is log


@pytest.mark.parametrize(
    ("value", "label"),
    [
        (0.0012345678, "0.00123"),
        (0.0003, "3e-4"),
        (1.23456789e-5, "1.23e-5"),
        (0.1, "0.1"),
        (12.3456, "12.3"),
        (1024.0, "1024"),
        (1234.5678, "1235"),
        (0.0, "0"),
        (2.5e7, "2.5e7"),
    ],
)
def test_tick_labels_are_short(value: float, label: str) -> None:
    assert tick_label(value) == label


def test_optuna_floats_get_few_short_spaced_ticks() -> None:
    rng = random.Random(0)
    lrs = [repr(10 ** rng.uniform(-5, -1)) for _ in range(50)]  # 0.00012345678901234 and such
    dropouts = [repr(rng.uniform(0.1, 0.5)) for _ in range(50)]

    for axis in (param_axis("lr", lrs), param_axis("dropout", dropouts)):
        assert 2 <= len(axis.ticks) <= MAX_TICKS
        assert all(len(label) <= 7 for label in axis.tick_labels), axis.tick_labels
        units = [axis.unit(t) for t in axis.ticks]
        assert all(0 <= u <= 1 for u in units)
        assert all(b - a >= MIN_TICK_GAP for a, b in itertools.pairwise(units))


def test_close_grid_values_do_not_crowd_the_axis() -> None:
    axis = param_axis("lr", ["0.001", "0.0011", "0.05", "0.1"])
    assert axis.ticks == [0.001, 0.05, 0.1]


def test_all_failed_sweep_says_so_instead_of_plotting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [run for run in RUNS if run[2] in ("failed", "timeout")]
    sweep_dir = make_sweep(tmp_path / "sweep", runs)

    assert main([str(sweep_dir)]) == 0

    assert_png(sweep_dir / "report.png", min_width=900, min_height=100)
    fig = build_figure(load_sweep(sweep_dir))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "no finished run: 2 failed" in texts
    assert any("TrainingDiverged: loss is nan at epoch 2" in t for t in texts)
    assert not [c for ax in fig.axes for c in ax.collections]  # no markers at a made-up y=0
    assert fig.get_suptitle() == "sweep: 2 runs, none finished"


def test_sweep_without_params_plots_by_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = tmp_path / "single"
    sweep_dir.mkdir()
    table = ResultsTable(sweep_dir / "results.csv")
    for job in range(3):
        table.put(row(job, "completed", f"0.{job + 5}", "", sweep_dir), {})
    plot = tmp_path / "elsewhere" / "single.png"

    assert main([str(sweep_dir), "--plot", str(plot)]) == 0

    assert capsys.readouterr().out.rstrip().endswith(f"plot: {plot}")
    assert_png(plot)
    assert [ax.get_xlabel() for ax in build_figure(load_sweep(sweep_dir)).axes] == ["job"]


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_missing_dir_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-sweep"
    assert f"sweep dir {missing} does not exist" in error_of([str(missing)], capsys)


def test_dir_without_results_csv_says_run_a_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = error_of([str(tmp_path)], capsys)
    assert f"no results.csv in {tmp_path}: run a sweep with the hpsearch launcher" in err
    assert not (tmp_path / "report.png").exists()


def test_empty_results_csv_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.csv").write_text("job,lr,status,objective,run_dir,config_hash,error\n")
    assert f"{tmp_path / 'results.csv'} has no rows" in error_of([str(tmp_path)], capsys)


def test_bad_multirun_yaml_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep", multirun="objective: [unclosed\n")
    assert f"cannot read {sweep_dir / 'multirun.yaml'}" in error_of([str(sweep_dir)], capsys)


def test_runs_as_a_module(tmp_path: Path) -> None:
    sweep_dir = make_sweep(tmp_path / "sweep")

    done = subprocess.run(
        [sys.executable, "-m", "hpsearch.report", str(sweep_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert ranked_objectives(done.stdout)[0] == "0.9500"
    assert_png(sweep_dir / "report.png")


def test_the_learning_curve_panel_draws_what_runs_reported_pruned_ones_apart(
    tmp_path: Path,
) -> None:
    """Runs that reported a curve (reports.jsonl in their run dir) get one line each in a
    "learning curves" panel; a pruned run's is grey and dotted, with a cross where it stopped;
    a run that reported nothing draws no line there."""
    runs = [
        ("0.001", "mlp", "completed", "0.9", ""),
        ("0.01", "mlp", "completed", "0.8", ""),
        ("0.1", "mlp", "pruned", "", "pruned at step 1 (reported 0.2)"),
        ("0.5", "mlp", "completed", "0.5", ""),  # reported nothing
    ]
    sweep_dir = make_sweep(tmp_path / "sweep", runs)
    for job, curve in enumerate([[0.5, 0.8, 0.9], [0.4, 0.7, 0.8], [0.1, 0.2]]):
        run_dir = sweep_dir / str(job)
        run_dir.mkdir()
        lines = [json.dumps({"step": s, "value": v}) for s, v in enumerate(curve)]
        (run_dir / "reports.jsonl").write_text("\n".join(lines) + "\n")
    fig = build_figure(load_sweep(sweep_dir))
    (panel,) = [ax for ax in fig.axes if ax.get_title() == "learning curves"]
    drawn = [ln for ln in panel.get_lines() if len(ln.get_xdata()) > 1 and ln.get_gid() != "rung"]
    assert len(drawn) == 3
    dotted = [line for line in drawn if line.get_linestyle() == ":"]
    assert len(dotted) == 1 and list(dotted[0].get_ydata()) == [0.1, 0.2]
    crosses = [
        line
        for line in panel.get_lines()
        if line.get_marker() == "x" and len(line.get_xdata()) == 1
    ]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [2]  # step 1: the 2nd report
    assert "pruned (1), x: the decision" in [t.get_text() for t in panel.get_legend().get_texts()]


def test_a_pruned_runs_cross_is_at_the_decision_and_its_line_runs_to_where_it_stopped(
    tmp_path: Path,
) -> None:
    """results.csv's pruned_step (the report the pruner judged) and last_step (where the job
    stopped, its reports file's last line) are the cross and the end of the dotted line."""
    sweep_dir = make_sweep(tmp_path / "sweep", RUNS[:2])
    table = ResultsTable.load(sweep_dir)
    pruned = row(2, "pruned", "", "pruned at step 1 (reported 0.2), stopped at step 3", sweep_dir)
    table.put(
        pruned | {"last_step": 3, "last_value": 0.4, "pruned_step": 1},
        {"lr": "0.5", "model": "mlp"},
    )
    (sweep_dir / "2").mkdir()
    curve = [0.1, 0.2, 0.3, 0.4]
    lines = [json.dumps({"step": s, "value": v}) for s, v in enumerate(curve)]
    (sweep_dir / "2" / "reports.jsonl").write_text("\n".join(lines) + "\n")
    fig = build_figure(load_sweep(sweep_dir))
    (panel,) = [ax for ax in fig.axes if ax.get_title() == "learning curves"]
    (dotted,) = [line for line in panel.get_lines() if line.get_linestyle() == ":"]
    assert list(dotted.get_xdata()) == [1, 2, 3, 4]  # steps 0..3, shown as the log counts
    (cross,) = [line for line in panel.get_lines() if line.get_marker() == "x"]
    assert (list(cross.get_xdata()), list(cross.get_ydata())) == ([2], [0.2])


def test_no_learning_curve_panel_when_nothing_was_reported(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(make_sweep(tmp_path / "sweep")))
    assert "learning curves" not in [ax.get_title() for ax in fig.axes]


def test_the_best_value_is_written_on_the_parallel_panel_when_values_are_close(
    tmp_path: Path,
) -> None:
    """0.9815 against 0.9667..0.9796: the objective axis' rounded ticks (0.981) do not say the
    best value; a label at the best line's end does, over the tick labels."""
    runs = [(lr, "mlp", "completed", v, "") for lr, v in [("0.1", "0.9667"), ("0.2", "0.9796")]]
    runs += [("0.3", "cnn", "completed", "0.9815", ""), ("0.4", "cnn", "completed", "0.9741", "")]
    fig = build_figure(load_sweep(make_sweep(tmp_path / "sweep", runs)))
    (panel,) = [ax for ax in fig.axes if ax.get_title(loc="left") == "one line per run"]
    (label,) = [t for t in panel.texts if t.get_gid() == "best-label"]
    assert label.get_text() == "best 0.9815"
    assert label.xy == (2, 1.0)  # lr, model, then the objective's axis: its top
    assert label.get_zorder() > max(t.get_zorder() for t in panel.texts if t is not label)


def test_mode_says_which_way_the_objective_is_better(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep whose dir says nothing of its objective (no multirun.yaml, no .hydra/) ranks
    higher first; `--mode min` ranks a loss lowest first, and wins over the config too."""
    bare = make_sweep(tmp_path / "bare", RUNS, multirun=None)
    said = make_sweep(tmp_path / "said", RUNS)  # objective.mode: max
    for sweep_dir, argv, best in [
        (bare, [], "0.9500"),
        (bare, ["--mode", "min"], "0.7100"),
        (said, ["--mode", "min"], "0.7100"),
        (said, ["--mode", "max"], "0.9500"),
    ]:
        assert main([str(sweep_dir), *argv]) == 0
        assert ranked_objectives(capsys.readouterr().out)[0] == best, argv
