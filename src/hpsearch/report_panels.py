"""The report's panels, drawn onto given matplotlib axes from what `report_axes` computed.

- parallel coordinates: one line per run over every swept parameter and the objective, coloured
  by objective, the best run(s) outlined, failed runs dashed red (pruned ones dotted grey)
  and stopping before the objective axis;
- (the 2-D scatter of two numeric parameters is in `report_scatter`);
- a marginal panel per parameter: the objective against its values, failures as red crosses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
from matplotlib import colormaps
from matplotlib import patheffects as pe
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from hpsearch.report_axes import Axis, Sweep, numeric_axis, parallel_lines

JITTER = 0.08  # half-width of the horizontal jitter on categorical axes, in category units
FAILED = "tab:red"
PRUNED_COLOUR = "0.45"  # grey: stopped early by the pruner, not a failure
MAX_LISTED_FAILURES = 8  # the all-failed figure lists this many reasons, then counts the rest


def objective_colours(sweep: Sweep) -> tuple[Colormap, Normalize]:
    """Better is yellow whichever way the objective points."""
    done = [sweep.scores[i] for i in sweep.finished]
    low, high = min(done), max(done)
    pad = 0 if high > low else max(abs(high) * 0.01, 1e-6)
    cmap = colormaps["viridis" if sweep.mode == "max" else "viridis_r"]
    return cmap, Normalize(low - pad, high + pad)


def objective_axis(sweep: Sweep) -> Axis:
    return numeric_axis(sweep.metric, sweep.scores, allow_log=False)


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


def draw_marginal(ax: Axes, x: Axis, sweep: Sweep, ylim: tuple[float, float]) -> None:
    """The objective against one parameter's values."""
    rng = np.random.default_rng(0)  # fixed seed: the same sweep always gives the same picture
    positions = list(x.positions)
    if x.categories:
        jitter = rng.uniform(-JITTER, JITTER, len(positions))
        positions = [p + float(j) for p, j in zip(positions, jitter, strict=True)]
    done = sweep.finished
    ax.scatter(
        [positions[i] for i in done],
        [sweep.scores[i] for i in done],
        s=36,
        alpha=0.75,
        color="tab:blue",
        edgecolors="white",
        linewidths=0.5,
        label="runs",
        zorder=2,
    )
    if sweep.failed:
        _draw_failures(ax, x, [positions[i] for i in sweep.failed], ylim[0])
    ax.set_ylim(*ylim)
    if x.categories:
        ax.set_xticks(x.ticks, x.tick_labels)
        ax.set_xlim(-0.5, len(x.categories) - 0.5)
    else:
        style_numeric(ax, x, "x")
    _rotate_if_crowded(ax, x.tick_labels)
    ax.set_xlabel(x.label)
    ax.grid(True, alpha=0.3, linestyle=":")
    best = sweep.best()
    stars(ax, [positions[i] for i in best], [sweep.scores[i] for i in best])
    _label_best(ax, positions[best[0]], sweep.scores[best[0]], len(best), sweep.mode)


def y_limits(sweep: Sweep) -> tuple[float, float]:
    """Room above the data for the best run's label and below it for the failure markers."""
    values = [sweep.scores[i] for i in sweep.finished]
    low, high = min(values), max(values)
    span = high - low or max(abs(high) * 0.1, 0.1)
    return (low - 0.22 * span, high + 0.18 * span)


def stars(ax: Axes, xs: list[float], ys: list[float]) -> None:
    """The best runs' stars, unclipped: one at the frame's edge is drawn whole."""
    ax.scatter(
        xs,
        ys,
        marker="*",
        s=260,
        color="gold",
        edgecolors="black",
        linewidths=0.8,
        label="best",
        clip_on=False,
        zorder=4,
    )


def _draw_failures(ax: Axes, x: Axis, xs: list[float], bottom: float) -> None:
    """Red crosses at the axis minimum, unclipped: a failure has no objective, only a place on x."""
    ax.scatter(
        xs,
        [bottom] * len(xs),
        marker="x",
        s=45,
        linewidths=1.8,
        color=FAILED,
        label="failed",
        clip_on=False,
        zorder=3,
    )
    # Crosses at one x value (or in one category, despite the jitter) hide each other: count them.
    spots = Counter(round(p) if x.categories else p for p in xs)
    for position, count in spots.items():
        if count > 1:
            ax.annotate(
                f"\N{MULTIPLICATION SIGN}{count}",
                (position, bottom),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                color=FAILED,
                fontsize="small",
                fontweight="bold",
            )


def _label_best(ax: Axes, x: float, y: float, ties: int, mode: str) -> None:
    # The label goes toward the headroom (above the star when higher is better), and is aligned
    # inward near either side of the frame, where centred text would run past it.
    ax.get_xlim()  # settles autoscaling, so the transforms below see the final limits
    fraction = ax.transAxes.inverted().transform(ax.transData.transform((x, y)))[0]
    ha = "left" if fraction < 0.15 else "right" if fraction > 0.85 else "center"
    dx = {"left": -6, "right": 6, "center": 0}[ha]
    text = f"best {y:.4g}" + (f" ({ties} runs)" if ties > 1 else "")
    ax.annotate(
        text,
        (x, y),
        xytext=(dx, 10) if mode == "max" else (dx, -12),
        textcoords="offset points",
        ha=ha,
        va="bottom" if mode == "max" else "top",
        fontsize="small",
        fontweight="bold",
    )


def style_numeric(ax: Axes, axis: Axis, which: str) -> None:
    """The axis' own ticks and short labels; matplotlib's minor labels would crowd them."""
    scale = ax.set_xscale if which == "x" else ax.set_yscale
    ticks = ax.set_xticks if which == "x" else ax.set_yticks
    lim = ax.set_xlim if which == "x" else ax.set_ylim
    target = ax.xaxis if which == "x" else ax.yaxis
    if axis.log:
        scale("log")
    ticks(axis.ticks, axis.tick_labels)
    target.set_minor_formatter(NullFormatter())
    if axis.distinct == 1:
        lim(axis.ticks[0] - 1, axis.ticks[0] + 1)
    if which == "x":
        ax.set_xlabel(axis.label)


def _rotate_if_crowded(ax: Axes, labels: Sequence[str]) -> None:
    # About 36 characters of tick labels fit side by side under a 4.5-inch panel.
    if sum(len(label) + 2 for label in labels) > 36:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def draw_no_finished(ax: Axes, sweep: Sweep) -> None:
    """Instead of panels with nothing on them: say so, and list why the runs failed."""
    ax.set_axis_off()
    pruned = f", {len(sweep.pruned)} pruned" if sweep.pruned else ""
    headline = f"no finished run: {len(sweep.failed)} failed{pruned}"
    ax.text(0.5, 1.0, headline, ha="center", va="top", fontsize="x-large", color=FAILED)
    reasons = []
    for i in sweep.failed[:MAX_LISTED_FAILURES]:
        row = sweep.rows[i]
        setting = ",".join(f"{p}={row.get(p, '')}" for p in sweep.params)
        reason = row.get("error", "") or "no reason recorded"
        line = f"job {row.get('job', i)} {row.get('status', '?')} {setting}: {reason}"
        reasons.append(line if len(line) <= 100 else line[:99] + "\N{HORIZONTAL ELLIPSIS}")
    if len(sweep.failed) > MAX_LISTED_FAILURES:
        reasons.append(f"... and {len(sweep.failed) - MAX_LISTED_FAILURES} more")
    ax.annotate(
        "\n".join(reasons),
        (0.0, 1.0),
        xytext=(0, -32),
        textcoords="offset points",
        va="top",
        fontsize="small",
        family="monospace",
    )
