"""The launcher's settings, checked before any job starts. Pure: no processes, no GPUs."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hydra.errors import CompactHydraException

# Headroom left on each GPU for the CUDA context and the allocator's fragmentation.
DEFAULT_MEMORY_SHARE = 0.9
# What a job retried alone after running out of memory gets: its whole GPU, but the headroom.
WHOLE_GPU_FRACTION = 0.95
_GPU_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


class LauncherSettingsError(CompactHydraException):
    """A bad hydra.launcher.* value: the message names the value, the rule and the fix.
    (Compact: Hydra prints the message alone, no traceback.)"""


@dataclass(frozen=True)
class LauncherSettings:
    gpus: tuple[str, ...] | None  # None: "auto", resolved when the sweep starts
    jobs_per_gpu: int
    memory_fraction: float | None  # None: derived per GPU count in `fraction`
    n_jobs: int
    timeout: float | None
    allow_growth: bool
    env: Mapping[str, str] = field(default_factory=dict)
    resume: bool = True
    max_oom_retries: int = 1
    max_retries: int = 0

    @property
    def fraction(self) -> float:
        """Each job's share of its GPU's memory."""
        if self.memory_fraction is not None:
            return self.memory_fraction
        return round(DEFAULT_MEMORY_SHARE / self.jobs_per_gpu, 4)


def _fail(key: str, value: Any, rule: str, example: str) -> LauncherSettingsError:
    return LauncherSettingsError(
        f"hydra.launcher.{key}={value!r}: {rule} (e.g. hydra.launcher.{example})"
    )


def _integer(key: str, value: Any, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(key, value, "must be an integer >= 1", example)
    return value


def _count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(key, value, "must be an integer >= 0", f"{key}=1")
    return value


def parse_gpus(value: Any) -> tuple[str, ...] | None:
    """ "auto" -> None; a list (or one id) -> the ids as strings, checked."""
    if value == "auto":
        return None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    ids: list[str] = []
    for item in items:
        text = str(item).strip()
        is_index = isinstance(item, int) and not isinstance(item, bool) and item >= 0
        if not (is_index or text.isdigit() or _GPU_UUID.match(text)):
            raise _fail(
                "gpus",
                value,
                f"{item!r} is not a GPU id (an index >= 0 or a GPU-/MIG- UUID, as "
                "nvidia-smi -L lists them; or auto)",
                "gpus=[0,1]",
            )
        ids.append(str(int(text)) if text.isdigit() else text)
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise _fail(
            "gpus",
            value,
            f"GPU {', '.join(duplicates)} listed twice; "
            "use jobs_per_gpu to run several jobs on one GPU",
            "gpus=[0,1] hydra.launcher.jobs_per_gpu=2",
        )
    return tuple(ids)


def parse_settings(params: Mapping[str, Any]) -> LauncherSettings:
    """Check hydra.launcher's values; raise LauncherSettingsError on the first bad one."""
    jobs_per_gpu = _integer("jobs_per_gpu", params.get("jobs_per_gpu", 1), "jobs_per_gpu=2")
    fraction = params.get("memory_fraction")
    if fraction is not None:
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not (0 < fraction <= 1)
        ):
            raise _fail(
                "memory_fraction",
                fraction,
                "must be a number in (0, 1] or null",
                "memory_fraction=0.45",
            )
        if jobs_per_gpu * fraction > 1 + 1e-9:
            raise _fail(
                "memory_fraction",
                fraction,
                f"jobs_per_gpu x memory_fraction = {jobs_per_gpu} x {fraction} = "
                f"{jobs_per_gpu * fraction:g} > 1: the jobs on one GPU would not fit; "
                f"use at most {1 / jobs_per_gpu:.3g}",
                f"memory_fraction={DEFAULT_MEMORY_SHARE / jobs_per_gpu:.3g}",
            )
    n_jobs = params.get("n_jobs")
    n_jobs = os.cpu_count() or 1 if n_jobs is None else _integer("n_jobs", n_jobs, "n_jobs=4")
    timeout = params.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise _fail(
            "timeout", timeout, "must be a number of seconds > 0, or null for none", "timeout=3600"
        )
    env = params.get("env") or {}
    return LauncherSettings(
        gpus=parse_gpus(params.get("gpus", "auto")),
        jobs_per_gpu=jobs_per_gpu,
        memory_fraction=None if fraction is None else float(fraction),
        n_jobs=n_jobs,
        timeout=None if timeout is None else float(timeout),
        allow_growth=bool(params.get("allow_growth", True)),
        env={str(k): str(v) for k, v in env.items()},
        resume=bool(params.get("resume", True)),
        max_oom_retries=_count("max_oom_retries", params.get("max_oom_retries", 1)),
        max_retries=_count("max_retries", params.get("max_retries", 0)),
    )
