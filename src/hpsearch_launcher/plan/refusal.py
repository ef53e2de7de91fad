"""A launcher setting refused: its error, its words and the checks of one value, which
plan/settings.py and each backend's own settings (plan/ray_settings.py) share. Light: imports
no other plan module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.errors import CompactHydraException

from ..setting_checks import is_whole, nearest, refusal


class LauncherSettingsError(CompactHydraException):
    """A bad hydra.launcher.* value: the message names the value, the rule and the fix.
    (Compact: Hydra prints the message alone, no traceback.)"""


def fail(key: str, value: Any, rule: str, example: str) -> LauncherSettingsError:
    """`hydra.launcher.<key>=<value as typed>: <rule> (e.g. hydra.launcher.<example>)`."""
    return LauncherSettingsError(refusal("launcher", key, value, rule, example))


def refuse_unknown(given: Mapping[str, Any], known: Mapping[str, Any], prefix: str) -> None:
    """A key that is no setting (`+hydra.launcher.jobs_per_gpus=2` gets past Hydra): refused,
    with the nearest setting's name, rather than silently ignored."""
    for key in given:
        if key not in known:
            near = nearest(str(key), known)
            hint = f"did you mean {prefix}{near}?" if near else f"settings: {', '.join(known)}"
            raise LauncherSettingsError(f"hydra.launcher.{prefix}{key}: no such setting; {hint}")


def whole(key: str, value: Any, least: int, example: str) -> int:
    """`value`, an integer >= `least` (not a bool), or refused."""
    if not is_whole(value, least):
        raise fail(key, value, f"must be an integer >= {least}", example)
    return int(value)


def count(key: str, value: Any) -> int:
    """`value`, an integer >= 0 (a count of retries, of steps), or refused."""
    return whole(key, value, 0, f"{key}=1")


def flag(key: str, value: Any) -> bool:
    """`value`, true or false, or refused."""
    if not isinstance(value, bool):
        raise fail(key, value, "must be true or false", f"{key}=false")
    return value
