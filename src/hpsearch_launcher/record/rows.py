"""What the sweep records of each job: its results.csv cells, built from what the job returned
and the metrics.json it wrote, whatever their shape. Untrusted input: never raises."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..contract import METRICS_FILE
from ..finite import finite_float, is_number
from ..notices import Notices
from .table import STATUS, TAIL

log = logging.getLogger("hpsearch.launcher")

MAX_RETURN_CHARS = 100_000  # a longer return value is not stored (resume runs the job again)
RESERVED = frozenset({"job", STATUS, *TAIL})


def finite(value: Any) -> float | None:
    """`value` as a finite float (a number, or a numeric string), else None."""
    return finite_float(value) if is_number(value) or isinstance(value, str) else None


def return_columns(value: Any, num: int, notices: Notices) -> dict[str, float]:
    """The columns a return value gives: a number -> `objective`; a list or tuple of numbers ->
    `objective_0`..`objective_k`; a mapping -> one column per key holding a number."""
    if value is None:
        return {}
    if is_number(value):
        return {"objective": float(value)}
    if isinstance(value, (list, tuple)) and value and all(is_number(v) for v in value):
        return {f"objective_{i}": float(v) for i, v in enumerate(value)}
    if isinstance(value, Mapping):
        numbers = {_column(str(k)): float(v) for k, v in value.items() if is_number(v)}
        if len(numbers) < len(value):
            notices.warn(
                "return-mapping",
                f"job {num} returned a mapping with entries that are not numbers; only its "
                "numbers became results.csv columns",
            )
        return numbers
    notices.warn(
        "return-shape",
        f"job {num} returned a {type(value).__name__}, not a number, a list of numbers or a "
        "mapping of numbers: it is kept in results.csv's `return` column only",
    )
    return {}


TRAIN_TIME_S = "train_time_s"  # metrics.json's own top-level number: the task's training time


def final_metrics(run_dir: Path, num: int, notices: Notices) -> dict[str, float]:
    """The numbers in the `final` mapping of the job's metrics.json, if it wrote one, and its
    top-level `train_time_s` (the task's own timing, without the process's start-up: what
    compares configs, where wall_time_s counts a cold start's imports too)."""
    path = run_dir / METRICS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        notices.warn("metrics-json", f"job {num}'s {path} is not readable JSON ({err}): ignored")
        return {}
    final = data.get("final") if isinstance(data, dict) else None
    if not isinstance(final, Mapping):
        notices.warn(
            "metrics-final",
            f"job {num}'s {path} has no `final` mapping (got {type(final).__name__}): ignored",
        )
        return {}
    numbers = {_column(str(k)): float(v) for k, v in final.items() if is_number(v)}
    seconds = finite(data.get(TRAIN_TIME_S)) if is_number(data.get(TRAIN_TIME_S)) else None
    if seconds is not None and TRAIN_TIME_S not in numbers:
        numbers[TRAIN_TIME_S] = round(seconds, 3)
    return numbers


def stored_return(value: Any, num: int, notices: Notices) -> str:
    """The return value as JSON, lossless, for resume; "" when it cannot be stored that way
    (then a resumed sweep runs the job again rather than hand the sweeper something else)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        notices.warn(
            "return-json",
            f"job {num} returned a {type(value).__name__}, which JSON cannot hold: a resumed "
            "sweep will run such jobs again",
        )
        return ""
    if len(text) > MAX_RETURN_CHARS:
        notices.warn(
            "return-size",
            f"job {num} returned {len(text)} characters of JSON (over {MAX_RETURN_CHARS}): not "
            "stored; a resumed sweep will run such jobs again",
        )
        return ""
    return text


def loaded_return(row: Mapping[str, str]) -> Any:
    """What a finished job returned, from its row (the sweeper gets it back on resume)."""
    return json.loads(row["return"])


def _column(key: str) -> str:
    """A value's column name, kept apart from the fixed columns it would collide with."""
    return f"return_{key}" if key in RESERVED else key


def in_form_of(path: Path, like: str) -> str:
    """`path` written as `like` is: relative to the working directory when `like` is relative
    (and `path` is under it), absolute when `like` is; as given without a `like`. So one
    results.csv keeps one form of run_dir, however a later run was given its sweep dir (the
    resume hint gives it absolute)."""
    if not like:
        return str(path)
    absolute = Path(os.path.abspath(path))
    if Path(like).is_absolute():
        return str(absolute)
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:  # not under the working directory: only an absolute path says where
        return str(absolute)


def iso_time(epoch_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch_seconds))


LAST_STEP, LAST_VALUE = "last_step", "last_value"  # the job's last report (report(value, step))
PRUNED_STEP = "pruned_step"  # the step of the report a pruned job was pruned on


def last_report(row: Mapping[str, str]) -> tuple[int | None, float | None]:
    """The last step a job reported and its value, from its results.csv row."""
    step = finite(row.get(LAST_STEP, ""))
    return (None if step is None else int(step)), finite(row.get(LAST_VALUE, ""))
