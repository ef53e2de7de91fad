"""The sweep's leaderboard: the best runs by objective, then the failures with their reasons.

Pure text from results.csv rows; the end-of-sweep callback and `hpsearch.report` print it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hpsearch.results_table import DONE


def objective_mode(multirun_cfg: DictConfig | Mapping[str, Any] | None) -> str:
    """'max' or 'min': the app's objective.mode, else the sweeper's direction, else 'max'."""
    if multirun_cfg is None:
        return "max"
    cfg = (
        multirun_cfg
        if isinstance(multirun_cfg, DictConfig)
        else OmegaConf.create(dict(multirun_cfg))
    )
    mode = OmegaConf.select(cfg, "objective.mode", default=None)
    if mode in ("max", "min"):
        return str(mode)
    direction = OmegaConf.select(cfg, "hydra.sweeper.direction", default=None)
    return "min" if str(direction).startswith("min") else "max"


def objective(row: Mapping[str, str]) -> float | None:
    try:
        value = float(row.get("objective", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def ranked(rows: Sequence[Mapping[str, str]], mode: str) -> list[Mapping[str, str]]:
    """Finished rows with an objective, best first."""
    done = [r for r in rows if r.get("status") in DONE and objective(r) is not None]
    return sorted(done, key=lambda r: objective(r) or 0.0, reverse=mode == "max")


def leaderboard(
    rows: Sequence[Mapping[str, str]], params: Sequence[str], mode: str, top: int = 10
) -> str:
    """A plain-text table of the `top` best runs, then every failure and its reason."""
    best = ranked(rows, mode)[:top]
    failed = [r for r in rows if r.get("status") not in DONE]
    lines = [
        f"Leaderboard ({mode} objective): {len(ranked(rows, mode))} finished, "
        f"{len(failed)} failed or unfinished, {len(rows)} jobs"
    ]
    if best:
        header = ["rank", "objective", *params, "test_accuracy", "time_s", "run_dir"]
        table = [
            [
                str(i + 1),
                f"{objective(r):.4f}",
                *(r.get(p, "") for p in params),
                _fmt(r.get("test_accuracy", "")),
                _fmt(r.get("wall_time_s", ""), 1),
                r.get("run_dir", ""),
            ]
            for i, r in enumerate(best)
        ]
        lines += _align([header, *table])
    for r in failed:
        setting = ",".join(f"{p}={r.get(p, '')}" for p in params)
        lines.append(
            f"  {r.get('status', '?').upper():<11} job {r.get('job', '?')} "
            f"{setting}: {r.get('error', '') or 'no reason recorded'}"
        )
    return "\n".join(lines)


def _fmt(value: str, digits: int = 4) -> str:
    try:
        return f"{float(value):.{digits}f}"
    except ValueError:
        return value


def _align(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
