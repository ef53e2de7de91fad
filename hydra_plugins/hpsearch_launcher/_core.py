"""launch(): plan the sweep, run each job in its own process on its slot, collect JobReturns.

Data flows one way: settings -> plan (devices, slots, names, environments) -> processes ->
JobReturns in input order, with results.csv rewritten as each job ends.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, configure_log, setup_globals
from omegaconf import DictConfig, OmegaConf

from hpsearch import gpu_env
from hpsearch.leaderboard import leaderboard, objective_mode
from hpsearch.results_table import ResultsTable

from ._jobs import compose_jobs
from ._plan import CPU, slots_per_device, sweep_devices
from ._process import LokyBackend
from ._settings import parse_settings
from ._sweep import Sweep

log = logging.getLogger("hpsearch.launcher")

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def launch(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[JobReturn]:
    setup_globals()
    config: DictConfig = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    settings = parse_settings(launcher.params)
    nvml_ids = gpu_env.nvml_gpu_ids()  # asked once: an NVML session per call
    devices = sweep_devices(settings, os.environ, lambda: nvml_ids)
    if settings.gpus and not nvml_ids:
        log.warning(
            "hpsearch: no NVIDIA driver (NVML) here to check hydra.launcher.gpus=%s "
            "against: jobs get those CUDA_VISIBLE_DEVICES as given",
            list(settings.gpus),
        )
    slots = slots_per_device(settings, devices)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    table = ResultsTable.load(sweep_dir)
    if launcher.job_offset is None:
        # A sweep resumed in the same dir numbers its jobs after the earlier run's.
        launcher.job_offset = table.max_job() + 1 if settings.resume else 0
    jobs = compose_jobs(
        launcher,
        job_overrides,
        launcher.job_offset + initial_job_idx,
        table.rows if settings.resume else {},
    )
    kind = "CPU" if devices == (CPU,) else "GPU"
    on = kind if devices == (CPU,) else f"GPU {','.join(devices)}"
    log.info(
        "hpsearch: %d jobs on %s, %d at a time per %s; sweep dir %s",
        len(jobs),
        on,
        slots,
        kind,
        sweep_dir,
    )
    sweep = Sweep(jobs, settings, devices, slots, LokyBackend(), table, launcher)
    returns = sweep.run()
    if sweeper_stops(config, sweep.state.failed, len(jobs)):
        # The sweeper is about to raise the first failure: show the whole picture first (the
        # end-of-sweep callback that prints it otherwise will not run).
        log.info(
            "\n%s", leaderboard(list(table.rows.values()), table.params, objective_mode(config))
        )
    return returns


def sweeper_stops(config: DictConfig, failed: int, total: int) -> bool:
    """Whether the sweeper will raise on this batch's failures: Hydra's basic sweeper on any;
    Optuna's when they exceed its max_failure_rate; other sweepers: assume not."""
    if not failed:
        return False
    if OmegaConf.select(config, "hydra.sweeper._target_") == BASIC_SWEEPER:
        return True
    rate = OmegaConf.select(config, "hydra.sweeper.max_failure_rate", default=None)
    return rate is not None and failed / total > float(rate)
