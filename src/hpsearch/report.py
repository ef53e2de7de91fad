"""A sweep's report from disk: the leaderboard, and a figure of how the objective depends on
the hyperparameters, alone and together.

Usage:
    python -m hpsearch.report [SWEEP_DIR | latest] [--top N] [--mode max|min] [--plot PATH]

SWEEP_DIR is the directory a sweep with the hpsearch launcher wrote: it holds results.csv and
Hydra's multirun.yaml, which gives the objective's metric and mode and the leaderboard's extra
columns (Optuna's sweeper writes none: then a run dir's .hydra/ does; without either, higher
is better; --mode says which way it is, over them). The leaderboard is the end-of-sweep one:
the N best runs (default 10), how many more, and every failure with its reason. The figure
(default SWEEP_DIR/report.png) has parallel coordinates of every run (two or more swept
parameters), one panel per parameter (the objective against its values) and a scatter of the
two numeric parameters with the most values coloured by objective. The best run(s) -- every
run tied for best -- are marked; failed or unfinished jobs are drawn in red, pruned ones
(stopped early by the sweep) in grey. Superseded rows (an earlier run's unfinished job that a
later run ran again) are history: counted in the title apart, not drawn.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: sweep machines have no display
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hpsearch.report_axes import Axis, Sweep, param_axis, scatter_pair
from hpsearch.report_curves import draw_curves
from hpsearch.report_load import DEFAULT_ROOTS, LATEST, ReportError, latest_sweep, load_sweep
from hpsearch.report_panels import (
    MAX_LISTED_FAILURES,
    draw_marginal,
    draw_no_finished,
    y_limits,
)
from hpsearch.report_parallel import draw_parallel
from hpsearch.report_scatter import draw_scatter
from hpsearch_launcher.results import (
    FILENAME,
    leaderboard,
)

PLOT_NAME = "report.png"
PANEL_SIZE = (4.5, 3.6)  # inches per subplot
PARALLEL_HEIGHT = 4.2  # inches
PARALLEL_AXIS_WIDTH = 1.7  # inches per parallel-coordinates axis, so tick labels keep apart
MAX_COLUMNS = 3


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    sweep_dir = Path(args.sweep_dir)
    try:
        if args.sweep_dir == LATEST and not sweep_dir.exists():
            sweep_dir = latest_sweep()
            print(f"the latest sweep: {sweep_dir}")
        sweep = load_sweep(sweep_dir, args.mode)
    except ReportError as e:
        print(f"hpsearch.report: {e}", file=sys.stderr)
        return 2
    rows = [*sweep.rows, *sweep.superseded]
    print(leaderboard(rows, sweep.params, sweep.mode, args.top, sweep.columns, metric=sweep.metric))
    path = Path(args.plot) if args.plot else sweep_dir / PLOT_NAME
    write_plot(sweep, path)
    print(f"plot: {path}")
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hpsearch.report",
        description="Print a sweep's leaderboard and plot its objective against the "
        "hyperparameters.",
    )
    parser.add_argument(
        "sweep_dir",
        metavar="SWEEP_DIR",
        nargs="?",
        default=LATEST,
        help=f"the sweep's output directory; {LATEST} (the default): the newest sweep under "
        f"{' or '.join(f'{root}/' for root in DEFAULT_ROOTS)} (by its {FILENAME})",
    )
    parser.add_argument(
        "--top", type=_positive_int, default=10, help="how many best runs to list (default 10)"
    )
    parser.add_argument(
        "--mode",
        choices=("max", "min"),
        help="which way the objective is better (default: as the sweep's config says, "
        "objective.mode or the SweepSummary callback's mode; else max)",
    )
    parser.add_argument(
        "--plot",
        metavar="PATH",
        help=f"where to write the PNG plot (default SWEEP_DIR/{PLOT_NAME})",
    )
    return parser.parse_args(argv)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--top {text!r} is not a positive integer: pass e.g. 10")
    return value


def write_plot(sweep: Sweep, path: Path) -> Path:
    fig = build_figure(sweep)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def build_figure(sweep: Sweep) -> Figure:
    """Parallel coordinates over the top (two or more params), then one marginal panel per
    param (by job number when nothing was swept) and, last, the 2-D scatter of two numeric
    params (when there are two): its colour bar then has no panel to its right whose axis
    label would run into its own. A sweep with no finished run gets the failures' reasons."""
    if not sweep.finished:
        listed = min(len(sweep.failed), MAX_LISTED_FAILURES) + 1
        fig, ax = plt.subplots(figsize=(10, 1.1 + 0.16 * listed), layout="constrained")
        draw_no_finished(ax, sweep)
        fig.suptitle(_title(sweep), fontsize="large")
        return fig
    axes = _param_axes(sweep)
    pair = scatter_pair(axes) if sweep.params else None
    panels = len(axes) + (pair is not None)
    ncols = min(MAX_COLUMNS, panels)
    parallel = len(sweep.params) >= 2
    curves = bool(sweep.curves)
    heights = [PARALLEL_HEIGHT] * (parallel + curves) + [PANEL_SIZE[1]] * math.ceil(panels / ncols)
    width = max(PANEL_SIZE[0] * ncols, PARALLEL_AXIS_WIDTH * (len(axes) + 1) * parallel)
    fig = plt.figure(figsize=(width, sum(heights) + 0.5), layout="constrained")
    grid = fig.add_gridspec(len(heights), ncols, height_ratios=heights)
    if parallel:
        draw_parallel(fig, fig.add_subplot(grid[0, :]), axes, sweep)
    if curves:
        draw_curves(fig.add_subplot(grid[parallel, :]), sweep)
    top = parallel + curves
    slots = [grid[top + k // ncols, k % ncols] for k in range(panels)]
    if pair is not None:
        draw_scatter(fig, fig.add_subplot(slots.pop()), pair, axes, sweep)
    ylim = y_limits(sweep)
    first: Axes | None = None
    for axis, slot in zip(axes, slots, strict=True):
        ax = fig.add_subplot(slot, sharey=first)
        draw_marginal(ax, axis, sweep, ylim)
        if first is None:
            first = ax
            ax.legend(loc="best", fontsize="small", framealpha=0.85)
        if ax is first or slot.is_first_col():
            ax.set_ylabel(sweep.metric)
    fig.suptitle(_title(sweep), fontsize="large")
    return fig


def _param_axes(sweep: Sweep) -> list[Axis]:
    if not sweep.params:
        jobs = [r.get("job", "") or str(i) for i, r in enumerate(sweep.rows)]
        return [param_axis("job", jobs, allow_log=False)]
    return [param_axis(p, [r.get(p, "") for r in sweep.rows]) for p in sweep.params]


def _title(sweep: Sweep) -> str:
    best = sweep.best()
    history = len(sweep.superseded)
    # Superseded rows are earlier tries of jobs that ran again: neither runs nor failures.
    note = f"; {history} superseded by a later run, not drawn" if history else ""
    pruned = f" ({len(sweep.pruned)} pruned)" if sweep.pruned else ""
    runs = f"{sweep.name}: {len(sweep.rows)} runs{pruned}"
    if not best:
        return f"{runs}, none finished{note}"
    ties = f" ({len(best)} runs)" if len(best) > 1 else ""
    score = sweep.scores[best[0]]
    return f"{runs}, best {sweep.metric}={score:.4g}{ties}{note}"


if __name__ == "__main__":
    raise SystemExit(main())
