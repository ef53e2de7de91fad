"""hydra-optuna-sweeper 1.1's `hydra.sweeper.search_space` (deprecated there since 1.2): each
entry, {type: int|float|categorical, low, high, step, log, choices}, as the `params` override
text that searches the same values."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hydra.core.override_parser.types import Transformer

from .space import SearchSpaceError

log = logging.getLogger("hpsearch.sweeper")

URL = "https://hydra.cc/docs/upgrades/1.1_to_1.2/changes_to_sweeper_config/"


def params_of_search_space(search_space: Mapping[str, Any]) -> dict[str, str]:
    """`search_space`'s entries as `params` values, with Hydra's deprecation warning."""
    log.warning(
        "hpsearch: hydra.sweeper.search_space is deprecated (as in Hydra's Optuna sweeper): "
        "write it as hydra.sweeper.params, e.g. x: interval(-5.5, 5.5); see %s",
        URL,
    )
    return {str(name): _as_override(str(name), entry) for name, entry in search_space.items()}


def _as_override(name: str, entry: Any) -> str:
    if not isinstance(entry, Mapping) or entry.get("type") not in ("int", "float", "categorical"):
        raise SearchSpaceError(
            f"hydra.sweeper.search_space.{name}={entry!r}: must be a mapping with type int, "
            "float or categorical (better: hydra.sweeper.params, e.g. x: interval(0, 1))"
        )
    if entry["type"] == "categorical":
        return "choice(" + ",".join(Transformer.str(c) for c in entry.get("choices") or []) + ")"
    kind = int if entry["type"] == "int" else float
    low, high, step = (
        None if v is None else kind(v) for v in map(entry.get, ("low", "high", "step"))
    )
    body = f"interval({low!r},{high!r})"
    if entry.get("log"):  # as Hydra's: a log scale has no step
        return f"tag(log,{'int(' + body + ')' if kind is int else body})"
    if step is not None:
        return f"range({low!r},{high!r},{step!r})"
    return f"int({body})" if kind is int else body
