"""Whether the user chose hydra.sweep.subdir: only Hydra's own, untouched default is ours to
replace with run dir names from the overrides.

Its value cannot tell: an app that wants numbered dirs may set `${hydra.job.num}`, Hydra's
default, in its own YAML. So the sweep's defaults list is computed again, as Hydra computed it
for the sweep's config, and every config in it that Hydra itself does not provide is looked
into for the key, at the package it is merged into. Cheap (a few ms; each config is read
once) and run once per launch().
"""

from __future__ import annotations

from typing import Any

from hydra.core.default_element import ResultDefault
from omegaconf import DictConfig, OmegaConf

from .naming import split_override

SUBDIR_KEY = "hydra.sweep.subdir"
HYDRA_PROVIDER = "hydra"  # the provider of Hydra's own configs (hydra/config, hydra/output/...)


def subdir_chosen(config: DictConfig, config_loader: Any) -> bool:
    """Whether hydra.sweep.subdir is set on the command line or in any of the app's configs
    (primary config, a config group, a --config-dir or hydra.searchpath YAML)."""
    typed = OmegaConf.to_container(config.hydra.overrides, resolve=False)  # as typed: no ${}
    assert isinstance(typed, dict)
    hydra_overrides, task_overrides = ([str(o) for o in typed[k]] for k in ("hydra", "task"))
    if any(split_override(o)[0] == SUBDIR_KEY for o in hydra_overrides):
        return True
    loaded = _loaded_configs(
        config_loader, config.hydra.job.config_name, hydra_overrides + task_overrides
    )
    return any(
        _sets_subdir(result.config, default.package)
        for default, result in loaded
        if result.provider != HYDRA_PROVIDER
    )


def _loaded_configs(
    config_loader: Any, name: str | None, overrides: list[str]
) -> list[tuple[ResultDefault, Any]]:
    """Every config Hydra merged into the sweep's config, with where it went, read through
    the same config sources (hydra.searchpath included) that Hydra used."""
    from hydra._internal.defaults_list import create_defaults_list

    # Private to hydra-core (pinned <1.4): the loader's own way to set up its search path.
    parsed, repo = config_loader._parse_overrides_and_create_caching_repo(name, overrides)
    defaults = create_defaults_list(
        repo=repo,
        config_name=name,
        overrides_list=parsed,
        prepend_hydra=True,
        skip_missing=True,  # as for a multirun: a swept group may be `???` until each job
    )
    loaded = []
    for default in defaults.defaults:
        if default.config_path is None:
            continue
        result = repo.load_config(default.config_path)
        if result is not None:
            loaded.append((default, result))
    return loaded


def _sets_subdir(node: Any, package: str | None) -> bool:
    """Whether a config merged at `package` ('' for the root) holds hydra.sweep.subdir."""
    if not isinstance(node, DictConfig):
        return False
    prefix = f"{package}." if package else ""
    if not SUBDIR_KEY.startswith(prefix):
        return False
    parent, _, leaf = SUBDIR_KEY.removeprefix(prefix).rpartition(".")
    holder = OmegaConf.select(node, parent, throw_on_missing=False) if parent else node
    return isinstance(holder, DictConfig) and leaf in holder
