"""report.png's learning curves and colours (issue 46, item 3; issue 49's rungs): one diverged
run neither flattens the other curves nor takes the colour scale, the plot says it clipped;
steps are whole numbers, shown from 1 as the job's log counts epochs; where the pruner stopped
runs is marked."""

from __future__ import annotations

import json
from pathlib import Path

from matplotlib.axes import Axes
from test_report import make_sweep, row

from hpsearch.report import build_figure, load_sweep
from hpsearch.report_axes import robust_bounds
from hpsearch.report_panels import objective_colours
from hpsearch_launcher.results import ResultsTable

LOSS = "objective:\n  metric: val_loss\n  mode: min\n"


def sweep_of(
    tmp_path: Path,
    curves: list[list[float]],
    statuses: list[str] | None = None,
    first_step: int = 0,
    pruned_steps: dict[int, int] | None = None,
) -> Path:
    """A sweep dir whose job N reported curves[N] (steps from `first_step`) and ended so."""
    statuses = statuses or ["completed"] * len(curves)
    sweep_dir = make_sweep(tmp_path / "sweep", [], multirun=LOSS)
    table = ResultsTable.load(sweep_dir)
    for job, (curve, status) in enumerate(zip(curves, statuses, strict=True)):
        done = status == "completed"
        cells = row(job, status, str(curve[-1]) if done else "", "", sweep_dir)
        if job in (pruned_steps or {}):
            cells |= {"pruned_step": pruned_steps[job] + first_step}  # type: ignore[index]
        table.put(cells, {"lr": str(job), "model": "mlp"})
        (sweep_dir / str(job)).mkdir()
        lines = [json.dumps({"step": first_step + s, "value": v}) for s, v in enumerate(curve)]
        (sweep_dir / str(job) / "reports.jsonl").write_text("\n".join(lines) + "\n")
    table.flush(force=True)
    return sweep_dir


def curves_panel(sweep_dir: Path) -> Axes:
    fig = build_figure(load_sweep(sweep_dir))
    (panel,) = [ax for ax in fig.axes if ax.get_title() == "learning curves"]
    fig.canvas.draw()  # the tick locators run
    return panel


def good_losses(n: int = 8) -> list[list[float]]:
    return [[2.3 - 0.1 * k, 1.0 - 0.05 * k, 0.5 - 0.02 * k] for k in range(n)]


def notes(panel: Axes) -> list[str]:
    return [t.get_text() for t in panel.texts if "clipped" in t.get_text()]


def test_one_diverged_run_does_not_flatten_the_other_curves_and_the_plot_says_so(
    tmp_path: Path,
) -> None:
    panel = curves_panel(sweep_of(tmp_path, [*good_losses(), [2.3, 40.0, 1e6]]))
    bottom, top = panel.get_ylim()
    assert top < 3 and bottom > 0.2  # the good runs' range: 0.36..2.3, a margin around it
    assert notes(panel) == [
        "y axis clipped: 1 run(s) go beyond it (a diverged run would flatten the rest)"
    ]


def test_curves_that_all_fit_are_not_clipped(tmp_path: Path) -> None:
    panel = curves_panel(sweep_of(tmp_path, good_losses()))
    bottom, top = panel.get_ylim()
    assert bottom < 0.36 and top > 2.3 and notes(panel) == []


def test_one_diverged_run_does_not_take_the_colour_scale(tmp_path: Path) -> None:
    """Eight runs at 0.95..0.98 and one at 0.10: the scale spans the eight (they get eight
    colours), the diverged run its end colour."""
    runs = [("0.01", "mlp", "completed", str(0.95 + 0.004 * k), "") for k in range(8)]
    sweep = load_sweep(
        make_sweep(tmp_path / "sweep", [*runs, ("1", "mlp", "completed", "0.1", "")])
    )
    _, norm = objective_colours(sweep)
    assert 0.9 < norm.vmin <= 0.95 and 0.978 <= norm.vmax < 0.99


def test_robust_bounds_leave_out_only_runs_far_worse_than_the_rest() -> None:
    assert robust_bounds([0.95, 0.96, 0.97, 0.98, 0.1], "max") == (0.95, 0.98)
    assert robust_bounds([0.3, 0.31, 0.32, 0.33, 1e6], "min") == (0.3, 0.33)
    # Far better than the rest: the run to see, kept.
    assert robust_bounds([0.1, 0.11, 0.12, 0.13, 0.95], "max") == (0.1, 0.95)
    assert robust_bounds([1.0, 2.0, 3.0, 4.0, 5.0], "min") == (1.0, 5.0)
    assert robust_bounds([0.9, 0.1, 0.5], "max") == (0.1, 0.9)  # too few to call any an outlier


def test_steps_are_whole_numbers_counted_from_1_as_the_log_counts_epochs(tmp_path: Path) -> None:
    """report() counts steps from 0 (Keras' epoch index too) while the job's log says `epoch
    1/20`: the first report is drawn at 1; ticks fall on whole steps only (3 reports made
    matplotlib write 0.5, 1.5, ...)."""
    panel = curves_panel(sweep_of(tmp_path, good_losses(2)))
    line = panel.get_lines()[0]
    assert list(line.get_xdata()) == [1, 2, 3]
    assert panel.get_xlabel() == "epoch (report, from 1 as the log counts)"
    ticks = [t for t in panel.get_xticks() if panel.get_xlim()[0] <= t <= panel.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_an_apps_own_step_numbers_are_drawn_as_they_are(tmp_path: Path) -> None:
    panel = curves_panel(sweep_of(tmp_path, good_losses(2), first_step=100))
    assert list(panel.get_lines()[0].get_xdata()) == [100, 101, 102]
    assert panel.get_xlabel() == "step (report)"


def test_the_rungs_where_the_pruner_stopped_runs_are_marked_with_how_many(tmp_path: Path) -> None:
    """Three runs pruned: two judged at step 0 (the first report), one at step 1: a line at
    each (drawn at 1 and 2, as the log counts), with how many it stopped there."""
    curves = [*good_losses(3), [2.5, 2.4], [2.6, 2.5], [2.4, 1.9, 1.8]]
    statuses = ["completed"] * 3 + ["pruned"] * 3
    sweep_dir = sweep_of(tmp_path, curves, statuses, pruned_steps={3: 0, 4: 0, 5: 1})
    panel = curves_panel(sweep_dir)
    rungs = [line for line in panel.get_lines() if line.get_gid() == "rung"]
    assert sorted(line.get_xdata()[0] for line in rungs) == [1, 2]
    assert sorted(t.get_text() for t in panel.texts if "pruned" in t.get_text()) == [
        "1 pruned",
        "2 pruned",
    ]


def test_a_diverged_run_is_drawn_at_the_edge_of_the_objective_panels(tmp_path: Path) -> None:
    """Accuracy 0.10 beside eight runs at 0.95..0.98: the marginal panels span the eight, the
    diverged run a triangle at the bottom edge with a note; the parallel panel's objective
    axis says it is clipped."""
    runs = [(str(k), "mlp", "completed", str(0.95 + 0.004 * k), "") for k in range(8)]
    sweep = load_sweep(
        make_sweep(tmp_path / "sweep", [*runs, ("8", "mlp", "completed", "0.1", "")])
    )
    fig = build_figure(sweep)
    marginal = next(ax for ax in fig.axes if ax.get_xlabel() == "lr")
    assert marginal.get_ylim()[0] > 0.9
    assert [t.get_text() for t in marginal.texts if "beyond" in t.get_text()] == [
        "1 run(s) beyond the y axis, at its edge"
    ]
    assert "val_accuracy (clipped)" in [t.get_text() for ax in fig.axes for t in ax.texts] + [
        label.get_text() for ax in fig.axes for label in ax.get_xticklabels()
    ]
