"""What hpsearch checks before anything runs: every job's config (the launcher calls `preflight`
for each one before the first starts), and a single run's before Hydra makes its dir.

Beyond `validate_config`, the device: a device the run could not get fails it before the
first job, not job by job. GPUs are asked of NVML and CUDA_VISIBLE_DEVICES, never of
TensorFlow, which the parent does not import.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from hpsearch.errors import ConfigError, exit_with
from hpsearch.validate import validate_config
from hpsearch_launcher.api import (
    OutputDirError,
    dirs_to_make,
    nvml_gpu_ids,
    parse_gpus,
    visible_gpus,
)


def preflight(cfg: DictConfig) -> None:
    """A job's config, hydra node included: ConfigError for a bad value or device."""
    validate_config(cfg)
    problem = device_problem(cfg, os.environ, _nvml_gpu_ids)
    if problem is not None:
        raise ConfigError(problem)


@functools.cache
def _nvml_gpu_ids() -> list[str]:
    """Asked once per process: a sweep's preflight runs for each of its jobs."""
    return nvml_gpu_ids()


def device_problem(
    cfg: DictConfig, environ: Mapping[str, str], nvml_ids: Callable[[], list[str]]
) -> str | None:
    """Why `device` cannot be had as configured (None when it can): in a sweep, given the
    launcher's GPUs; in a single run, given this process's GPUs."""
    device = cfg.device.type
    if device not in ("cpu", "gpu"):
        return None  # auto: whatever the job gets
    if OmegaConf.select(cfg, "hydra.mode") != RunMode.MULTIRUN:
        # The job's hydra.job.env_set, applied around the task, counts too.
        env_set = OmegaConf.select(cfg, "hydra.job.env_set", default=None) or {}
        job_environ = {**environ, **{str(k): str(v) for k, v in env_set.items()}}
        return no_gpu(job_environ, nvml_ids) if device == "gpu" else None
    launcher = cfg.hydra.launcher
    if launcher.get("backend", "local") != "local":
        return None  # the Ray cluster's GPUs: its own to assign
    given = launcher.get("gpus", "auto")
    gpus = parse_gpus(OmegaConf.to_container(given) if OmegaConf.is_config(given) else given)
    if device == "cpu":
        if gpus:
            return (
                f"device=cpu with hydra.launcher.gpus=[{','.join(gpus)}]: each job would take "
                "a GPU slot and train on the CPU; drop hydra.launcher.gpus (device=cpu runs "
                "hydra.launcher.n_jobs jobs at a time on the CPU), or use device=auto"
            )
        return None
    if gpus == ():
        return (
            "device=gpu with hydra.launcher.gpus=[]: the launcher runs every job on the CPU; "
            "use hydra.launcher.gpus=auto (or GPU ids), or device=cpu"
        )
    return no_gpu(environ, nvml_ids) if gpus is None else None  # listed: the launcher's check


def no_gpu(environ: Mapping[str, str], nvml_ids: Callable[[], list[str]]) -> str | None:
    """device=gpu where this process sees no GPU: why, and what to do instead."""
    if visible_gpus(environ, nvml_ids):
        return None
    if "CUDA_VISIBLE_DEVICES" in environ:
        why = f"CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']!r} hides every GPU"
    else:
        why = "no GPU found here (no NVIDIA driver answers, and CUDA_VISIBLE_DEVICES is unset)"
    return f"device=gpu: {why}; use device=auto (the CPU when there is no GPU) or device=cpu"


class RunStartCheck(Callback):
    """A single run, checked before Hydra makes its dir: that the dir can be made, and the
    config (as `preflight`), so a refused run leaves nothing behind."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            dirs_to_make(Path(str(config.hydra.run.dir)), "hydra.run.dir")
            HydraConfig.instance().set_config(config)  # lets ${hydra:...} in the config resolve
            preflight(config)
        except (OutputDirError, ConfigError) as err:
            exit_with(err)
