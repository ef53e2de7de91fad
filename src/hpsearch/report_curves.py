"""The learning-curve panel of a sweep's report: one line per run that reported its objective
(`hpsearch_launcher.report`, once an epoch), coloured by where it ended; pruned runs grey and
dotted, a cross where the pruner stopped them."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from hpsearch.report_axes import Sweep
from hpsearch.report_panels import PRUNED_COLOUR, objective_colours
from hpsearch_launcher.results import read_curve


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


def draw_curves(ax: Axes, sweep: Sweep) -> None:
    cmap, norm = objective_colours(sweep)
    pruned = set(sweep.pruned)
    for i, curve in sweep.curves.items():
        steps, values = zip(*curve, strict=True)
        if i in pruned:
            ax.plot(steps, values, color=PRUNED_COLOUR, linestyle=":", linewidth=1, alpha=0.8)
            ax.plot(steps[-1], values[-1], "x", color=PRUNED_COLOUR, markersize=5)
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
                label=f"pruned ({len(shown)})",
            ),
        ]
        ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.85)
