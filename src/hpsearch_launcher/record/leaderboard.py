"""The sweep's leaderboard: the best runs by objective, then the failures with their reasons.

Pure text from results.csv rows; the end-of-sweep callback and reports print it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..outcome import DONE, FINAL, SUPERSEDED, Status
from .rows import finite
from .table import STATUS


def summary_options(config: DictConfig | Mapping[str, Any] | None) -> tuple[str, list[str]]:
    """The leaderboard's direction ('max' or 'min') and extra columns, from the sweep config:
    the summary callback's `mode` and `columns` when it sets them (hpsearch's config sets
    `mode: ${objective.mode}`), else the sweeper's direction (Optuna's), else 'max'."""
    if config is None:
        return "max", []
    cfg = config if isinstance(config, DictConfig) else OmegaConf.create(dict(config))
    mode = OmegaConf.select(cfg, "hydra.callbacks.summary.mode", default=None)
    columns = OmegaConf.select(cfg, "hydra.callbacks.summary.columns", default=None) or []
    if mode not in ("max", "min"):
        direction = OmegaConf.select(cfg, "hydra.sweeper.direction", default=None)
        if OmegaConf.is_list(direction) or isinstance(direction, list):
            direction = direction[0] if len(direction) else None
        mode = "min" if str(direction).startswith("min") else "max"
    return str(mode), [str(c) for c in columns]


def objective(row: Mapping[str, str]) -> float | None:
    return finite(row.get("objective", ""))


def ranked(rows: Sequence[Mapping[str, str]], mode: str) -> list[Mapping[str, str]]:
    """Finished rows with an objective, best first."""
    done = [r for r in rows if r.get(STATUS) in DONE and objective(r) is not None]
    return sorted(done, key=lambda r: objective(r) or 0.0, reverse=mode == "max")


def unfinished(rows: Sequence[Mapping[str, str]]) -> list[Mapping[str, str]]:
    """Rows of jobs that did not finish and were not run again by a later run of the sweep."""
    return [r for r in rows if r.get(STATUS) not in (*FINAL, SUPERSEDED)]


def leaderboard(
    rows: Sequence[Mapping[str, str]],
    params: Sequence[str],
    mode: str,
    top: int = 10,
    columns: Sequence[str] = (),
) -> str:
    """A plain-text table of the `top` best runs (and how many more), then every failure and
    its reason."""
    best = ranked(rows, mode)
    failed = unfinished(rows)
    pruned = [r for r in rows if r.get(STATUS) == Status.PRUNED.value]
    lines = [
        f"Leaderboard ({mode} objective): {len(best)} finished, "
        + (f"{len(pruned)} pruned, " if pruned else "")
        + f"{len(failed)} failed or unfinished, {len(rows)} jobs"
    ]
    if best:
        header = ["rank", "objective", *params, *columns, "time_s", "run_dir"]
        table = [
            [
                str(i + 1),
                f"{objective(r):.4f}",
                *(r.get(p, "") for p in params),
                *(_fmt(r.get(c, "")) for c in columns),
                _fmt(r.get("wall_time_s", ""), 1),
                r.get("run_dir", ""),
            ]
            for i, r in enumerate(best[:top])
        ]
        lines += _align([header, *table])
        if len(best) > top:
            lines.append(f"  \N{HORIZONTAL ELLIPSIS} {len(best) - top} more finished runs")
    for r in [*pruned, *failed]:
        setting = ",".join(f"{p}={r.get(p, '')}" for p in params)
        lines.append(
            f"  {r.get(STATUS, '?').upper():<11} job {r.get('job', '?')} "
            f"{setting}: {r.get('error', '') or 'no reason recorded'}"
        )
    return "\n".join(lines)


def _fmt(value: str, digits: int = 4) -> str:
    number = finite(value)
    return value if number is None else f"{number:.{digits}f}"


def _align(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
