"""The jobs of one launch() call: composed, checked and named in the parent, before any starts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hpsearch.results_table import DONE

from ._naming import HYDRA_DEFAULT_SUBDIR, claim_run_dir, run_dir_name, split_override, varying_keys
from ._process import JobHandle
from ._record import config_hash, swept_params


class JobConfigError(CompactHydraException):
    """A job's config failed the task's preflight check: raised before any job starts."""


@dataclass
class Job:
    index: int  # position in this launch() call's input
    num: int  # hydra.job.num
    overrides: list[str]
    config: DictConfig  # the composed sweep config: hydra node included
    config_hash: str
    params: Mapping[str, str]  # the swept parameters' values: results.csv columns
    label: str = ""  # the run's name, shown on the console
    previous: Mapping[str, str] | None = None  # its finished row from an earlier run
    device: str = ""
    handle: JobHandle | None = None
    started: float = 0.0  # monotonic
    started_wall: float = 0.0
    deadline: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    attempts: int = 0  # runs started so far
    oom_attempts: int = 0  # of those, runs that ran out of memory
    whole: bool = False  # the next run gets its device alone (after running out of memory)
    errors: list[str] = field(default_factory=list)  # why earlier attempts failed

    @property
    def run_dir(self) -> Path:
        return Path(self.config.hydra.sweep.dir) / str(self.config.hydra.sweep.subdir)


def compose_jobs(
    launcher: Any,
    job_overrides: Sequence[Sequence[str]],
    first_num: int,
    finished: Mapping[str, Mapping[str, str]],
) -> list[Job]:
    """Compose and check every job, then claim run dirs for those that will run.

    `finished`: results rows by config hash; a job found there with a finished status is not
    run again (resume) and claims no directory.
    """
    config: DictConfig = launcher.config
    keys = varying_keys(job_overrides, swept_keys(config))
    jobs = []
    for index, overrides in enumerate(job_overrides):
        num = first_num + index
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(
            config, list(overrides)
        )
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{num}"
            sweep_config.hydra.job.num = num
        HydraConfig.instance().set_config(sweep_config)  # lets hydra.* interpolations resolve
        job = Job(
            index,
            num,
            list(overrides),
            sweep_config,
            config_hash(sweep_config),
            swept_params(list(overrides), keys),
        )
        name = run_dir_name(job.overrides, keys, num)
        _preflight(launcher.task_function, sweep_config, f"job {num} ({name})")
        row = finished.get(job.config_hash)
        if row is not None and row.get("status") in DONE:
            job.previous = row
        jobs.append(job)
    name_runs = subdir_is_default(config)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    for job in jobs:
        if name_runs and job.previous is None:
            name = claim_run_dir(sweep_dir, run_dir_name(job.overrides, keys, job.num))
            with read_write(job.config.hydra):
                job.config.hydra.sweep.subdir = name
        job.label = (
            Path(job.previous["run_dir"]).name
            if job.previous is not None
            else str(job.config.hydra.sweep.subdir)
        )
    return jobs


def _preflight(task_function: Any, sweep_config: DictConfig, job: str) -> None:
    """The task's own checks (a `preflight` attribute of the task function), run here so a
    bad value anywhere in the sweep stops it before the first job starts."""
    check = getattr(task_function, "preflight", None)
    if check is None:
        return
    try:
        check(sweep_config)
    except ValueError as err:
        raise JobConfigError(f"{job}: {err}") from None


def subdir_is_default(config: DictConfig) -> bool:
    """Name runs from their overrides unless the user chose hydra.sweep.subdir."""
    on_command_line = any(
        split_override(o)[0] == "hydra.sweep.subdir"
        for o in _raw_list(config.hydra.overrides.hydra)
    )
    raw = OmegaConf.to_container(config.hydra.sweep, resolve=False)
    return (
        not on_command_line and isinstance(raw, dict) and raw.get("subdir") == HYDRA_DEFAULT_SUBDIR
    )


def _raw_list(node: Any) -> list[str]:
    """A list of override strings as typed: iterating the ListConfig would resolve `${...}`."""
    items = OmegaConf.to_container(node, resolve=False)
    assert isinstance(items, list)
    return [str(item) for item in items]


def swept_keys(config: DictConfig) -> list[str]:
    """Keys the sweep varies: sweep syntax on the command line, or the sweeper's params."""
    parsed = OverridesParser.create().parse_overrides(_raw_list(config.hydra.overrides.task))
    keys = [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]
    params = OmegaConf.select(config, "hydra.sweeper.params")
    return keys + ([str(k) for k in params] if isinstance(params, DictConfig) else [])
