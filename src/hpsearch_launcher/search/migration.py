"""A config file written for Hydra's Optuna sweeper, rewritten for `hydra/sweeper=hpsearch`: the
text changed line by line (its comments and layout kept), and what cannot be converted, said.
Pure: text in, text out; `hpsearch-migrate` (`migrate_cli`) reads and writes the files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .hydra_optuna import target_line

# `- override /hydra/sweeper: optuna` (or hydra/sweeper, optuna.yaml) in a defaults list.
SWEEPER_OVERRIDE = re.compile(
    r"^(\s*-\s*override\s+/?hydra/sweeper\s*:\s*)optuna(\.yaml)?(\s*(#.*)?)$"
)
SWEEPER_CHOICE = re.compile(r"hydra/sweeper=optuna\b")  # on a command line in a comment
MOTPE = re.compile(r"sampler\s*[:=]\s*motpe\b|MOTPESampler")
MODE = re.compile(r"^\s+mode:\s*['\"]?MULTIRUN")
# An app-level sweeper file's own defaults entry for the sampler group: `- sampler: random`.
SAMPLER_ENTRY = re.compile(r"^(\s*-\s*)(sampler\s*:)")
DEFAULTS = re.compile(r"^defaults\s*:\s*(\[\s*\])?\s*$")
# A sweeper file of the app's own that extends Hydra's node, as Hydra 1.1's automatic schema
# matching advice says: `- optuna` (or optuna.yaml) in its defaults list, or `[optuna, ...]`.
EXTENDS_OPTUNA = re.compile(r"^(\s*-\s*)optuna(\.yaml)?(\s*(#.*)?)$")
EXTENDS_OPTUNA_INLINE = re.compile(r"^(defaults\s*:\s*\[\s*)optuna(\.yaml)?(?=\s*[,\]])")


@dataclass
class Change:
    """A file's new text, and what hpsearch-migrate could not convert in it (one line each)."""

    text: str
    notes: list[str] = field(default_factory=list)


def migrate_config(text: str, choice: str = "hpsearch") -> Change:
    """A config that selects or names Hydra's Optuna sweeper: the override names `choice`
    (hpsearch, or the app's own sweeper file), the `_target_` line goes."""
    return _rewritten(
        text,
        (SWEEPER_OVERRIDE, rf"\g<1>{choice}\g<3>"),
        (SWEEPER_CHOICE, f"hydra/sweeper={choice}"),
    )


def extends_optuna(text: str) -> bool:
    """Whether a sweeper file's defaults list names Hydra's `optuna` node (only a file in
    hydra/sweeper/ is asked: elsewhere `- optuna` names some other group's config)."""
    lines = text.splitlines()
    return any(EXTENDS_OPTUNA.match(line) or EXTENDS_OPTUNA_INLINE.match(line) for line in lines)


def migrate_sweeper_extension(text: str) -> Change:
    """A sweeper file of the app's own extending Hydra's node: it extends hpsearch's instead
    (its sampler override and everything else kept), its `_target_` line gone."""
    return _rewritten(
        text, (EXTENDS_OPTUNA, r"\g<1>hpsearch\g<3>"), (EXTENDS_OPTUNA_INLINE, r"\g<1>hpsearch")
    )


def _rewritten(text: str, *substitutions: tuple[re.Pattern[str], str]) -> Change:
    """Each line with the substitutions made, the `_target_` line naming Hydra's class gone."""
    lines = text.splitlines()
    for pattern, replacement in substitutions:
        lines = [pattern.sub(replacement, line) for line in lines]
    target = target_line(text)
    if target is not None:
        del lines[target - 1]
    return Change(_joined(lines, text), _notes(text))


def migrate_app_sweeper_file(text: str) -> Change:
    """An app-level `hydra/sweeper/optuna.yaml`, as `hydra/sweeper/search.yaml` extending
    hpsearch's node: `hpsearch` first in its defaults list, its own sampler entry an override,
    `_self_` last, its `_target_` line gone."""
    lines = text.splitlines()
    target = target_line(text)
    if target is not None:
        del lines[target - 1]
    start = next((i for i, line in enumerate(lines) if DEFAULTS.match(line)), None)
    if start is None:
        at = next(
            (i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")),
            len(lines),
        )
        lines[at:at] = ["defaults:", "  - hpsearch", "  - _self_"]
        return Change(_joined(lines, text), _notes(text))
    end = start + 1
    while end < len(lines) and (lines[end].startswith((" ", "-")) or not lines[end].strip()):
        end += 1
    entries = [SAMPLER_ENTRY.sub(r"\g<1>override \g<2>", line) for line in lines[start + 1 : end]]
    if not any(e.strip() in ("- _self_", "-  _self_") for e in entries):
        entries.append("  - _self_")
    lines[start:end] = ["defaults:", "  - hpsearch", *entries]
    return Change(_joined(lines, text), _notes(text))


def _notes(text: str) -> list[str]:
    notes = []
    for number, line in enumerate(text.splitlines(), start=1):
        if MOTPE.search(line) and not line.lstrip().startswith("#"):
            notes.append(
                f"line {number}: the motpe sampler is not converted: Optuna 4 removed it; write "
                "tpe (its TPESampler handles several objectives)"
            )
        if MODE.match(line):
            notes.append(
                f"line {number}: hydra.mode: MULTIRUN outside the primary config is refused by "
                "Hydra 1.4 (with either sweeper): move it to the primary config, or run --multirun"
            )
    return notes


def _joined(lines: list[str], original: str) -> str:
    return "\n".join(lines) + ("\n" if original.endswith("\n") else "")
