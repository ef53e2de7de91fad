"""The command line's keys checked against the app's config before Hydra sees them.

A key the trainer never reads is refused in one line naming the nearest known key, before any
dir is made: `learning_rate=1e-3` (Hydra's own refusal is seven lines, and a sweep's leaves its
multirun.yaml behind) and `+learning_rate=1e-3` (which Hydra accepts: every job would train with
it ignored). A key of the user's own code goes under `user` (`+user.note=baseline`): passed
through to the job's config, its metrics.json and TensorBoard, never read by the trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpsearch.errors import ConfigError
from hpsearch.overrides import parsed_overrides, swept_values
from hpsearch_launcher.api import dotted_keys, has_key, no_such_key, version_base_option

USER = "user"  # the config node whose keys are the user's own: added with +, never refused


def check_override_keys(args: list[str], config_dir: Path) -> None:
    """ConfigError for the first override whose key the composed config lacks (or, with `+`,
    already has), other than Hydra's own (`hydra.*`), a config group's and those under `user`."""
    overrides = [o for o in parsed_overrides(args) if not _is_hydras(o.key_or_group)]
    groups = [o for o in overrides if _is_group(o.key_or_group, config_dir)]
    values = [o for o in overrides if not _is_group(o.key_or_group, config_dir)]
    if not values:
        return
    configs = _composed(groups, config_dir)
    if not configs:
        return  # the config does not compose: Hydra says why, in its own words
    for override in values:
        key = override.key_or_group
        known = any(has_key(config, key) for config in configs)
        if key.split(".")[0] == USER:
            if not known and not (override.is_add() or override.is_force_add()):
                raise ConfigError(
                    f"{key}: no such key yet; add a key of your own with +: +{_line(override)}"
                )
        elif override.is_add() and known:
            raise ConfigError(
                f"+{key}: {key} is in the config already; set it without +: {_line(override)}"
            )
        elif not known:
            raise ConfigError(_no_such_key(override, dotted_keys(configs[0])))


def _no_such_key(override: Any, known: list[str]) -> str:
    """`learning_rate: no such key; did you mean lr? (a key for your own code:
    +user.learning_rate=1e-3)`."""
    key = override.key_or_group
    return f"{no_such_key(key, known)} (a key for your own code: +{USER}.{_line(override)})"


def _line(override: Any) -> str:
    """The override as typed, without its `+`/`++`/`~`."""
    return str(override.input_line).lstrip("+~")


def _is_group(key: str, config_dir: Path) -> bool:
    return (config_dir / key).is_dir()


def _is_hydras(key: str) -> bool:
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def _composed(groups: list[Any], config_dir: Path) -> list[Any]:
    """The app's config, plain (its `hydra` node left out), for the choices the command line
    gives its config groups: one config per value of a swept group (`model=mlp,cnn`), else
    one; [] where Hydra cannot compose it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    plain = [str(o.input_line) for o in groups if not o.is_sweep_override()]
    swept = [o for o in groups if o.is_sweep_override()]
    choices = [
        [*plain, f"{o.key_or_group}={value}"] for o in swept for value in swept_values(o) or []
    ] or [plain]
    configs: list[Any] = []
    try:
        with initialize_config_dir(config_dir=str(config_dir), **version_base_option()):
            for overrides in choices:
                config = OmegaConf.to_container(compose("config", overrides), resolve=False)
                configs.append(config)
    except Exception:  # not ours to judge: Hydra reports it when it composes the same
        return []
    return configs
