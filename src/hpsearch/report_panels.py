"""The report's panels, drawn onto given matplotlib axes from what `report_axes` computed.

- (parallel coordinates of every run are in `report_parallel`);
- (the 2-D scatter of two numeric parameters is in `report_scatter`);
- a marginal panel per parameter: the objective against its values, failures as red crosses;
- what the panels share: the objective's colours, the best runs' stars, numeric axis styling.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Colormap, Normalize
from matplotlib.ticker import NullFormatter

from hpsearch.report_axes import Axis, Sweep, robust_bounds

JITTER = 0.08  # half-width of the horizontal jitter on categorical axes, in category units
FAILED = "tab:red"
PRUNED_COLOUR = "0.45"  # grey: stopped early by the pruner, not a failure
MAX_LISTED_FAILURES = 8  # the all-failed figure lists this many reasons, then counts the rest


def objective_colours(sweep: Sweep) -> tuple[Colormap, Normalize]:
    """Better is yellow whichever way the objective points. The scale spans the runs but those
    far worse than the rest: one diverged run takes the scale's end colour instead of making
    every other run the same colour."""
    low, high = robust_bounds([sweep.scores[i] for i in sweep.finished], sweep.mode)
    pad = 0 if high > low else max(abs(high) * 0.01, 1e-6)
    cmap = colormaps["viridis" if sweep.mode == "max" else "viridis_r"]
    return cmap, Normalize(low - pad, high + pad)


def draw_marginal(ax: Axes, x: Axis, sweep: Sweep, ylim: tuple[float, float]) -> None:
    """The objective against one parameter's values."""
    rng = np.random.default_rng(0)  # fixed seed: the same sweep always gives the same picture
    positions = list(x.positions)
    if x.categories:
        jitter = rng.uniform(-JITTER, JITTER, len(positions))
        positions = [p + float(j) for p, j in zip(positions, jitter, strict=True)]
    done = [i for i in sweep.finished if ylim[0] <= sweep.scores[i] <= ylim[1]]
    _draw_beyond(ax, [(positions[i], sweep.scores[i]) for i in sweep.finished], ylim)
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
    """Room above the data for the best run's label and below it for the failure markers;
    the data: the runs but those far worse than the rest (robust_bounds), which are drawn at
    the edge instead of squashing the others."""
    low, high = robust_bounds([sweep.scores[i] for i in sweep.finished], sweep.mode)
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


def _draw_beyond(ax: Axes, points: list[tuple[float, float]], ylim: tuple[float, float]) -> None:
    """Runs whose objective lies beyond the y range: a triangle at the edge they are past,
    pointing their way, and a note of how many."""
    below = [x for x, y in points if y < ylim[0]]
    above = [x for x, y in points if y > ylim[1]]
    for xs, edge, marker in ((below, ylim[0], "v"), (above, ylim[1], "^")):
        if xs:
            ax.scatter(xs, [edge] * len(xs), marker=marker, s=40, color="tab:blue", clip_on=False)
    if below or above:
        clip_note(ax, f"{len(below) + len(above)} run(s) beyond the y axis, at its edge", "top")


def clip_note(ax: Axes, text: str, where: str) -> None:
    """A small note in the panel's right corner (`where`: top or bottom): what it left out."""
    y = 0.99 if where == "top" else 0.02
    ax.text(
        0.99, y, text, transform=ax.transAxes, ha="right", va=where, fontsize="x-small", color="0.3"
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
