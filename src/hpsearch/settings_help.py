"""`hpsearch --help`'s lists of the launcher's and the search's settings, generated from their
one declaration (hpsearch_launcher/config.py with each backend's section's class, as the backend
table lists them; hpsearch_launcher/search/config.py): each field's name, its default and the
first sentence of the comment above it. A setting added
there is in the help at once; the help never names one that is gone.

The help template (conf/hydra/help/hpsearch.yaml) asks for them through an OmegaConf resolver,
`${hpsearch_settings:launcher}` or `${hpsearch_settings:sweeper}`, registered by hpsearch.app.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import textwrap
from typing import Any

from omegaconf import MISSING

from hpsearch_launcher.api import SWEEPER_DEFAULTS, SearchSettings, declared_settings, user_fields

RESOLVER = "hpsearch_settings"
NAME_WIDTH = 24  # the name column, as the help's other lists have it
LINE_WIDTH = 100
# Each part's settings classes, with their keys' prefix ("ray." for hydra.launcher.ray.*).
SETTINGS: dict[str, list[tuple[str, type]]] = {
    "launcher": declared_settings(),
    "sweeper": [("", SearchSettings)],
}
# A config-group setting (the sweeper's `sampler`) is MISSING in its class: its default is the
# option Hydra's defaults list picks.
GROUP_DEFAULTS: dict[str, str] = {k: v for entry in SWEEPER_DEFAULTS for k, v in entry.items()}


def field_comments(cls: type) -> dict[str, str]:
    """Each field's comment: the `#` lines right above its declaration, joined."""
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in textwrap.dedent(inspect.getsource(cls)).splitlines()[1:]:
        stripped = line.strip()
        declared = re.match(r"(\w+)\s*:", stripped)
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
        elif declared and not stripped.startswith(("def ", "@")):
            comments[declared.group(1)] = " ".join(pending)
            pending = []
        else:
            pending = []
    return comments


def field_value(f: dataclasses.Field[Any]) -> Any:
    """The field's default value (a fresh one from its factory)."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def default_text(f: dataclasses.Field[Any]) -> str:
    """The default as a user writes it on the command line: null, "", true, [a,b], {}."""
    value = field_value(f)
    if value == MISSING and f.name in GROUP_DEFAULTS:
        return GROUP_DEFAULTS[f.name]
    if value is None:
        return "null"
    if value == "":
        return '""'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    return str(value)


def _first_sentence(comment: str) -> str:
    """Up to the first `. ` outside parentheses that does not end an `e.g.` or `i.e.`."""
    depth = 0
    for i, char in enumerate(comment):
        depth += {"(": 1, ")": -1}.get(char, 0)
        ends = comment[i + 1 : i + 2] in ("", " ") and not comment[: i + 1].endswith(
            ("e.g.", "i.e.")
        )
        if char == "." and depth == 0 and ends:
            return comment[:i]
    return comment.rstrip(".")


def settings_lines(cls: type, prefix: str = "") -> list[str]:
    """One entry per setting: `name (default) meaning`, wrapped under the meaning's column."""
    comments = field_comments(cls)
    lines: list[str] = []
    indent = " " * (2 + NAME_WIDTH + 1)
    for f in user_fields(cls):
        text = f"(default {default_text(f)}) {_first_sentence(comments.get(f.name, ''))}".strip()
        wrapped = textwrap.wrap(text, LINE_WIDTH - len(indent)) or [""]
        lines.append(f"  {prefix + f.name:<{NAME_WIDTH}} {wrapped[0]}")
        lines += [indent + more for more in wrapped[1:]]
    return lines


def settings_help(which: str) -> str:
    """The resolver: `launcher` or `sweeper`'s lines, `$` doubled for Hydra's string.Template."""
    if which not in SETTINGS:
        raise ValueError(f"{RESOLVER}:{which}: unknown; use one of {', '.join(SETTINGS)}")
    lines = [line for prefix, cls in SETTINGS[which] for line in settings_lines(cls, prefix)]
    return "\n".join(lines).replace("$", "$$")
