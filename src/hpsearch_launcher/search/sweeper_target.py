"""`hydra/sweeper=hpsearch` chosen, `hydra.sweeper._target_` naming Hydra's OptunaSweeper: run
hpsearch's sweeper, with one warning line naming the file and the line to delete.

Configs copied from lightning-hydra-template spell out Hydra's class under `# @package _global_`;
merged after the `hydra/sweeper` group's node, it replaces hpsearch's `_target_`, and Hydra then
fails (`Unknown plugin class`, or Hydra's sweeper given hpsearch's settings). Hydra instantiates
the sweeper from `_target_` with no hook in between on either line (1.3, 1.4), so the plugin wraps
`Plugins.instantiate_sweeper` once: the wrapper changes nothing unless the sweeper's node is
hpsearch's (its type: the `hydra/sweeper=hpsearch` node, or a config extending it) and its
`_target_` is Hydra's OptunaSweeper's. Light: the plugin's scan imports it in every Hydra process.
"""

from __future__ import annotations

import functools
import logging
from copy import deepcopy
from typing import Any

from hydra.core.plugins import Plugins
from omegaconf import OmegaConf, read_write

from .config import TARGET, HpsearchSweeperConf
from .hydra_optuna import OPTUNA_TARGET, where_target_is

log = logging.getLogger("hpsearch.sweeper")


def adopted(config: Any) -> Any:
    """`hydra.sweeper` with hpsearch's `_target_` where the node is hpsearch's but its target is
    Hydra's OptunaSweeper (a copy: Hydra 1.4 compares the sweep's node with each job's); None
    where nothing is to change."""
    node = OmegaConf.select(config, "hydra.sweeper", default=None)
    if node is None or OmegaConf.get_type(node) is not HpsearchSweeperConf:
        return None
    if OmegaConf.select(node, "_target_", default=None) != OPTUNA_TARGET:
        return None
    copy = deepcopy(node)  # keeps its parent: interpolations resolve as in the node
    with read_write(copy):
        copy._target_ = TARGET
    return copy


def warning(config: Any) -> str:
    return (
        f"hpsearch: {where_target_is(config)}: hydra.sweeper._target_ names Hydra's OptunaSweeper "
        "while hydra/sweeper=hpsearch is chosen: running hpsearch's sweeper; delete that "
        "`_target_:` line"
    )


def install() -> None:
    """Wrap `Plugins.instantiate_sweeper` (once per process) to instantiate hpsearch's sweeper
    where `adopted` says so, as Hydra does (its `_instantiate`, then `setup`)."""
    original = Plugins.instantiate_sweeper
    if getattr(original, "hpsearch_adopts", False):
        return

    @functools.wraps(original)
    def instantiate_sweeper(self: Plugins, **kwargs: Any) -> Any:
        node = adopted(kwargs["config"])
        if node is None:
            return original(self, **kwargs)
        log.warning(warning(kwargs["config"]))
        sweeper: Any = self._instantiate(node)
        sweeper.setup(**kwargs)
        return sweeper

    instantiate_sweeper.hpsearch_adopts = True  # type: ignore[attr-defined]
    setattr(Plugins, "instantiate_sweeper", instantiate_sweeper)  # noqa: B010 - mypy: a method
