"""Each job's config, composed as Hydra's `load_sweep_config` would, at a tenth of its cost.

Hydra composes every job from scratch: its defaults tree, every YAML merge (~50 ms a job
here; a 1,000-job sweep would wait almost a minute before its first job). But a job's
defaults tree depends only on its *config group* overrides (`model=cnn`); its other
overrides (`lr=0.01`) are applied afterwards to the composed config. So each distinct set of
group overrides is composed once, by Hydra, as a template, kept pickled; a job is a copy of its
template (unpickled: a fifth of a deep copy's cost, its Hydra node being most of the config)
with its value overrides applied the way Hydra applies them, and its own `hydra.overrides.task`
and `hydra.job.override_dirname`; each distinct override is parsed once. The first job of every
template is also composed by Hydra itself and compared: on any difference (or any override this
does not handle) the sweep goes back to Hydra's own path for every job.

Hydra's sweepers check a batch before they launch it (`Sweeper.validate_batch_is_legal`: Hydra's
own composition of every job, ~50 ms each, a minute of one core for 1,000 jobs before the
first starts), then the launcher composes every job again. `serve_sweeper_checks` has that
check compose through the Composer, and keeps what it composed for the job itself.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import cloudpickle
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger("hpsearch.launcher")


class Composer:
    def __init__(self, config_loader: Any, master: DictConfig) -> None:
        self.loader = config_loader
        self.master = master
        self.parser = OverridesParser.create()
        self.templates: dict[tuple[str, ...], bytes] = {}  # pickled, by group overrides
        self.parsed: dict[str, tuple[Override, bool]] = {}  # an override, and if it is a group
        self.fast = True
        self.controller = _controller(master)
        # Hydra's own, also where an earlier Composer serves this loader's checks.
        load = config_loader.load_sweep_config
        self._load = getattr(load, "hydras", load)
        # Configs the sweeper's check composed, by overrides, each for one job (a sweep may
        # hold the same overrides twice: each job gets its own config).
        self._checked: dict[tuple[str, ...], list[DictConfig]] = {}

    def serve_sweeper_checks(
        self, guard: Callable[[], AbstractContextManager[object]] = nullcontext
    ) -> None:
        """Compose what the sweeper checks of this sweep (its loader's load_sweep_config of
        the master config) here, inside `guard()` (the launcher's refusal of a job config
        Hydra cannot compose), and keep each config for the job's compose(); any other config
        still goes to Hydra's own load_sweep_config."""
        self.loader.load_sweep_config = SweeperChecks(self, self._load, guard)

    def check(self, overrides: Sequence[str]) -> DictConfig:
        """The sweeper checks a job: its config composed, and kept for the job's compose()."""
        cfg = self._composed(overrides)
        self._checked.setdefault(tuple(overrides), []).append(cfg)
        return cfg

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The job's sweep config (its hydra node included), before hydra.job.num is set: the
        one the sweeper's check composed for it, if it did."""
        kept = self._checked.get(tuple(overrides))
        cfg = kept.pop() if kept else self._composed(overrides)
        self._same_controller(cfg)
        return cfg

    def drop_checked(self) -> None:
        """Forget what the sweeper checked and no job took (its batch was composed)."""
        self._checked.clear()

    def _composed(self, overrides: Sequence[str]) -> DictConfig:
        cfg = None
        if self.fast:
            try:
                cfg = self._from_template(list(overrides))
            except Exception as err:  # anything unforeseen: Hydra's own path, from now on
                self._give_up(f"{type(err).__name__}: {err}")
        if cfg is None:
            cfg = self._load(self.master, list(overrides))
        return cfg

    def _same_controller(self, cfg: DictConfig) -> None:
        """A job may not change the launcher or the sweeper (a swept `device=cpu` that sets
        hydra.launcher.gpus): the sweep runs with the settings it started with. Hydra 1.4's
        load_sweep_config refuses it; this refuses it on 1.3 too, in 1.4's words."""
        mine = _controller(cfg)
        for node in ("launcher", "sweeper"):
            if mine[node] != self.controller[node]:
                raise ConfigCompositionException(
                    f"'hydra.{node}' must be configured before the sweep starts, but a swept "
                    "job config changed it. Configure it in the primary config or from the "
                    "command line."
                )

    def _from_template(self, overrides: list[str]) -> DictConfig:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        pairs = [self._parse(o) for o in overrides]
        parsed = [o for o, _ in pairs]
        if any(o.is_sweep_override() or o.is_hydra_override() for o in parsed):
            raise ValueError("a sweep or hydra override: Hydra's own checks must see it")
        key = tuple(str(o.input_line) for o, group in pairs if group)
        first = key not in self.templates
        if first:  # cloudpickle: a structured config's class from __main__ pickles too
            template = self._load(self.master, list(key))
            self.templates[key] = cloudpickle.dumps(template)
        cfg = pickle.loads(self.templates[key])
        values = [o for o, group in pairs if not group]
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task = list(overrides)
            _set_override_dirname(cfg, parsed)
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
        if first:
            self._check(cfg, overrides)
        return cfg

    def _parse(self, override: str) -> tuple[Override, bool]:
        """An override as Hydra parses it, and whether it chooses a config group; parsed once
        (a sweep repeats its values across jobs; the parsed override is never changed)."""
        if override not in self.parsed:
            (parsed,) = self.parser.parse_overrides([override])
            group = self.loader.repository.group_exists(parsed.key_or_group)
            self.parsed[override] = (parsed, group)
        return self.parsed[override]

    def _check(self, cfg: DictConfig, overrides: list[str]) -> None:
        """The template's first job, against Hydra's own composition of it."""
        theirs = self._load(self.master, overrides)
        if _plain(theirs) != _plain(cfg):
            raise ValueError(f"composed differently from Hydra for {overrides}")

    def _give_up(self, why: str) -> None:
        self.fast = False
        log.debug("hpsearch: composing each job with Hydra's load_sweep_config (%s)", why)


class SweeperChecks:
    """Hydra's loader's load_sweep_config while a Composer serves the sweeper's checks."""

    def __init__(
        self,
        composer: Composer,
        hydras: Callable[..., DictConfig],
        guard: Callable[[], AbstractContextManager[object]],
    ) -> None:
        self.composer = composer
        self.hydras = hydras
        self.guard = guard

    def __call__(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        if master_config is not self.composer.master:
            return self.hydras(master_config, sweep_overrides)
        with self.guard():
            return self.composer.check(sweep_overrides)

    def __reduce__(self) -> tuple[Any, ...]:
        """The loader goes to every job's process with Hydra's context: there it has Hydra's
        own method again (getattr runs before the loader's attributes are set back), and the
        sweep's composed configs are not pickled with it."""
        return (getattr, (self.composer.loader, "load_sweep_config"))


def _set_override_dirname(cfg: DictConfig, parsed: list[Override]) -> None:
    """hydra.job.override_dirname for the job's overrides, as Hydra 1.3 sets it at composition.
    On 1.4 it is `${hydra_override_dirname:}`, resolved from hydra.overrides.task: kept so."""
    try:
        from hydra._internal.config_loader_impl import get_overrides_dirname
    except ImportError:  # Hydra 1.4
        return
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=parsed,
        kv_sep=dirname.kv_sep,
        item_sep=dirname.item_sep,
        exclude_keys=dirname.exclude_keys,
    )


def _controller(cfg: DictConfig) -> dict[str, Any]:
    """The launcher's and the sweeper's config nodes, as written (interpolations unresolved)."""
    return {
        node: OmegaConf.to_container(cfg.hydra[node], resolve=False)
        for node in ("launcher", "sweeper")
    }


def _plain(cfg: DictConfig) -> Any:
    data = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(data, dict)
    data["hydra"]["runtime"].pop("cwd", None)
    return data
