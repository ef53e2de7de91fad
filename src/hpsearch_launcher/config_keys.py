"""A config's keys, for refusing one it lacks in the words of the nearest one it has: the
hpsearch app's command line (hpsearch/override_keys.py) and a search's space
(search/space_keys.py). Each reads a plain config (`OmegaConf.to_container`, unresolved), so a
`???` value still counts as a key."""

from __future__ import annotations

from typing import Any

from .setting_checks import nearest


def has_key(config: Any, key: str) -> bool:
    """Whether the dotted `key` is in the plain `config` (a list's item by its index)."""
    node = config
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def dotted_keys(config: Any, prefix: str = "") -> list[str]:
    """Every dotted key of the plain `config`, nodes and leaves."""
    if not isinstance(config, dict):
        return []
    found = []
    for name, value in config.items():
        key = f"{prefix}{name}"
        found += [key, *dotted_keys(value, key + ".")]
    return found


def children(known: list[str], parent: str) -> list[str]:
    """The names right under `parent` ('' for the top level) of the dotted keys `known`."""
    depth = parent.count(".") + 1 if parent else 0
    inside = [k for k in known if k.startswith(parent + ".")] if parent else known
    return [k.split(".")[-1] for k in inside if k.count(".") == depth]


def nearest_key(key: str, known: list[str]) -> str | None:
    """The known key closest to a mistyped `key`: the one its initials name (`learning_rate`
    -> `lr`), else the closest in spelling beside it (under the same parent, if that is
    known), else anywhere."""
    parent, dot, leaf = key.rpartition(".")
    initials = "".join(word[0] for word in leaf.split("_") if word)
    if parent + dot + initials in known and initials != leaf:
        return parent + dot + initials
    if parent and parent not in known:
        return nearest(key, known)
    near = nearest(leaf, children(known, parent))
    return parent + dot + near if near else None


def no_such_key(key: str, known: list[str]) -> str:
    """`learning_rate: no such key; did you mean lr?`, or without a near key the keys beside
    it (`model.foo: no such key; the keys under model: name, hidden, ...`)."""
    near = nearest_key(key, known)
    if near:
        return f"{key}: no such key; did you mean {near}?"
    parent = key.rpartition(".")[0]
    under = f" under {parent}" if parent in known else ""
    keys = ", ".join(children(known, parent if under else "")) or "none"
    return f"{key}: no such key; the keys{under}: {keys}"
