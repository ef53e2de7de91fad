"""results.jsonl: the sweep's own record of its jobs, append-only, the truth results.csv shows.

Each change to a row (a job's end, a row marked superseded or moved) is one JSON line,
`{"row": {column: cell}, "params": [column, ...]}`, written and fsynced before anyone hears of
it: one append per end, whatever the sweep's size. Read back, the last line of each job wins.
A kill can cut only the last line: reading stops at the last whole one (saying so), and the
next append first cuts the partial line off.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

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
        self._file: IO[bytes] | None = None

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
        f = self._open()
        f.write(text)
        f.flush()
        os.fsync(f.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self) -> IO[bytes]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._cut_partial_line()
            self._file = self.path.open("ab")
        return self._file

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
