"""The report's 2-D panel: two numeric parameters against each other, each run a marker
coloured by its objective.

In a grid over more than two parameters several runs share each spot (lr x batch x model:
two models at every lr and batch); they are set side by side, and each value of a third
parameter gets its own marker shape, named in the legend.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hpsearch.report_axes import (
    MARKERS,
    SPREAD,
    Axis,
    Sweep,
    dodged,
    marker_axis,
    padded_limits,
    value_names,
)
from hpsearch.report_panels import FAILED, objective_colours, stars, style_numeric

PAD = 0.08  # room inside the frame beyond the outer runs, as a fraction of each axis


def draw_scatter(
    fig: Figure, ax: Axes, pair: tuple[Axis, Axis], axes: Sequence[Axis], sweep: Sweep
) -> None:
    """Parameter against parameter; `axes` (every parameter's) give the marker shapes."""
    x, y = pair
    cmap, norm = objective_colours(sweep)
    split = marker_axis(axes, pair)
    names, kinds = value_names(split) if split else ([""], [0] * len(sweep.rows))
    # Side by side in the order of the marker's values: the same shape on the same side.
    drawn = sorted([*sweep.finished, *sweep.failed], key=lambda i: (kinds[i], i))
    xs = dict(zip(drawn, dodged(x, y, drawn), strict=True))
    for kind in range(len(names)):
        rows = [i for i in sweep.finished if kinds[i] == kind]
        if rows:
            ax.scatter(
                [xs[i] for i in rows],
                [y.positions[i] for i in rows],
                c=[sweep.scores[i] for i in rows],
                cmap=cmap,
                norm=norm,
                marker=MARKERS[kind],
                s=60,
                edgecolors="0.3",
                linewidths=0.5,
                zorder=2,
                gid="runs",
            )
    best = sweep.best()
    stars(ax, [xs[i] for i in best], [y.positions[i] for i in best])
    if sweep.failed:
        ax.scatter(
            [xs[i] for i in sweep.failed],
            [y.positions[i] for i in sweep.failed],
            marker="x",
            s=45,
            linewidths=1.8,
            color=FAILED,
            label="failed",
            zorder=3,
        )
    style_numeric(ax, x, "x")
    style_numeric(ax, y, "y")
    ax.set_xlim(*padded_limits(x, PAD + SPREAD / 2))
    ax.set_ylim(*padded_limits(y, PAD))
    ax.set_ylabel(y.label)
    ax.grid(True, alpha=0.3, linestyle=":")
    ax.set_title(f"{x.label} \N{MULTIPLICATION SIGN} {y.label}", fontsize="medium")
    if split is not None:
        _marker_legend(ax, split.label, names)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=sweep.metric, pad=0.01)


def _marker_legend(ax: Axes, label: str, names: Sequence[str]) -> None:
    handles = [
        Line2D(
            [],
            [],
            marker=MARKERS[k],
            linestyle="",
            color="0.6",
            markeredgecolor="0.3",
            label=f"{label}={name}",
        )
        for k, name in enumerate(names)
    ]
    ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.85)
