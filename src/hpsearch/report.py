"""A sweep's report from disk: the leaderboard, and a plot of the objective per hyperparameter.

Usage:
    python -m hpsearch.report SWEEP_DIR [--top N] [--plot PATH]

SWEEP_DIR is the directory a sweep with the hpsearch launcher wrote: it holds results.csv and
Hydra's multirun.yaml (which gives the objective's metric and mode; without it, higher is
better). The leaderboard lists the N best runs (default 10) and every failure with its reason.
The plot (default SWEEP_DIR/report.png) has one panel per swept parameter: the objective
against the parameter's values, the best run starred, failed or unfinished jobs as red crosses
at the bottom.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: sweep machines have no display
import matplotlib.pyplot as plt
import numpy as np
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullFormatter
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.hpsearch_launcher.results import (
    DONE,
    FILENAME,
    ResultsFileError,
    ResultsTable,
    leaderboard,
    objective,
    ranked,
    summary_options,
)

PLOT_NAME = "report.png"
PANEL_SIZE = (4.5, 3.6)  # inches per subplot
MAX_COLUMNS = 3
LOG_SPAN = 20.0  # positive values spanning more than this factor get a log axis
MAX_LABELLED_TICKS = 8  # up to this many distinct numeric values, each gets its own tick
JITTER = 0.08  # half-width of the horizontal jitter on categorical axes, in category units


class ReportError(Exception):
    """Bad input: a one-line message naming the value and the fix."""


@dataclass(frozen=True)
class Sweep:
    """What the report needs from a sweep dir."""

    name: str
    rows: list[dict[str, str]]
    params: list[str]
    mode: str
    metric: str


@dataclass(frozen=True)
class XAxis:
    """One panel's x axis: a position for every row, in the order of Sweep.rows."""

    label: str
    positions: list[float]
    categories: list[str]  # tick labels at 0, 1, ...; empty for a numeric axis
    log: bool


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    sweep_dir = Path(args.sweep_dir)
    try:
        sweep = load_sweep(sweep_dir)
    except ReportError as e:
        print(f"hpsearch.report: {e}", file=sys.stderr)
        return 2
    print(leaderboard(sweep.rows, sweep.params, sweep.mode, args.top))
    path = Path(args.plot) if args.plot else sweep_dir / PLOT_NAME
    write_plot(sweep, path)
    print(f"plot: {path}")
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hpsearch.report",
        description="Print a sweep's leaderboard and plot its objective per hyperparameter.",
    )
    parser.add_argument("sweep_dir", metavar="SWEEP_DIR", help="the sweep's output directory")
    parser.add_argument(
        "--top", type=_positive_int, default=10, help="how many best runs to list (default 10)"
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


def load_sweep(sweep_dir: Path) -> Sweep:
    """The sweep's rows, swept params and objective; ReportError when there is nothing to show."""
    if not sweep_dir.exists():
        raise ReportError(
            f"sweep dir {sweep_dir} does not exist: pass the directory a sweep "
            "wrote its results.csv into"
        )
    if not sweep_dir.is_dir():
        raise ReportError(f"{sweep_dir} is not a directory: pass the sweep's output directory")
    if not (sweep_dir / FILENAME).is_file():
        raise ReportError(
            f"no {FILENAME} in {sweep_dir}: run a sweep with the hpsearch launcher into it first"
        )
    try:
        table = ResultsTable.load(sweep_dir)
    except ResultsFileError as err:
        raise ReportError(str(err)) from None
    if not table.rows:
        raise ReportError(
            f"{table.path} has no rows: no job of the sweep has ended yet; "
            "rerun the report when one has"
        )
    cfg = _multirun_config(sweep_dir)
    metric = OmegaConf.select(cfg, "objective.metric", default=None) if cfg else None
    return Sweep(
        name=sweep_dir.resolve().name,
        rows=list(table.rows.values()),
        params=list(table.params),
        mode=objective_mode(cfg),
        metric=str(metric) if metric else "objective",
    )


def objective_mode(cfg: DictConfig | None) -> str:
    """'max' or 'min': hpsearch's objective.mode, else what the sweep's summary used."""
    mode = OmegaConf.select(cfg, "objective.mode", default=None) if cfg else None
    return str(mode) if mode in ("max", "min") else summary_options(cfg)[0]


def _multirun_config(sweep_dir: Path) -> DictConfig | None:
    path = sweep_dir / "multirun.yaml"
    if not path.is_file():
        return None
    try:
        cfg = OmegaConf.load(path)
    except (OSError, yaml.YAMLError) as e:
        reason = " ".join(str(e).split())
        raise ReportError(f"cannot read {path}: {reason}; fix or remove that file") from e
    return cfg if isinstance(cfg, DictConfig) else None


def write_plot(sweep: Sweep, path: Path) -> Path:
    fig = build_figure(sweep)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def build_figure(sweep: Sweep) -> Figure:
    """One panel per swept parameter (by job number when nothing was swept), sharing y."""
    axes_x = _x_axes(sweep)
    ncols = min(MAX_COLUMNS, len(axes_x))
    nrows = math.ceil(len(axes_x) / ncols)
    fig, grid = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        sharey=True,
        figsize=(PANEL_SIZE[0] * ncols, PANEL_SIZE[1] * nrows + 0.4),
    )
    panels = list(grid.flat)
    ylim = _y_limits(sweep)
    for i, (ax, x) in enumerate(zip(panels, axes_x, strict=False)):
        _draw_panel(ax, x, sweep, ylim)
        if i % ncols == 0:
            ax.set_ylabel(sweep.metric)
    for ax in panels[len(axes_x) :]:
        ax.set_visible(False)
    panels[0].legend(loc="best", fontsize="small", framealpha=0.85)
    fig.suptitle(_title(sweep), fontsize="large")
    fig.tight_layout()
    return fig


def _title(sweep: Sweep) -> str:
    best = ranked(sweep.rows, sweep.mode)
    if not best:
        return f"{sweep.name}: {len(sweep.rows)} runs, none finished"
    return f"{sweep.name}: {len(sweep.rows)} runs, best {sweep.metric}={objective(best[0]):.4g}"


def _finished(row: Mapping[str, str]) -> bool:
    return row.get("status") in DONE and objective(row) is not None


def _x_axes(sweep: Sweep) -> list[XAxis]:
    rng = np.random.default_rng(0)  # fixed seed: the same sweep always gives the same picture
    if not sweep.params:
        jobs = [r.get("job", "") or str(i) for i, r in enumerate(sweep.rows)]
        return [_x_axis("job", jobs, allow_log=False, rng=rng)]
    return [
        _x_axis(p, [r.get(p, "") for r in sweep.rows], allow_log=True, rng=rng)
        for p in sweep.params
    ]


def _x_axis(label: str, values: Sequence[str], allow_log: bool, rng: np.random.Generator) -> XAxis:
    numbers = [_as_float(v) for v in values]
    if all(n is not None for n in numbers):
        xs = [float(n) for n in numbers if n is not None]
        log = allow_log and min(xs) > 0 and max(xs) / min(xs) > LOG_SPAN
        return XAxis(label, xs, [], log)
    labels = [v if v else "(unset)" for v in values]
    categories = sorted(set(labels), key=_natural_key)
    jitter = rng.uniform(-JITTER, JITTER, len(labels))
    positions = [categories.index(v) + float(j) for v, j in zip(labels, jitter, strict=True)]
    return XAxis(label, positions, categories, log=False)


def _as_float(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _natural_key(value: str) -> tuple[int, float, str]:
    number = _as_float(value)
    return (1, 0.0, value) if number is None else (0, number, value)


def _y_limits(sweep: Sweep) -> tuple[float, float]:
    """Room above the data for the best run's label and below it for the failure markers."""
    values = [objective(r) or 0.0 for r in sweep.rows if _finished(r)]
    if not values:
        return (0.0, 1.0)
    low, high = min(values), max(values)
    span = high - low or max(abs(high) * 0.1, 0.1)
    return (low - 0.22 * span, high + 0.18 * span)


def _draw_panel(ax: Axes, x: XAxis, sweep: Sweep, ylim: tuple[float, float]) -> None:
    done = [i for i, r in enumerate(sweep.rows) if _finished(r)]
    failed = [i for i, r in enumerate(sweep.rows) if not _finished(r)]
    ys = [objective(sweep.rows[i]) or 0.0 for i in done]
    ax.scatter(
        [x.positions[i] for i in done],
        ys,
        s=36,
        alpha=0.75,
        color="tab:blue",
        edgecolors="white",
        linewidths=0.5,
        label="runs",
        zorder=2,
    )
    if failed:
        _draw_failures(ax, x, failed, ylim[0])
    ax.set_ylim(*ylim)
    _style_x(ax, x)
    ax.grid(True, alpha=0.3, linestyle=":")
    best = ranked(sweep.rows, sweep.mode)
    if best:
        _mark_best(
            ax, x.positions[_index_of(sweep.rows, best[0])], objective(best[0]) or 0.0, sweep.mode
        )


def _draw_failures(ax: Axes, x: XAxis, failed: list[int], bottom: float) -> None:
    """Red crosses at the axis minimum, unclipped: a failure has no objective, only a place on x."""
    xs = [x.positions[i] for i in failed]
    ax.scatter(
        xs,
        [bottom] * len(xs),
        marker="x",
        s=45,
        linewidths=1.8,
        color="tab:red",
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
                color="tab:red",
                fontsize="small",
                fontweight="bold",
            )


def _index_of(rows: Sequence[Mapping[str, str]], row: Mapping[str, str]) -> int:
    return next(i for i, r in enumerate(rows) if r is row)


def _mark_best(ax: Axes, x: float, y: float, mode: str) -> None:
    ax.scatter(
        [x],
        [y],
        marker="*",
        s=260,
        color="gold",
        edgecolors="black",
        linewidths=0.8,
        label="best",
        zorder=4,
    )
    # The label goes toward the headroom (above the star when higher is better), and is aligned
    # inward near either side of the frame, where centred text would run past it.
    ax.get_xlim()  # settles autoscaling, so the transforms below see the final limits
    fraction = ax.transAxes.inverted().transform(ax.transData.transform((x, y)))[0]
    ha = "left" if fraction < 0.15 else "right" if fraction > 0.85 else "center"
    dx = {"left": -6, "right": 6, "center": 0}[ha]
    offset = (dx, 10) if mode == "max" else (dx, -12)
    ax.annotate(
        f"best {y:.4g}",
        (x, y),
        xytext=offset,
        textcoords="offset points",
        ha=ha,
        va="bottom" if mode == "max" else "top",
        fontsize="small",
        fontweight="bold",
    )


def _style_x(ax: Axes, x: XAxis) -> None:
    ax.set_xlabel(x.label)
    if x.categories:
        ax.set_xticks(range(len(x.categories)), x.categories)
        ax.set_xlim(-0.5, len(x.categories) - 0.5)
        _rotate_if_crowded(ax, x.categories)
        return
    if x.log:
        ax.set_xscale("log")
    distinct = sorted(set(x.positions))
    if len(distinct) <= MAX_LABELLED_TICKS:
        labels = [_tick_label(v) for v in distinct]
        ax.set_xticks(distinct, labels)
        ax.xaxis.set_minor_formatter(NullFormatter())
        _rotate_if_crowded(ax, labels)
    elif x.label == "job":  # the fallback axis of a sweep with no swept params
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(distinct) == 1:
        ax.set_xlim(distinct[0] - 1, distinct[0] + 1)


def _tick_label(value: float) -> str:
    """Short labels, so a learning-rate axis can label every value: 3e-4 rather than 0.0003."""
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return f"{value:g}"


def _rotate_if_crowded(ax: Axes, labels: Sequence[str]) -> None:
    # About 36 characters of tick labels fit side by side under a 4.5-inch panel.
    if sum(len(label) + 2 for label in labels) > 36:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


if __name__ == "__main__":
    raise SystemExit(main())
