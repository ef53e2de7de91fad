"""The learning-curve panel of a sweep's report: one line per run that reported its objective
(`hpsearch_launcher.report`, once an epoch), coloured by where it ended; pruned runs grey and
dotted to the step they stopped at, a cross at the step the pruner decided on (results.csv's
`pruned_step`; a job goes on a little after the decision), and a faint line at each step the
pruner stopped runs at (its rungs), with how many. Steps are whole numbers, shown from 1 where
they count from 0 (as the job's log counts epochs); the y range leaves out a diverged run, and
says so."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from hpsearch.report_axes import Sweep, robust_bounds
from hpsearch.report_panels import PRUNED_COLOUR, clip_note, objective_colours
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


def first_step(sweep: Sweep) -> int:
    """What the x axis adds to each step: 1 where the steps count from 0 (report()'s own
    count, Keras' epoch index), so the first report is 1, as the job's log counts its epochs
    (`epoch 1/20`); 0 where the app counts its own way."""
    return 1 if min(s for curve in sweep.curves.values() for s, _ in curve) == 0 else 0


def curve_limits(sweep: Sweep) -> tuple[tuple[float, float], int]:
    """The curves' y range, and how many runs go beyond it: the range of every point of the
    runs whose last report is not far worse than the others' (a diverged run's huge loss
    would flatten every other curve)."""
    low, high = robust_bounds([curve[-1][1] for curve in sweep.curves.values()], sweep.mode)
    kept = [c for c in sweep.curves.values() if low <= c[-1][1] <= high]
    values = [v for curve in kept for _, v in curve]
    bottom, top = min(values), max(values)
    margin = 0.05 * ((top - bottom) or abs(top) or 1.0)
    beyond = sum(any(not bottom <= v <= top for _, v in c) for c in sweep.curves.values())
    return (bottom - margin, top + margin), beyond


def draw_curves(ax: Axes, sweep: Sweep) -> None:
    cmap, norm = objective_colours(sweep)
    pruned = set(sweep.pruned)
    shift = first_step(sweep)
    for i, curve in sweep.curves.items():
        steps, values = zip(*curve, strict=True)
        steps = tuple(s + shift for s in steps)
        if i in pruned:
            ax.plot(steps, values, color=PRUNED_COLOUR, linestyle=":", linewidth=1, alpha=0.8)
            step, value = decision(sweep.rows[i], curve)
            ax.plot(step + shift, value, "x", color=PRUNED_COLOUR, markersize=5)
        elif i in sweep.finished:
            ax.plot(steps, values, color=cmap(norm(sweep.scores[i])), linewidth=1.2, alpha=0.9)
        else:  # failed: its curve up to where it died
            ax.plot(steps, values, color="tab:red", linestyle="--", linewidth=1, alpha=0.7)
    _draw_rungs(ax, sweep, shift)
    _frame(ax, sweep, shift)
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


def rungs(sweep: Sweep) -> Counter[int]:
    """The steps the pruner stopped runs at (each pruned run's decision), and how many at each."""
    return Counter(
        decision(sweep.rows[i], sweep.curves[i])[0] for i in sweep.pruned if i in sweep.curves
    )


def _draw_rungs(ax: Axes, sweep: Sweep, shift: int) -> None:
    """A faint line at each step the pruner stopped runs at, with how many it stopped there."""
    for step, count in sorted(rungs(sweep).items()):
        rung = ax.axvline(step + shift, color=PRUNED_COLOUR, linewidth=0.6, alpha=0.5, zorder=0)
        rung.set_gid("rung")
        ax.annotate(
            f"{count} pruned",
            (step + shift, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            fontsize="x-small",
            color=PRUNED_COLOUR,
            va="top",
        )


def _frame(ax: Axes, sweep: Sweep, shift: int) -> None:
    """Whole-number steps, counted as the log counts; the y range no diverged run sets, and
    a note where runs go beyond it."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch (report, from 1 as the log counts)" if shift else "step (report)")
    ax.set_ylabel(f"reported {sweep.metric}")
    ax.set_title("learning curves", fontsize="medium")
    limits, beyond = curve_limits(sweep)
    ax.set_ylim(*limits)
    if beyond:
        note = (
            f"y axis clipped: {beyond} run(s) go beyond it (a diverged run would flatten the rest)"
        )
        clip_note(ax, note, "bottom")
