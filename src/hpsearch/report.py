"""A sweep's report from disk: the leaderboard, and a figure of how the objective depends on
the hyperparameters, alone and together.

Usage:
    python -m hpsearch.report [SWEEP_DIR | latest] [--top N] [--plot PATH]

SWEEP_DIR is the directory a sweep with the hpsearch launcher wrote: it holds results.csv and
Hydra's multirun.yaml, which gives the objective's metric and mode and the leaderboard's extra
columns (Optuna's sweeper writes none: then a run dir's .hydra/ does; without either, higher
is better). The leaderboard is the end-of-sweep one: the N best runs (default 10), how many
more, and every failure with its reason. The figure (default SWEEP_DIR/report.png) has
parallel coordinates of every run (two or more swept parameters), one panel per parameter (the
objective against its values) and a scatter of the two numeric parameters with the most
values coloured by objective. The best run(s) -- every run tied for best -- are marked; failed
or unfinished jobs are drawn in red, pruned ones (stopped early by the sweep) in grey.
Superseded rows (an earlier run's unfinished job that a later run ran again) are history:
counted in the title apart, not drawn.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: sweep machines have no display
import matplotlib.pyplot as plt
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf

from hpsearch.report_axes import Axis, Sweep, param_axis, scatter_pair
from hpsearch.report_curves import draw_curves, load_curves
from hpsearch.report_panels import (
    MAX_LISTED_FAILURES,
    draw_marginal,
    draw_no_finished,
    y_limits,
)
from hpsearch.report_parallel import draw_parallel
from hpsearch.report_scatter import draw_scatter
from hpsearch_launcher.results import (
    DONE,
    FILENAME,
    SUPERSEDED,
    ResultsFileError,
    ResultsTable,
    leaderboard,
    objective,
    summary_options,
)

PLOT_NAME = "report.png"
PANEL_SIZE = (4.5, 3.6)  # inches per subplot
PARALLEL_HEIGHT = 4.2  # inches
PARALLEL_AXIS_WIDTH = 1.7  # inches per parallel-coordinates axis, so tick labels keep apart
MAX_COLUMNS = 3


class ReportError(Exception):
    """Bad input: a one-line message naming the value and the fix."""


LATEST = "latest"  # SWEEP_DIR's default: the newest sweep under DEFAULT_ROOTS
# Where sweeps go by default: hpsearch's (conf/), and Hydra's own for any other app.
DEFAULT_ROOTS = (Path("outputs/multirun"), Path("multirun"))


def latest_sweep(roots: tuple[Path, ...] = DEFAULT_ROOTS) -> Path:
    """The sweep dir under any of `roots` (`<date>/<time>/`, or any depth) whose results.csv
    changed last; ReportError when there is none."""
    found = [p for root in roots if root.is_dir() for p in root.glob(f"**/{FILENAME}")]
    found = [p for p in found if p.is_file()]
    if not found:
        where = " or ".join(f"{root}/" for root in roots)
        raise ReportError(
            f"no sweep under {where} here (no {FILENAME}): run this where you ran the sweep, "
            "or pass its SWEEP_DIR"
        )
    return max(found, key=lambda p: p.stat().st_mtime).parent


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    sweep_dir = Path(args.sweep_dir)
    try:
        if args.sweep_dir == LATEST and not sweep_dir.exists():
            sweep_dir = latest_sweep()
            print(f"the latest sweep: {sweep_dir}")
        sweep = load_sweep(sweep_dir)
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
    every = list(table.rows.values())
    cfg = _multirun_config(sweep_dir) or _run_config(sweep_dir, every)
    metric = OmegaConf.select(cfg, "objective.metric", default=None) if cfg else None
    rows = [r for r in every if r.get("status") != SUPERSEDED]
    return Sweep(
        name=sweep_dir.resolve().name,
        rows=rows,
        params=list(table.params),
        mode=objective_mode(cfg),
        metric=str(metric) if metric else "objective",
        scores=[_score(r) if r.get("status") in DONE else math.nan for r in rows],
        columns=summary_options(cfg)[1],
        superseded=[r for r in every if r.get("status") == SUPERSEDED],
        curves=load_curves(sweep_dir, rows),
    )


def objective_mode(cfg: DictConfig | None) -> str:
    """'max' or 'min': hpsearch's objective.mode, else what the sweep's summary used."""
    mode = OmegaConf.select(cfg, "objective.mode", default=None) if cfg else None
    return str(mode) if mode in ("max", "min") else summary_options(cfg)[0]


def _score(row: dict[str, str]) -> float:
    value = objective(row)
    return math.nan if value is None else value


def _multirun_config(sweep_dir: Path) -> DictConfig | None:
    path = sweep_dir / "multirun.yaml"
    return _load_yaml(path) if path.is_file() else None


def _run_config(sweep_dir: Path, rows: list[dict[str, str]]) -> DictConfig | None:
    """A job's config and Hydra config, from its run dir's .hydra/: what a sweeper that writes
    no multirun.yaml (Optuna's) leaves of the sweep's objective and summary settings."""
    for row in rows:
        run_dir = Path(row.get("run_dir", ""))
        if not run_dir.name:
            continue
        # A relative run dir is relative to where the sweep ran: look in the sweep dir too.
        for hydra_dir in (run_dir / ".hydra", sweep_dir / run_dir.name / ".hydra"):
            if (hydra_dir / "config.yaml").is_file():
                paths = [hydra_dir / "config.yaml", hydra_dir / "hydra.yaml"]
                merged = OmegaConf.merge(*[_load_yaml(p) or {} for p in paths if p.is_file()])
                return merged if isinstance(merged, DictConfig) else None
    return None


def _load_yaml(path: Path) -> DictConfig | None:
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
