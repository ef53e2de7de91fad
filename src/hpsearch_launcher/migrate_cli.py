"""`hpsearch-migrate CONFIG_DIR [--write]`: every config under CONFIG_DIR that uses Hydra's Optuna
sweeper, shown as the diff that makes it hpsearch's (`search.migration`), changed only with
`--write`; what cannot be converted is said, with why.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from .search.hydra_optuna import APP_SWEEPER_FILE, OPTUNA_TARGET, RENAMED_SWEEPER_FILE
from .search.migration import (
    SWEEPER_CHOICE,
    SWEEPER_OVERRIDE,
    Change,
    extends_optuna,
    migrate_app_sweeper_file,
    migrate_config,
    migrate_sweeper_extension,
)


def plan(config_dir: Path) -> dict[Path, tuple[Path, Change]]:
    """Each file to change -> (where its new text goes, the change)."""
    app_file = config_dir / APP_SWEEPER_FILE
    choice = Path(RENAMED_SWEEPER_FILE).stem if app_file.is_file() else "hpsearch"
    changes: dict[Path, tuple[Path, Change]] = {}
    for path in sorted(config_dir.rglob("*.y*ml")):
        text = path.read_text()
        if path == app_file:
            changes[path] = (config_dir / RENAMED_SWEEPER_FILE, migrate_app_sweeper_file(text))
        elif path.parent == app_file.parent and extends_optuna(text):
            changes[path] = (path, migrate_sweeper_extension(text))
        elif _uses_hydras_sweeper(text):
            changes[path] = (path, migrate_config(text, choice))
    return changes


def _uses_hydras_sweeper(text: str) -> bool:
    lines = text.splitlines()
    return OPTUNA_TARGET in text or any(
        SWEEPER_OVERRIDE.match(line) or SWEEPER_CHOICE.search(line) for line in lines
    )


def diff(path: Path, target: Path, change: Change, root: Path) -> str:
    before = path.read_text().splitlines(keepends=True)
    after = change.text.splitlines(keepends=True)
    old, new = path.relative_to(root), target.relative_to(root)
    return "".join(difflib.unified_diff(before, after, f"a/{old}", f"b/{new}"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hpsearch-migrate",
        description="Rewrite configs written for Hydra's Optuna sweeper (hydra/sweeper=optuna) "
        "for hydra/sweeper=hpsearch: prints the diff; --write changes the files.",
    )
    parser.add_argument("config_dir", type=Path, help="the app's config directory")
    parser.add_argument("--write", action="store_true", help="change the files")
    args = parser.parse_args(argv)
    root: Path = args.config_dir
    if not root.is_dir():
        parser.error(f"CONFIG_DIR {str(root)!r}: not a directory (give the app's config dir)")
    changes = plan(root)
    if not changes:
        print(f"hpsearch-migrate: no config under {root} uses Hydra's Optuna sweeper")
        return 0
    for path, (target, change) in changes.items():
        sys.stdout.write(diff(path, target, change, root))
        for note in change.notes:
            print(f"hpsearch-migrate: {path.relative_to(root)}: {note}")
    for path, (target, change) in changes.items() if args.write else ():
        target.write_text(change.text)
        if target != path:
            path.unlink()
    done = "changed" if args.write else "would change (run again with --write)"
    print(f"hpsearch-migrate: {len(changes)} file(s) {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
