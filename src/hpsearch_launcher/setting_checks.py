"""The words and checks the launcher's settings (plan/settings.py) and the sweeper's
(search/settings.py) share: a refusal names the value as typed, the rule and an example; a
mistyped name gets the nearest right one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def as_typed(value: Any) -> Any:
    """`value` as the user typed it: OmegaConf makes `timeout=-1` the float -1.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def refusal(section: str, key: str, value: Any, rule: str, example: str = "") -> str:
    """`hydra.<section>.<key>=<value>: <rule> (e.g. hydra.<section>.<example>)`."""
    fix = f" (e.g. hydra.{section}.{example})" if example else ""
    return f"hydra.{section}.{key}={as_typed(value)!r}: {rule}{fix}"


def nearest(word: str, options: Iterable[str]) -> str | None:
    """The option closest to a mistyped `word`, if one is close."""
    near = difflib.get_close_matches(word, list(options), n=1)
    return near[0] if near else None


def is_whole(value: Any, least: int) -> bool:
    """Whether `value` is an integer (not a bool) >= `least`."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


def is_number(value: Any) -> bool:
    """Whether `value` is an int or a float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
