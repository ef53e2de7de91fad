"""The report's parallel-coordinates panel: one line per run over every swept parameter and the
objective, coloured by objective, the best run(s) outlined, failed runs dashed red (pruned ones
dotted grey) and stopping before the objective axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from matplotlib import patheffects as pe
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hpsearch.report_axes import Axis, Sweep, numeric_axis, parallel_lines, robust_bounds
from hpsearch.report_panels import FAILED, PRUNED_COLOUR, objective_colours


def objective_axis(sweep: Sweep) -> Axis:
    """The objective's axis over the runs but those far worse than the rest (robust_bounds):
    their lines end at the axis' worse end, and its name says it is clipped."""
    done = [sweep.scores[i] for i in sweep.finished]
    low, high = robust_bounds(done, sweep.mode) if done else (0.0, 0.0)
    kept = [s if math.isnan(s) else min(max(s, low), high) for s in sweep.scores]
    clipped = any(not low <= s <= high for s in done)
    label = f"{sweep.metric} (clipped)" if clipped else sweep.metric
    return numeric_axis(label, kept, allow_log=False)


def draw_parallel(fig: Figure, ax: Axes, params: Sequence[Axis], sweep: Sweep) -> None:
    axes = [*params, objective_axis(sweep)]
    cmap, norm = objective_colours(sweep)
    # Better runs drawn last, on top of the worse ones they cross.
    order = sorted(sweep.finished, key=lambda i: sweep.scores[i], reverse=sweep.mode == "min")
    runs = LineCollection(parallel_lines(axes, order), cmap=cmap, norm=norm, linewidths=1.4)
    runs.set_array(np.array([sweep.scores[i] for i in order], dtype=float))
    runs.set_gid("finished")
    ax.add_collection(runs)
    best_rows = sweep.best()
    for row, line in zip(best_rows, parallel_lines(axes, best_rows), strict=True):
        xs, ys = zip(*line, strict=True)
        colour = cmap(norm(sweep.scores[row]))
        ax.plot(
            xs,
            ys,
            color=colour,
            linewidth=2.6,
            gid="best",
            zorder=3,
            path_effects=[pe.withStroke(linewidth=5, foreground="black")],
        )
    if best_rows:
        _label_best_end(ax, axes[-1], len(axes) - 1, best_rows, sweep)
    outline = [pe.withStroke(linewidth=5, foreground="black")]
    handles = [Line2D([], [], color="gold", linewidth=2.6, path_effects=outline, label="best")]
    if sweep.failed:
        handles.append(_unscored(ax, axes, sweep.failed, "failed", FAILED, "--"))
    if sweep.pruned:
        handles.append(_unscored(ax, axes, sweep.pruned, "pruned", PRUNED_COLOUR, ":"))
    _style_parallel(ax, axes)
    ax.legend(
        handles=handles,
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=2,
        fontsize="small",
        frameon=False,
    )
    ax.set_title("one line per run", loc="left", fontsize="medium")
    fig.colorbar(runs, ax=ax, label=sweep.metric, pad=0.01, fraction=0.03)


def _label_best_end(ax: Axes, axis: Axis, x: float, rows: list[int], sweep: Sweep) -> None:
    """The best value, written where the best line meets the objective's axis, on the side
    of the headroom and over everything: with close values the axis' rounded tick labels
    neither say it nor leave its line end visible."""
    score = sweep.scores[rows[0]]
    ties = f" ({len(rows)} runs)" if len(rows) > 1 else ""
    up = sweep.mode == "max"
    ax.annotate(
        f"best {score:.4g}{ties}",
        (x, axis.unit(axis.positions[rows[0]])),
        xytext=(-6, 9 if up else -9),
        textcoords="offset points",
        ha="right",
        va="bottom" if up else "top",
        fontsize="small",
        fontweight="bold",
        zorder=6,
        gid="best-label",
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
    )


def _unscored(
    ax: Axes,
    axes: Sequence[Axis],
    rows: list[int],
    name: str,
    colour: str,
    style: Literal["--", ":"],
) -> Line2D:
    """Lines of runs without an objective (they stop before its axis); their legend entry."""
    label = f"{name} ({len(rows)})"
    lines = LineCollection(
        parallel_lines(axes, rows),
        colors=colour,
        linestyles=style,
        linewidths=1.2,
        alpha=0.7,
        gid=name,
        label=label,
    )
    ax.add_collection(lines)
    return Line2D([], [], color=colour, linestyle=style, label=label)


def _style_parallel(ax: Axes, axes: Sequence[Axis]) -> None:
    """A vertical line per axis with its tick labels beside it; no y axis of its own."""
    for i, axis in enumerate(axes):
        ax.axvline(i, color="0.25", linewidth=1, zorder=1)
        for tick, label in zip(axis.ticks, axis.tick_labels, strict=True):
            ax.text(
                i - 0.03,
                axis.unit(tick),
                label,
                ha="right",
                va="center",
                fontsize="small",
                zorder=5,
                # Opaque, over the lines: a run's line (the best one's, thick) ends at its own
                # value's label, and would cross it out.
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
            )
    names = [f"{a.label}\n(log)" if a.log else a.label for a in axes]
    ax.set_xticks(range(len(axes)), names)
    ax.set_xlim(-0.4, len(axes) - 0.85)
    ax.set_ylim(-0.05, 1.05)
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.tick_params(axis="x", length=0)
