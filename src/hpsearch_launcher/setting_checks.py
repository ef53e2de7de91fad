"""The words and checks the launcher's settings (plan/settings.py) and the sweeper's
(search/settings.py) share: a refusal names the value as typed, the rule and an example; a
mistyped name gets the nearest right one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def as_typed(value: Any) -> Any:
    """`value` as the user typed it: OmegaConf makes `timeout=-1` the float -1.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def refusal(section: str, key: str, value: Any, rule: str, example: str = "") -> str:
    """`hydra.<section>.<key>=<value>: <rule> (e.g. hydra.<section>.<example>)`."""
    fix = f" (e.g. hydra.{section}.{example})" if example else ""
    return f"hydra.{section}.{key}={as_typed(value)!r}: {rule}{fix}"


def nearest(word: str, options: Iterable[str]) -> str | None:
    """The option closest to a mistyped `word`, if one is close; case aside first (`CPU` is
    `cpu`, though difflib finds no letter of it alike)."""
    folded = {option.lower(): option for option in options}
    near = difflib.get_close_matches(word.lower(), list(folded), n=1)
    return folded.get(word.lower()) or (folded[near[0]] if near else None)


def is_whole(value: Any, least: int) -> bool:
    """Whether `value` is an integer (not a bool) >= `least`."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


@dataclass(frozen=True)
class Checks:
    """The checks of one value for one section of settings (`hydra.<section>.*`): each gives
    the value back, or raises `error` with the refusal's one line."""

    section: str
    error: type[Exception]

    def fail(self, key: str, value: Any, rule: str, example: str = "") -> Exception:
        """`hydra.<section>.<key>=<value as typed>: <rule> (e.g. hydra.<section>.<example>)`."""
        return self.error(refusal(self.section, key, value, rule, example))

    def no_such(self, path: str, key: str, known: Iterable[str], prefix: str = "") -> Exception:
        """`hydra.<section>.<path>: no such setting; did you mean hydra.<section>.<prefix><near>?`
        for a dotted `path` whose part `key` (under `prefix`) is none of `known`; without a
        near one, the settings there."""
        known = list(known)
        near = nearest(key, known)
        where = f"hydra.{self.section}."
        hint = f"did you mean {where}{prefix}{near}?" if near else f"settings: {', '.join(known)}"
        return self.error(f"{where}{path}: no such setting; {hint}")

    def whole(self, key: str, value: Any, least: int, example: str) -> int:
        """`value`, an integer >= `least` (not a bool), or refused."""
        if not is_whole(value, least):
            raise self.fail(key, value, f"must be an integer >= {least}", example)
        return int(value)

    def flag(self, key: str, value: Any) -> bool:
        """`value`, true or false, or refused."""
        if not isinstance(value, bool):
            raise self.fail(key, value, "must be true or false", f"{key}=false")
        return value

    def choose(self, key: str, value: Any, options: Iterable[str], usual: str = "") -> str:
        """`value`, one of `options`, or refused with the nearest as example, else `usual`
        (else the first)."""
        options = tuple(options)
        if value not in options:
            near = nearest(str(value), options) or usual or options[0]
            raise self.fail(key, value, f"must be one of {', '.join(options)}", f"{key}={near}")
        return str(value)
