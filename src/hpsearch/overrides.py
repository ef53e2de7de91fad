"""The command line's `key=value` overrides, parsed as Hydra parses them, for the checks the app
runs before Hydra does (app.py, override_keys.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def parsed_overrides(args: list[str]) -> Iterator[Any]:
    """The command line's overrides, each as Hydra parses it; those Hydra cannot parse are left
    for it to report, in its own words."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            yield parser.parse_overrides([arg])[0]
        except Exception:  # not ours to judge: Hydra reports its own syntax errors
            continue


def swept_values(override: Any) -> list[str] | None:
    """The values an override gives its key (a sweep's each), as written; None where Hydra
    cannot list them (a search's interval): Hydra reports its own errors."""
    try:
        if override.is_sweep_override():
            return list(override.sweep_string_iterator())
        return [override.get_value_element_as_str()]
    except Exception:  # not ours to judge
        return None
