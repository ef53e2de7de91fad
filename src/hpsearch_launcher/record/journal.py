"""results.jsonl: the sweep's own record of its jobs, append-only, the truth results.csv shows.

Each change to a row (a job's end, a row marked superseded or moved) is one JSON line,
`{"row": {column: cell}, "params": [column, ...]}`, written and fsynced before anyone hears of
it: one append per end, whatever the sweep's size. Read back, the last line of each job wins.
A kill can cut only the last line: reading stops at the last whole one (saying so), and the
next append first cuts the partial line off. An append the disk refuses (full, read-only) cuts
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
        """The journal's rows, up to its last whole line; a cut or unreadable line is left
        out, with one warning naming how many."""
        record = Record()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return record
        bad = 0
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                row = {str(k): str(v) for k, v in entry["row"].items()}
                params = [str(p) for p in entry.get("params", ())]
                num = int(row["job"])
            except (ValueError, KeyError, TypeError, AttributeError):
                bad += 1
                continue
            record.rows[num] = row
            record.params += [p for p in params if p not in record.params]
        record.rows = dict(sorted(record.rows.items()))  # job order, as results.csv has them
        if bad:
            log.warning(
                "hpsearch: %s: %d cut or unreadable line%s left out (a kill mid-write); "
                "read to its last whole entry",
                path,
                bad,
                "s" if bad > 1 else "",
            )
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
