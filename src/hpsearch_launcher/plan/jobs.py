"""The jobs of one launch() call: composed, checked and named in the parent, before any starts.

A `Job` is what the job *is* (its overrides, config, identity, name, swept values), fixed here;
what happens to it while the sweep runs lives in the scheduling loop's `Run`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from .compose import Composer
from .naming import HYDRA_DEFAULT_SUBDIR, run_dir_name, split_override, varying_keys
from .subdir import subdir_chosen


class JobConfigError(CompactHydraException):
    """A job's config failed the task's preflight check: raised before any job starts."""


@dataclass(frozen=True)
class Job:
    index: int  # position in this launch() call's input
    num: int  # hydra.job.num
    overrides: tuple[str, ...]
    config: DictConfig  # the composed sweep config, hydra node included
    config_hash: str  # identity across runs of a sweep: what resume matches on
    params: Mapping[str, str]  # the swept parameters' values: results.csv columns
    name: str  # run dir name from the overrides ("" when the user chose hydra.sweep.subdir)
    previous: Mapping[str, str] | None = None  # its finished row from an earlier run (resume)

    @property
    def label(self) -> str:
        """How the console names the job: its run's name."""
        if self.previous is not None:
            return Path(self.previous.get("run_dir", "")).name
        return self.name or str(self.config.hydra.sweep.subdir)


Preflight = Callable[[DictConfig], None]


class JobFactory:
    """Makes a sweep's jobs one at a time, as they are needed: composed, checked, named.

    `composer`: composes each job of the sweep (its config, Hydra's loader); `preflight`:
    the task's own check of a job's config (raises ValueError); `keys`: the swept keys, which
    name run dirs and become results.csv columns. `finished`: earlier rows that finished, by
    config hash; each is matched to at most one job (a sweep may hold the same config twice:
    both are resumed only if both finished before). Nothing is created on disk.
    """

    def __init__(
        self,
        composer: Composer,
        preflight: Preflight | None,
        keys: set[str],
        finished: Mapping[str, Iterable[Mapping[str, str]]],
    ) -> None:
        self.keys = keys
        self.preflight = preflight
        self.name_runs = subdir_is_default(composer.master, composer.loader)
        self.unused = {h: list(rows) for h, rows in finished.items()}
        self.composer = composer

    def make(self, index: int, overrides: Sequence[str], num: int) -> Job:
        """The job at `index` of its batch (or the stream's), numbered `num` if it is new; one
        that finished in an earlier run keeps that run's number (results.csv and the console
        then agree)."""
        sweep_hydra = HydraConfig.instance().cfg  # put back below: the job's is set to resolve
        sweep_config = self.composer.compose(overrides)
        try:
            _number(sweep_config, num)
            digest = config_hash(sweep_config)
            earlier = self.unused.get(digest)
            previous = earlier.pop(0) if earlier else None
            if previous is not None:  # resumed: results.csv and the console keep its number
                num = int(previous["job"])
                _number(sweep_config, num)
            name = run_dir_name(overrides, self.keys, num)
            _preflight(self.preflight, sweep_config, f"job {num} ({name})")
        finally:
            HydraConfig.instance().cfg = sweep_hydra
        return Job(
            index=index,
            num=num,
            overrides=tuple(overrides),
            config=sweep_config,
            config_hash=digest,
            params=swept_params(overrides, self.keys),
            name=name if self.name_runs else "",
            previous=previous,
        )


def compose_jobs(
    composer: Composer,
    preflight: Preflight | None,
    job_overrides: Sequence[Sequence[str]],
    first_num: int,
    finished: Mapping[str, Iterable[Mapping[str, str]]],
) -> list[Job]:
    """Every job of a batch, made and checked before any starts (a bad value anywhere stops
    the sweep first); the keys that vary across the batch name them. A resumed job keeps its
    earlier row's number; the others are numbered on from `first_num`, in order, with no gaps
    where resumed jobs are."""
    keys = varying_keys(job_overrides, swept_keys(composer.master))
    factory = JobFactory(composer, preflight, keys, finished)
    jobs = []
    try:
        for index, overrides in enumerate(job_overrides):
            jobs.append(factory.make(index, overrides, first_num))
            first_num += jobs[-1].previous is None
    finally:
        composer.drop_checked()
    return jobs


def _number(sweep_config: DictConfig, num: int) -> None:
    """Make `num` the job's hydra.job.num (and id), and let ${hydra:...} resolve for it."""
    with read_write(sweep_config.hydra), open_dict(sweep_config):  # set read-only below
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{num}"
        sweep_config.hydra.job.num = num
    _hydra_resolves_in(sweep_config)


def _hydra_resolves_in(sweep_config: DictConfig) -> None:
    """What HydraConfig.set_config does for ${hydra:...}, without its copy of the whole Hydra
    node (a copy per job was a third of a job's making): the node read-only, and HydraConfig
    reading the job's own (`HydraConfig.get()` is `cfg.hydra`; set_config's copy kept the
    job's config as its parent, so both resolve alike)."""
    OmegaConf.set_readonly(sweep_config.hydra, True)
    HydraConfig.instance().cfg = sweep_config  # type: ignore[assignment]


def sweep_dir(job: Job) -> Path:
    return Path(str(job.config.hydra.sweep.dir))


def run_dir(job: Job) -> Path:
    """The run dir its config names (hydra.sweep.subdir as the user set it, or Hydra's)."""
    return sweep_dir(job) / str(job.config.hydra.sweep.subdir)


def _preflight(check: Preflight | None, sweep_config: DictConfig, job: str) -> None:
    """The task's own checks (a `preflight` attribute of the task function), run here so a
    bad value anywhere in the sweep stops it before the first job starts."""
    if check is None:
        return
    try:
        check(sweep_config)
    except ValueError as err:
        raise JobConfigError(f"{job}: {err}") from None


def task_config(sweep_config: DictConfig) -> DictConfig:
    """The job's config as its task sees it: the hydra node removed."""
    cfg = OmegaConf.create(OmegaConf.to_container(sweep_config, resolve=False))
    assert isinstance(cfg, DictConfig)
    with read_write(cfg), open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def config_hash(sweep_config: DictConfig) -> str:
    """A job's identity across runs of a sweep: the hash of its resolved task config (every
    top-level key but `hydra`), read in place rather than copied: this runs for every job."""
    keys = [str(k) for k in sweep_config if k != "hydra"]
    try:
        data = {k: _value(sweep_config, k, resolve=True) for k in keys}
    except Exception:  # an interpolation only the job can resolve: hash what is written
        data = {k: _value(sweep_config, k, resolve=False) for k in keys}
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _value(cfg: DictConfig, key: str, resolve: bool) -> Any:
    node = cfg._get_node(key)
    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=resolve)  # type: ignore[arg-type]
    if OmegaConf.is_missing(cfg, key):
        return "???"
    return cfg[key] if resolve else node._value()  # type: ignore[union-attr]


def swept_params(overrides: Sequence[str], keys: set[str]) -> dict[str, str]:
    pairs = (split_override(o) for o in overrides)
    return dict(sorted((k, "" if v is None else v) for k, v in pairs if k in keys))


def subdir_is_default(config: DictConfig, config_loader: Any) -> bool:
    """Name runs from their overrides only while hydra.sweep.subdir is Hydra's untouched
    default: set anywhere by the user (even to that value), it is theirs."""
    raw = OmegaConf.to_container(config.hydra.sweep, resolve=False)
    return (
        isinstance(raw, dict)
        and raw.get("subdir") == HYDRA_DEFAULT_SUBDIR
        and not subdir_chosen(config, config_loader)
    )


def _raw_list(node: Any) -> list[str]:
    """A list of override strings as typed: iterating the ListConfig would resolve `${...}`."""
    items = OmegaConf.to_container(node, resolve=False)
    assert isinstance(items, list)
    return [str(item) for item in items]


def swept_keys(config: DictConfig) -> list[str]:
    """Keys the sweep varies: sweep syntax on the command line, or the sweeper's params."""
    parsed = OverridesParser.create().parse_overrides(_raw_list(config.hydra.overrides.task))
    keys = [split_override(o.input_line)[0] for o in parsed if o.is_sweep_override()]
    params = OmegaConf.select(config, "hydra.sweeper.params")
    return keys + ([str(k) for k in params] if isinstance(params, DictConfig) else [])
