"""What the sweep records of each job: its results.csv row, its config's identity."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hpsearch.results_table import METRICS

from ._naming import split_override, unquote


def task_config(sweep_config: DictConfig) -> DictConfig:
    """The job's config as its task sees it: the hydra node removed."""
    cfg = OmegaConf.create(OmegaConf.to_container(sweep_config, resolve=False))
    assert isinstance(cfg, DictConfig)
    with read_write(cfg), open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def config_hash(sweep_config: DictConfig) -> str:
    """A job's identity across runs of a sweep: the hash of its resolved task config."""
    cfg = task_config(sweep_config)
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception:  # an interpolation only the job can resolve: hash what is written
        data = OmegaConf.to_container(cfg, resolve=False)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def final_metrics(run_dir: Path) -> dict[str, float]:
    """The `final` metrics a task wrote to metrics.json (hpsearch's trainer does), if any."""
    try:
        final = json.loads((run_dir / "metrics.json").read_text()).get("final", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return {k: float(v) for k, v in final.items() if k in METRICS and _is_number(v)}


def as_objective(value: Any) -> float | None:
    """The task's return value as a number for the table, or None (a dict, a string...)."""
    return float(value) if _is_number(value) and math.isfinite(float(value)) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def job_row(
    *,
    num: int,
    status: str,
    objective: float | None,
    device: str,
    started: float,
    ended: float,
    attempts: int,
    run_dir: Path,
    config_hash: str,
    error: str = "",
) -> dict[str, Any]:
    """One results.csv row; `started` and `ended` are wall-clock epoch seconds."""
    return {
        "job": num,
        "status": status,
        "objective": "" if objective is None else objective,
        **final_metrics(run_dir),
        "gpu": device,
        "start": _iso(started),
        "end": _iso(ended),
        "wall_time_s": round(ended - started, 3),
        "attempts": attempts,
        "run_dir": str(run_dir),
        "config_hash": config_hash,
        "error": error,
    }


def swept_params(overrides: list[str], keys: set[str]) -> Mapping[str, str]:
    pairs = (split_override(o) for o in overrides)
    return dict(sorted((k, "" if v is None else unquote(v)) for k, v in pairs if k in keys))


def _iso(epoch_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch_seconds))
