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


@dataclass
class Change:
    """A file's new text, and what hpsearch-migrate could not convert in it (one line each)."""

    text: str
    notes: list[str] = field(default_factory=list)


def migrate_config(text: str, choice: str = "hpsearch") -> Change:
    """A config that selects or names Hydra's Optuna sweeper: the override names `choice`
    (hpsearch, or the app's own sweeper file), the `_target_` line goes."""
    lines = [SWEEPER_OVERRIDE.sub(rf"\g<1>{choice}\g<3>", line) for line in text.splitlines()]
    lines = [SWEEPER_CHOICE.sub(f"hydra/sweeper={choice}", line) for line in lines]
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
