"""Hydra's Optuna sweeper as an app's configs name it, found by hpsearch in the app's own config
files: the class spelled out in `hydra.sweeper._target_` (lightning-hydra-template's
`hparams_search/*.yaml`), and an app-level `hydra/sweeper/optuna.yaml` (Hydra's "automatic schema
matching"), which `hydra/sweeper=hpsearch` does not read.

Light on purpose (the standard library and OmegaConf): the plugin's hook imports it in every
Hydra process that sweeps, and `hpsearch-migrate` reads the same names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

OPTUNA_TARGET = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
# A YAML line that names Hydra's class: `_target_: ...OptunaSweeper`, quoted or not.
TARGET_LINE = re.compile(r"^\s*_target_:\s*['\"]?" + re.escape(OPTUNA_TARGET) + r"['\"]?\s*(#.*)?$")
# The app-level sweeper file Hydra's sweeper reads by its name, and what it becomes for hpsearch:
# any other name than `hpsearch` (which would shadow, and then extend, itself) or `optuna`.
APP_SWEEPER_FILE = "hydra/sweeper/optuna.yaml"
RENAMED_SWEEPER_FILE = "hydra/sweeper/search.yaml"
RENAMED_DEFAULTS = "defaults: [hpsearch, _self_]"  # its own entries between: `override sampler: x`


def target_line(text: str) -> int | None:
    """The 1-based number of the first line of `text` that names Hydra's OptunaSweeper."""
    for number, line in enumerate(text.splitlines(), start=1):
        if TARGET_LINE.match(line):
            return number
    return None


def config_dirs(config: Any) -> list[Path]:
    """The app's config directories (its `file://` config sources) that exist."""
    sources = OmegaConf.select(config, "hydra.runtime.config_sources", default=None) or []
    dirs = [Path(str(s["path"])) for s in sources if s.get("schema") == "file" and s.get("path")]
    return [d for d in dirs if d.is_dir()]


def chosen_files(config: Any) -> list[Path]:
    """The app's config files this run composed, as far as the config tells: the primary config
    and each chosen option of the app's own groups (not Hydra's)."""
    names = []
    primary = OmegaConf.select(config, "hydra.job.config_name", default=None)
    if primary:
        names.append(str(primary))
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None) or {}
    names += [f"{g}/{o}" for g, o in choices.items() if o and not str(g).startswith("hydra/")]
    found = []
    for folder in config_dirs(config):
        for name in names:
            for suffix in ("", ".yaml", ".yml"):
                path = folder / f"{name}{suffix}"
                if path.is_file() and path not in found:
                    found.append(path)
    return found


def where_target_is(config: Any) -> str:
    """`file:line` of the chosen config that spells out Hydra's OptunaSweeper; else a phrase."""
    for path in chosen_files(config):
        line = target_line(path.read_text(errors="replace"))
        if line is not None:
            return f"{path}:{line}"
    return "the app's config"


def unread_sweeper_file(config: Any) -> str | None:
    """Where `hydra/sweeper=hpsearch` itself is chosen and the app has its own
    `hydra/sweeper/optuna.yaml`, whose settings it would not read: the refusal's line."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None) or {}
    path = app_sweeper_file(config) if choices.get("hydra/sweeper") == "hpsearch" else None
    if path is None:
        return None
    renamed = path.parent / Path(RENAMED_SWEEPER_FILE).name
    return (
        f"{path}: hydra/sweeper=hpsearch does not read this file (Hydra's Optuna sweeper read it "
        f"by its name): rename it {renamed}, give it `{RENAMED_DEFAULTS}` (a `sampler: x` entry "
        "of its own as `override sampler: x` between), delete its `_target_:` line, and choose "
        f"it instead of hpsearch (`override hydra/sweeper: {renamed.stem}`); `hpsearch-migrate "
        f"{path.parents[2]}` shows the change"
    )


def app_sweeper_file(config: Any) -> Path | None:
    """The app's own `hydra/sweeper/optuna.yaml`, if one of its config dirs holds it."""
    for folder in config_dirs(config):
        for suffix in (".yaml", ".yml"):
            path = folder / Path(APP_SWEEPER_FILE).with_suffix(suffix)
            if path.is_file():
                return path
    return None
