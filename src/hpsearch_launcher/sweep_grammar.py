"""The search grammar given to a sweeper that cannot read it: Hydra's basic sweeper runs lists,
choice() and range(), and stops at an interval() with a 16-line traceback, after the sweep dir
is made. The launcher's setup() runs first (the sweeper makes the launcher before it parses its
arguments), so it refuses such a command in one line, the sweep dir put back."""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ValueType
from omegaconf import DictConfig, OmegaConf

from .plan.refusal import LauncherSettingsError

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
# The sweep types the basic sweeper refuses (`does not support sweep type`).
SEARCH_ONLY = (ValueType.INTERVAL_SWEEP,)


def check_basic_sweep(config: DictConfig) -> None:
    """LauncherSettingsError naming the first command-line value the basic sweeper cannot run,
    and the fix; nothing with another sweeper."""
    target = OmegaConf.select(config, "hydra.sweeper._target_", default=None)
    if target != BASIC_SWEEPER:
        return
    task = OmegaConf.select(config, "hydra.overrides.task", default=None) or []
    line = search_only_value([str(o) for o in task])
    if line is not None:
        raise LauncherSettingsError(
            f"{line}: interval() is the search grammar, which Hydra's basic sweeper cannot run "
            "(it sweeps lists, choice() and range()): search it with hydra/sweeper=hpsearch "
            "(in YAML: - override hydra/sweeper: hpsearch), or give a list of values"
        )


def search_only_value(overrides: Sequence[str]) -> str | None:
    """The first override, as typed, whose value only a search can take (an interval)."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # a line Hydra cannot parse: Hydra says why, in its own words
        return None
    for override in parsed:
        if override.value_type in SEARCH_ONLY:
            return str(override.input_line)
    return None
