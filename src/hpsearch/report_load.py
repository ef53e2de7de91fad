"""A sweep's report, read from its dir: the rows of results.csv, the swept parameters, the
objective's metric and direction (multirun.yaml, else a run dir's .hydra/, else what the user
says: `hpsearch-report --mode min`), each run's learning curve; and which sweep `latest` is."""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from hpsearch.report_axes import Sweep
from hpsearch.report_curves import load_curves
from hpsearch_launcher.results import (
    DONE,
    FILENAME,
    SUPERSEDED,
    ResultsFileError,
    ResultsTable,
    objective,
    summary_options,
)


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


def load_sweep(sweep_dir: Path, mode: str | None = None) -> Sweep:
    """The sweep's rows, swept params and objective; ReportError when there is nothing to show.
    `mode` (max or min), given, says which way the objective is better, over the config."""
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
        mode=mode or objective_mode(cfg),
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
