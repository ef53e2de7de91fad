"""A launcher setting refused: its error, its words and the checks of one value, which
plan/settings.py and each backend's own settings (plan/ray_settings.py) share. Light: imports
no other plan module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.errors import CompactHydraException

from ..setting_checks import Checks


class LauncherSettingsError(CompactHydraException):
    """A bad hydra.launcher.* value: the message names the value, the rule and the fix.
    (Compact: Hydra prints the message alone, no traceback.)"""


LAUNCHER = Checks("launcher", LauncherSettingsError)
# `hydra.launcher.<key>=<value as typed>: <rule> (e.g. hydra.launcher.<example>)`, and the
# checks of one value: each gives it back or raises LauncherSettingsError.
fail, whole, flag = LAUNCHER.fail, LAUNCHER.whole, LAUNCHER.flag


def refuse_unknown(given: Mapping[str, Any], known: Mapping[str, Any], prefix: str) -> None:
    """A key that is no setting (`+hydra.launcher.jobs_per_gpus=2` gets past Hydra): refused,
    with the nearest setting's name, rather than silently ignored."""
    for key in given:
        if key not in known:
            raise LAUNCHER.no_such(f"{prefix}{key}", str(key), known, prefix)


def count(key: str, value: Any) -> int:
    """`value`, an integer >= 0 (a count of retries, of steps), or refused."""
    return whole(key, value, 0, f"{key}=1")
