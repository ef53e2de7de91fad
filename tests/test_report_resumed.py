"""The report of a real-shaped sweep: a resumed 12-job grid of lr x batch x model, and an
Optuna sweep without multirun.yaml. What a new user reads must agree with the leaderboard."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from hpsearch.report import build_figure, load_sweep, main
from hpsearch_launcher.results import ResultsTable, leaderboard

LRS, BATCHES, MODELS = ("0.001", "0.01", "0.1"), ("32", "128"), ("mlp", "cnn")
MULTIRUN = {
    "objective": {"metric": "val_accuracy", "mode": "max"},
    "hydra": {
        "callbacks": {"summary": {"mode": "${objective.mode}", "columns": ["test_accuracy"]}}
    },
}


def grid_sweep(sweep_dir: Path, superseded: int = 0, multirun: dict | None = None) -> Path:
    """The 12-job grid, run twice: the first run's last `superseded` jobs were interrupted and
    run again by the second run (rows `superseded`, then `completed` with higher job numbers)."""
    sweep_dir.mkdir(parents=True)
    (sweep_dir / "multirun.yaml").write_text(yaml.safe_dump(multirun or MULTIRUN))
    table = ResultsTable(sweep_dir / "results.csv")
    grid = list(itertools.product(LRS, BATCHES, MODELS))
    for job, (lr, batch, model) in enumerate(grid):
        score = 0.5 + 0.01 * job
        table.put(
            {
                "job": job,
                "status": "completed",
                "objective": score,
                "val_accuracy": score,
                "test_accuracy": score - 0.05,
                "wall_time_s": 10.0,
                "run_dir": str(sweep_dir / f"{job}"),
                "config_hash": f"h{job}",
                "error": "",
            },
            {"lr": lr, "batch": batch, "model": model},
        )
    for k in range(superseded):
        params = dict(zip(("lr", "batch", "model"), grid[k], strict=True))
        cells = {"status": "superseded", "objective": "", "val_accuracy": "", "test_accuracy": ""}
        table.put(
            {
                "job": 100 + k,
                "wall_time_s": 3.0,
                "run_dir": str(sweep_dir / f"old{k}"),
                "config_hash": f"h{k}",
                "error": "interrupted by SIGINT",
            }
            | cells,
            params,
        )
    return sweep_dir


def test_superseded_rows_are_history_not_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = load_sweep(grid_sweep(tmp_path / "sweep", superseded=2))
    fig = build_figure(sweep)

    assert fig.get_suptitle().startswith("sweep: 12 runs, best val_accuracy=0.61")
    assert "2 superseded" in fig.get_suptitle()  # said, apart from the runs
    assert not [c for ax in fig.axes for c in ax.collections if c.get_gid() == "failed"]
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]
    assert not [label for label in labels if label.startswith("failed")]
    assert not [c for ax in fig.axes for c in ax.collections if c.get_label() == "failed"]
    # The printed leaderboard agrees: nothing failed.
    assert main([str(tmp_path / "sweep")]) == 0
    assert "12 finished, 0 failed or unfinished" in capsys.readouterr().out


def label_boxes(fig: Figure) -> list[tuple[str, tuple[float, float, float, float]]]:
    """Every visible y-axis label: its text and its box in pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = []
    for ax in fig.axes:
        label = ax.yaxis.label
        if label.get_visible() and label.get_text():
            box = label.get_window_extent(renderer)
            boxes.append((label.get_text(), (box.x0, box.y0, box.x1, box.y1)))
    return boxes


def test_no_label_reads_twice_side_by_side(tmp_path: Path) -> None:
    """The scatter's colour-bar label and the next panel's axis label read 'val_accuracy
    val_accuracy' when the two sit next to each other."""
    fig = build_figure(load_sweep(grid_sweep(tmp_path / "sweep")))

    boxes = label_boxes(fig)
    for (text, a), (other, b) in itertools.permutations(boxes, 2):
        same_row = a[1] < b[3] and b[1] < a[3]
        gap = b[0] - a[2]  # from a's right edge to b's left edge
        assert not (text == other and same_row and 0 <= gap < 120), (text, a, b)


def test_best_line_passes_under_the_tick_labels(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(grid_sweep(tmp_path / "sweep")))
    (parallel,) = [ax for ax in fig.axes if any(ln.get_gid() == "best" for ln in ax.lines)]

    top_line = max(ln.get_zorder() for ln in parallel.lines)
    ticks = [t for t in parallel.texts if t.get_bbox_patch() is not None]
    assert ticks
    for text in ticks:
        patch = text.get_bbox_patch()
        assert patch is not None
        assert text.get_zorder() > top_line
        assert patch.get_alpha() in (None, 1.0) and patch.get_facecolor()[3] == 1.0


def test_stars_are_not_clipped_at_the_axis_limits(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(grid_sweep(tmp_path / "sweep")))

    stars = [c for ax in fig.axes for c in ax.collections if c.get_label() == "best"]
    assert len(stars) == 4  # the 2-D panel and one per parameter
    assert not [c for c in stars if c.get_clip_on()]
    (scatter,) = [ax for ax in fig.axes if "\N{MULTIPLICATION SIGN}" in ax.get_title()]
    # lr against batch: the runs at either end of each sit inside the frame, not on it.
    (left, right), (bottom, top) = scatter.get_xlim(), scatter.get_ylim()
    assert left < 0.001 * 0.8 and right > 0.1 * 1.25
    assert bottom < 32 - 5 and top > 128 + 5


def scatter_panel_points(fig: Figure) -> list[tuple[float, float]]:
    (scatter,) = [ax for ax in fig.axes if "\N{MULTIPLICATION SIGN}" in ax.get_title()]
    runs = [c for c in scatter.collections if c.get_gid() == "runs"]
    assert all(isinstance(c, PathCollection) for c in runs)
    return [(float(x), float(y)) for c in runs for x, y in c.get_offsets()]


def test_the_2d_panel_shows_every_run_of_a_three_param_grid(tmp_path: Path) -> None:
    fig = build_figure(load_sweep(grid_sweep(tmp_path / "sweep")))

    points = scatter_panel_points(fig)
    assert len(points) == 12 and len(set(points)) == 12  # runs differing only in model
    (scatter,) = [ax for ax in fig.axes if "\N{MULTIPLICATION SIGN}" in ax.get_title()]
    runs = [c for c in scatter.collections if c.get_gid() == "runs"]
    assert len(runs) == 2  # one marker shape per model
    assert len({id(c.get_paths()[0]) for c in runs}) == 2
    legend = scatter.get_legend()
    assert legend is not None
    assert {"model=cnn", "model=mlp"} <= {t.get_text() for t in legend.get_texts()}


def optuna_sweep(sweep_dir: Path) -> Path:
    """Optuna writes no multirun.yaml: the objective's name and mode are in each run dir."""
    grid_sweep(sweep_dir)
    (sweep_dir / "multirun.yaml").unlink()
    for job in range(12):
        hydra_dir = sweep_dir / f"{job}" / ".hydra"
        hydra_dir.mkdir(parents=True)
        (hydra_dir / "config.yaml").write_text(
            yaml.safe_dump({"objective": {"metric": "val_loss", "mode": "min"}})
        )
        (hydra_dir / "hydra.yaml").write_text(yaml.safe_dump({"hydra": MULTIRUN["hydra"]}))
    return sweep_dir


def test_an_optuna_report_names_its_objective_as_a_grid_one_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = load_sweep(optuna_sweep(tmp_path / "optuna"))

    assert (sweep.metric, sweep.mode) == ("val_loss", "min")
    assert build_figure(sweep).get_suptitle().startswith("optuna: 12 runs, best val_loss=0.5")
    assert main([str(tmp_path / "optuna")]) == 0
    out = capsys.readouterr().out
    assert "Leaderboard (min val_loss)" in out and "test_accuracy" in out


def test_the_reports_leaderboard_is_the_end_of_sweep_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_dir = grid_sweep(tmp_path / "sweep")

    assert main([str(sweep_dir)]) == 0

    out = capsys.readouterr().out
    table = ResultsTable.load(sweep_dir)
    end_of_sweep = leaderboard(
        list(table.rows.values()),
        table.params,
        "max",
        columns=["test_accuracy"],
        metric="val_accuracy",
    )
    assert out.startswith(end_of_sweep + "\n")
    header = out.splitlines()[1].split()
    assert header[:6] == ["rank", "val_accuracy", "lr", "batch", "model", "test_accuracy"]


@pytest.mark.parametrize(("top", "more"), [(10, "2 more"), (12, None), (3, "9 more")])
def test_a_cut_leaderboard_says_how_many_more(tmp_path: Path, top: int, more: str | None) -> None:
    table = ResultsTable.load(grid_sweep(tmp_path / "sweep"))

    text = leaderboard(list(table.rows.values()), table.params, "max", top=top)

    ranks = [ln for ln in text.splitlines() if ln.split()[0].isdigit()]
    assert len(ranks) == min(top, 12)
    tail = [ln for ln in text.splitlines() if "more" in ln]
    assert tail == ([] if more is None else [f"  \N{HORIZONTAL ELLIPSIS} {more} finished runs"])


def test_pruned_runs_are_drawn_apart_not_as_failures(tmp_path: Path) -> None:
    """The leaderboard says `N pruned, 0 failed`: a run the pruner stopped early did not fail."""
    sweep_dir = grid_sweep(tmp_path / "sweep")
    table = ResultsTable.load(sweep_dir)
    for job in (9, 10, 11):
        row = table.rows[job] | {"status": "pruned", "objective": "", "last_value": "0.2"}
        table.put(row, {p: row[p] for p in table.params})
    sweep = load_sweep(sweep_dir)
    fig = build_figure(sweep)

    assert sweep.failed == [] and len(sweep.pruned) == 3
    assert fig.get_suptitle().startswith("sweep: 12 runs (3 pruned), best val_accuracy=0.58")
    assert not [c for ax in fig.axes for c in ax.collections if c.get_label() == "failed"]
    (pruned,) = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "pruned"]
    assert len(pruned.get_segments()) == 3
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]
    assert "pruned (3)" in labels and not [x for x in labels if x.startswith("failed")]
