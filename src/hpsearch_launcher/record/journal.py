"""results.jsonl: the sweep's own record of its jobs, append-only, the truth results.csv shows.

Each change to a row (a job's end, a row marked superseded or moved) is one JSON line,
`{"row": {column: cell}, "params": [column, ...]}`, written and fsynced before anyone hears of
it: one append per end, whatever the sweep's size. Read back, the last line of each job wins.
A kill can cut only the last line: reading stops at the last whole one (saying so), and the
next append first cuts the partial line off; a bad line anywhere else is corruption, named by
its line number. An append the disk refuses (full, read-only) cuts
its own part-written line off before it raises CannotWrite, so a later append still starts
on a line of its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from io import FileIO
from pathlib import Path

from ..disk_errors import writing

log = logging.getLogger("hpsearch.launcher")

FILENAME = "results.jsonl"


@dataclass
class Record:
    """What a journal holds: its rows by job number, and the columns that are parameters."""

    rows: dict[int, dict[str, str]] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)


class Journal:
    """One sweep dir's results.jsonl, opened for appending at the first append."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: FileIO | None = None

    @staticmethod
    def read(path: Path) -> Record:
        """The journal's rows, up to its last whole line. A cut last line (a kill mid-write)
        is left out, saying so; a line in the middle that is no record is no kill's doing:
        left out too, with its line number, and the file called corrupt there."""
        record = Record()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return record
        lines = data.split(b"\n")
        corrupt: list[int] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            entry = _entry(line)
            if entry is None:
                corrupt.append(number)
                continue
            num, row, params = entry
            record.rows[num] = row
            record.params += [p for p in params if p not in record.params]
        record.rows = dict(sorted(record.rows.items()))  # job order, as results.csv has them
        cut = bool(corrupt) and corrupt[-1] == len(lines)  # no newline after it: cut short
        if cut:
            log.warning(
                "hpsearch: %s: its last line is cut (a kill mid-write): read to its last whole "
                "entry",
                path,
            )
        _say_corrupt(path, corrupt[:-1] if cut else corrupt)
        return record

    def append(self, rows: Iterable[Mapping[str, str]], params: Iterable[str]) -> None:
        """Write one line per row, then flush and fsync: on disk before this returns."""
        names = list(params)
        text = b"".join(
            json.dumps({"row": dict(row), "params": names}).encode() + b"\n" for row in rows
        )
        if not text:
            return
        with writing(self.path):
            f = self._open()
            size = os.fstat(f.fileno()).st_size
            try:
                view = memoryview(text)
                while view:  # unbuffered: a short write (a disk filling up) writes on
                    view = view[f.write(view) or 0 :]
                os.fsync(f.fileno())
            except OSError:
                self._cut_back(f, size)
                raise

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self) -> FileIO:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._cut_partial_line()
            self._file = FileIO(self.path, "ab")
        return self._file

    def _cut_back(self, f: FileIO, size: int) -> None:
        """A failed append: what it wrote cut off (a full disk allows that) and the file
        closed; where the cut fails too, the next append's open cuts the partial line."""
        self._file = None
        with contextlib.suppress(OSError):
            os.ftruncate(f.fileno(), size)
        with contextlib.suppress(OSError):
            f.close()

    def _cut_partial_line(self) -> None:
        """A kill mid-append leaves a line without its newline: cut it, so the next line
        starts on its own."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            with self.path.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)


def _entry(line: bytes) -> tuple[int, dict[str, str], list[str]] | None:
    """A line's job number, row and parameter columns; None for a line that is no record."""
    try:
        entry = json.loads(line)
        row = {str(k): str(v) for k, v in entry["row"].items()}
        return int(row["job"]), row, [str(p) for p in entry.get("params", ())]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


MOST_NAMED = 5  # corrupt lines named by number; more are counted


def _say_corrupt(path: Path, numbers: list[int]) -> None:
    """Lines in the middle of the journal that are no record: not what a kill leaves (it cuts
    only the last line), so the file was edited or damaged; each left out."""
    if not numbers:
        return
    named = ", ".join(str(n) for n in numbers[:MOST_NAMED])
    more = f" and {len(numbers) - MOST_NAMED} more" if len(numbers) > MOST_NAMED else ""
    which = f"line {named}" if len(numbers) == 1 else f"lines {named}{more}"
    log.warning(
        "hpsearch: %s is corrupt: %s %s no results record (not a kill's doing, which cuts only "
        "the last line: the file was edited or damaged); left out, the rest read",
        path,
        which,
        "is" if len(numbers) == 1 else "are",
    )
