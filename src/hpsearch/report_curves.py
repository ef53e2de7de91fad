"""The learning-curve panel of a sweep's report: one line per run that reported its objective
(`hpsearch_launcher.report`, once an epoch), coloured by where it ended; pruned runs grey and
dotted to the step they stopped at, a cross at the step the pruner decided on (results.csv's
`pruned_step`; a job goes on a little after the decision)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from hpsearch.report_axes import Sweep
from hpsearch.report_panels import PRUNED_COLOUR, objective_colours
from hpsearch_launcher.results import PRUNED_STEP, read_curve


def load_curves(sweep_dir: Path, rows: list[dict[str, str]]) -> dict[int, list[tuple[int, float]]]:
    """Each row's reported curve, by row index (rows that reported nothing are left out). A
    relative run_dir is relative to where the sweep ran: found again under the sweep dir."""
    curves = {}
    for i, row in enumerate(rows):
        run_dir = Path(row.get("run_dir", ""))
        if not run_dir.is_absolute() and not run_dir.exists():
            run_dir = sweep_dir / run_dir.name
        curve = read_curve(run_dir) if row.get("run_dir") else []
        if curve:
            curves[i] = curve
    return curves


def decision(row: dict[str, str], curve: list[tuple[int, float]]) -> tuple[int, float]:
    """Where on its curve a pruned run was judged hopeless: its row's `pruned_step` (the
    curve's last point for a sweep that recorded none)."""
    try:
        step = int(float(row.get(PRUNED_STEP, "")))
    except ValueError:
        return curve[-1]
    return next(((s, v) for s, v in curve if s == step), curve[-1])


def draw_curves(ax: Axes, sweep: Sweep) -> None:
    cmap, norm = objective_colours(sweep)
    pruned = set(sweep.pruned)
    for i, curve in sweep.curves.items():
        steps, values = zip(*curve, strict=True)
        if i in pruned:
            ax.plot(steps, values, color=PRUNED_COLOUR, linestyle=":", linewidth=1, alpha=0.8)
            at = decision(sweep.rows[i], curve)
            ax.plot(*at, "x", color=PRUNED_COLOUR, markersize=5)
        elif i in sweep.finished:
            ax.plot(steps, values, color=cmap(norm(sweep.scores[i])), linewidth=1.2, alpha=0.9)
        else:  # failed: its curve up to where it died
            ax.plot(steps, values, color="tab:red", linestyle="--", linewidth=1, alpha=0.7)
    ax.set_xlabel("step (report)")
    ax.set_ylabel(f"reported {sweep.metric}")
    ax.set_title("learning curves", fontsize="medium")
    shown = [i for i in sweep.curves if i in pruned]
    if shown:
        handles = [
            Line2D([], [], color="0.2", linewidth=1.2, label="ran to the end"),
            Line2D(
                [],
                [],
                color=PRUNED_COLOUR,
                linestyle=":",
                marker="x",
                label=f"pruned ({len(shown)}), x: the decision",
            ),
        ]
        ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.85)
