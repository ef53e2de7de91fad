"""An earlier run's unfinished attempt gives its run dir up to the job that runs it again.

The re-run takes the plain name (`lr=0.1`), so the run dirs read as the configs they hold; the
partial attempt, logs and TensorBoard events included, moves to `superseded/lr=0.1` (`~2`, ...
if taken), and its results.csv rows follow it there. An attempt a `kill -9` left with no row
(the sweep died before it recorded the end) moves there too, with no row to follow it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..outcome import DONE
from ..plan.naming import suffixed
from .rows import in_form_of
from .table import STATUS, ResultsTable

FOLDER = "superseded"  # in the sweep dir


def move_aside(
    table: ResultsTable, path: Path, config_hash: str, before_job: int, abandoned: bool = False
) -> Path | None:
    """Move `path` into the sweep dir's superseded/ folder if it is the run dir of earlier runs'
    unfinished rows of this config (job < before_job) and of no other row, or, named by no row,
    `abandoned` (a killed run's attempt that nobody recorded); return where."""
    if not path.is_dir():
        return None
    rows = {num: row for num, row in table.rows.items() if _same(row.get("run_dir", ""), path)}
    earlier_unfinished = all(
        num < before_job and row.get("config_hash") == config_hash and row.get(STATUS) not in DONE
        for num, row in rows.items()
    )
    if not (earlier_unfinished if rows else abandoned):
        return None
    folder = path.parent / FOLDER
    folder.mkdir(exist_ok=True)
    # The sweep dir's lock is held: nobody else claims names in it meanwhile.
    target = next(folder / name for name in suffixed(path.name) if not (folder / name).exists())
    path.rename(target)
    if rows:
        recorded = next(iter(rows.values()))["run_dir"]
        table.relocate(rows, Path(in_form_of(target, recorded)))  # written as the rows had it
    return target


def _same(recorded: str, path: Path) -> bool:
    """Whether a row's run_dir is `path` (written relative or absolute, as its run had it)."""
    try:
        return bool(recorded) and os.path.samefile(recorded, path)
    except OSError:  # gone, or unreadable: not this dir
        return False
