"""The sweep's leaderboard: the best runs by objective, then the failures with their reasons.

Pure text from results.csv rows; the end-of-sweep callback and reports print it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..outcome import DONE, FINAL, SUPERSEDED, Status
from ..plan.naming import setting_text, short_float
from .rows import finite
from .table import STATUS

OBJECTIVE = "objective"  # the leaderboard's name for a task's bare return value


def summary_options(config: DictConfig | Mapping[str, Any] | None) -> tuple[str, list[str]]:
    """The leaderboard's direction ('max' or 'min') and extra columns, from the sweep config:
    the summary callback's `mode` and `columns` when it sets them (hpsearch's config sets
    `mode: ${objective.mode}`), else the sweeper's direction (Optuna's), else 'max'."""
    if config is None:
        return "max", []
    cfg = config if isinstance(config, DictConfig) else OmegaConf.create(dict(config))
    mode = summary_mode(cfg)
    columns = OmegaConf.select(cfg, "hydra.callbacks.summary.columns", default=None) or []
    if mode is None:
        # hpsearch's sweeper leaves direction null to follow the callback's mode; with none
        # given it minimises, as Optuna does.
        direction = OmegaConf.select(cfg, "hydra.sweeper.direction", default="max")
        if OmegaConf.is_list(direction) or isinstance(direction, list):
            direction = direction[0] if len(direction) else None
        mode = "min" if direction is None or str(direction).startswith("min") else "max"
    return str(mode), [str(c) for c in columns]


SUMMARY_TARGET = "SweepSummary"  # the end-of-sweep callback's class, whatever its key


def summary_mode(config: DictConfig) -> str | None:
    """The SweepSummary callback's `mode` ('max' or 'min'), under `summary` or whatever key the
    app put it in hydra.callbacks; None when it sets none."""
    callbacks = OmegaConf.select(config, "hydra.callbacks", default=None)
    if not OmegaConf.is_dict(callbacks):
        return None
    for key in callbacks:
        target = OmegaConf.select(callbacks, f"{key}._target_", default="")
        if key != "summary" and str(target).rsplit(".", 1)[-1] != SUMMARY_TARGET:
            continue
        mode = OmegaConf.select(callbacks, f"{key}.mode", default=None)
        if mode in ("max", "min"):
            return str(mode)
    return None


def summary_metric(config: DictConfig | Mapping[str, Any] | None) -> str:
    """What the objective is, for the leaderboard to name: the summary callback's `metric`
    (hpsearch's config sets `metric: ${objective.metric}`), else `objective` (a task's bare
    return value)."""
    if config is None:
        return OBJECTIVE
    cfg = config if isinstance(config, DictConfig) else OmegaConf.create(dict(config))
    metric = OmegaConf.select(cfg, "hydra.callbacks.summary.metric", default=None)
    return str(metric) if metric else OBJECTIVE


def objective(row: Mapping[str, str]) -> float | None:
    return finite(row.get("objective", ""))


def ranked(rows: Sequence[Mapping[str, str]], mode: str) -> list[Mapping[str, str]]:
    """Finished rows with an objective, best first."""
    done = [r for r in rows if r.get(STATUS) in DONE and objective(r) is not None]
    return sorted(done, key=lambda r: objective(r) or 0.0, reverse=mode == "max")


def unfinished(rows: Sequence[Mapping[str, str]]) -> list[Mapping[str, str]]:
    """Rows of jobs that did not finish and were not run again by a later run of the sweep."""
    return [r for r in rows if r.get(STATUS) not in (*FINAL, SUPERSEDED)]


def superseded(rows: Sequence[Mapping[str, str]]) -> list[Mapping[str, str]]:
    """Rows of earlier runs' unfinished attempts at jobs that a later run ran again."""
    return [r for r in rows if r.get(STATUS) == SUPERSEDED]


def leaderboard(
    rows: Sequence[Mapping[str, str]],
    params: Sequence[str],
    mode: str,
    top: int = 10,
    columns: Sequence[str] = (),
    source: Path | None = None,
    metric: str = OBJECTIVE,
) -> str:
    """A plain-text table of the `top` best runs (and how many more), then every pruned and
    failed job and its reason; `source`, the results.csv the rows are from, is named in the
    first line, and `metric`, what the objective is. Values read as the run dirs name them (6
    significant digits), times (`*_s`) to a tenth of a second."""
    best = ranked(rows, mode)
    pruned = [r for r in rows if r.get(STATUS) == Status.PRUNED.value]
    lines = [f"Leaderboard ({mode} {metric}): {counts(rows, source)}"]
    if best:
        header = ["rank", metric, *params, *columns, "time_s", "run_dir"]
        table = [
            [
                str(i + 1),
                f"{objective(r):.4f}",
                *(short_float(r.get(p, "")) for p in params),
                *(_fmt(c, r.get(c, "")) for c in columns),
                _fmt("wall_time_s", r.get("wall_time_s", "")),
                r.get("run_dir", ""),
            ]
            for i, r in enumerate(best[:top])
        ]
        lines += _align([header, *table])
        if len(best) > top:
            lines.append(f"  \N{HORIZONTAL ELLIPSIS} {len(best) - top} more finished runs")
    for r in [*pruned, *unfinished(rows)]:
        setting = setting_text({p: r.get(p, "") for p in params})
        lines.append(
            f"  {r.get(STATUS, '?').upper():<11} job {r.get('job', '?')} "
            f"{setting}: {r.get('error', '') or 'no reason recorded'}"
        )
    return "\n".join(lines)


def study_note(
    config: DictConfig, rows: Sequence[Mapping[str, str]], params: Sequence[str], mode: str
) -> str | None:
    """With Hydra's Optuna sweeper (one objective), which best is which: the "Best value" it
    prints is its study's, over every run of the study (a sqlite study outlives the sweep
    dir); the leaderboard's is this sweep dir's alone."""
    if "optuna" not in str(OmegaConf.select(config, "hydra.sweeper._target_", default="")):
        return None
    direction = OmegaConf.select(config, "hydra.sweeper.direction", default=None)
    if OmegaConf.is_list(direction) and len(direction) > 1:
        return None  # Optuna prints its Pareto front instead of one best
    best = ranked(rows, mode)
    jobs = len(rows) - len(superseded(rows))
    here = f"the best of this sweep dir's results.csv ({jobs} job{'' if jobs == 1 else 's'})"
    if best:
        setting = setting_text({p: best[0].get(p, "") for p in params})
        here += f" is {objective(best[0]):.4f} ({setting}), the leaderboard's first row"
    else:
        here = "this sweep dir's results.csv has no finished job with an objective"
    return (
        "hpsearch: Optuna's \"Best value\" above is its study's best, over every trial the study "
        f"holds (every run of the study); {here}"
    )


def counts(rows: Sequence[Mapping[str, str]], source: Path | None = None) -> str:
    """What the rows hold, adding up: every job (one row each) finished or not; a superseded
    row is an earlier run's attempt at a job that ran again, not a job of its own."""
    finished = sum(r.get(STATUS) in DONE for r in rows)
    pruned = sum(r.get(STATUS) == Status.PRUNED.value for r in rows)
    failed = len(unfinished(rows))
    attempts = len(superseded(rows))
    text = f"{finished} finished, " + (f"{pruned} pruned, " if pruned else "")
    text += f"{failed} failed or unfinished, {finished + pruned + failed} jobs"
    if source is not None:
        text += f" of this sweep dir ({source})"
    unranked = finished - len(ranked(rows, "max"))
    if unranked:
        text += f"; {unranked} finished without a finite objective"
    if attempts:
        text += f"; {attempts} superseded (earlier attempts at jobs run again) not counted"
    return text


def _fmt(column: str, value: str) -> str:
    """A cell of `column`: a time (`*_s`) to a tenth of a second, any other value as a run
    dir's name writes it (6 significant digits)."""
    number = finite(value)
    if number is None:
        return value
    return f"{number:.1f}" if column.endswith("_s") else short_float(value)


def _align(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
