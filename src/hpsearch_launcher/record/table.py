"""results.csv: one row per job of a sweep, rewritten atomically as each job ends.

A row's identity is its job number. The config hash is a column: resume matches on it, so a
job that already finished is not run again, and a config held twice by one sweep is two jobs,
two rows. Columns, left to right: `job`, the swept parameters, `status`, the values (what the
task returned, and its metrics.json's `final` numbers), then the fixed TAIL; the fixed ones are
declared in columns.py. No pandas here: the sweep process writes this file, and it stays light.

The truth is the journal beside it (results.jsonl, journal.py): every change to a row is
appended there, fsynced, before anyone hears of it; results.csv is its view, rewritten whole and
atomically from it now and then and always at the end, and rebuilt when a sweep finds it lagging.
A swept key named like a fixed column gets the column `param:KEY` (param_column).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from hydra.errors import CompactHydraException

from ..atomic import write_text_atomic
from ..crash_points import crash_point
from ..disk_errors import writing
from ..outcome import FINAL, STATUSES, SUPERSEDED
from . import columns
from .journal import FILENAME as JOURNAL_FILENAME
from .journal import Journal

log = logging.getLogger("hpsearch.launcher")

FILENAME = "results.csv"
STATUS = columns.STATUS.name
TAIL = columns.names(columns.TAIL)
FIXED = columns.names(columns.FIXED)  # a swept key of one of these names: param_column
PARAM_PREFIX = "param:"  # no Hydra override key holds a colon: `param:error` is no other key's
REQUIRED = tuple(c.name for c in columns.FIXED if c.required)
# While jobs end, the file is rewritten at most this often (each rewrite is the whole file,
# fsync'd); the sweep always writes it when it ends, is stopped, or fails.
SAVE_INTERVAL_S = 0.5
# Beyond this many rows the interval grows with the table, up to MAX_SAVE_INTERVAL_S: a write
# costs every row, so a 1,000-job sweep's writes cost each job what a 100-job sweep's do.
ROWS_PER_INTERVAL = 100
MAX_SAVE_INTERVAL_S = 10.0


class ResultsFileError(CompactHydraException):
    """A results.csv this launcher cannot read: the message names the file, the problem, the fix."""


def param_column(key: str) -> str:
    """The column of swept key `key`: its own name, or `param:KEY` where that is a fixed
    column's (a parameter named `error` must not overwrite the error column)."""
    return f"{PARAM_PREFIX}{key}" if key in FIXED else key


class ResultsTable:
    """The rows of one sweep dir's results.csv, by job number."""

    def __init__(
        self,
        path: Path,
        rows: Iterable[Mapping[str, str]] = (),
        params: Iterable[str] = (),
        values: Iterable[str] = (),
    ) -> None:
        self.path = path
        self.min_interval = 0.0  # a sweep sets SAVE_INTERVAL_S: puts then write at most so often
        self._saved = -math.inf  # monotonic time of the last write (never: the first is due)
        self._dirty = False
        self.params: list[str] = list(params)
        self.values: list[str] = list(values)
        self.rows: dict[int, dict[str, str]] = {int(r["job"]): dict(r) for r in rows}
        self.journal = Journal(path.with_name(JOURNAL_FILENAME))

    @classmethod
    def load(cls, sweep_dir: Path) -> ResultsTable:
        """The sweep dir's table, from its journal where it has one (the truth: results.csv
        may lag behind it), else from results.csv; empty if it has neither. Raises
        ResultsFileError, in one line, for a results.csv this launcher did not write or that
        was edited since."""
        path = sweep_dir / FILENAME
        journal = sweep_dir / JOURNAL_FILENAME
        if journal.exists():
            record = Journal.read(journal)
            table = cls(path, record.rows.values(), record.params)
            table.values = _value_columns(table.rows, table.params)
            return table
        if not path.exists():
            return cls(path)
        try:
            with path.open(newline="") as f:
                reader = csv.DictReader(f)
                fields = list(reader.fieldnames or [])
                rows = list(reader)
        except (OSError, UnicodeDecodeError, csv.Error) as err:
            raise _unreadable(path, f"cannot be read ({err})") from None
        if not fields:
            log.warning("hpsearch: %s is empty (a kill before its first write): no rows", path)
            return cls(path)
        missing = [c for c in REQUIRED if c not in fields]
        if missing:
            raise _unreadable(path, f"has no {', '.join(missing)} column")
        status_at = fields.index(STATUS)
        params = fields[1:status_at]
        values = [c for c in fields[status_at + 1 :] if c not in TAIL]
        seen: set[int] = set()
        for line, row in enumerate(rows, start=2):
            problem = _row_problem(row, len(fields), seen)
            if problem:
                raise _unreadable(path, f"line {line}: {problem}")
        return cls(path, rows, params, values)

    def max_job(self) -> int:
        """The highest job number recorded, -1 for none."""
        return max(self.rows, default=-1)

    def finished(self) -> dict[str, list[dict[str, str]]]:
        """Rows a resumed sweep may reuse, by config hash, in job order."""
        by_hash: dict[str, list[dict[str, str]]] = {}
        for num in sorted(self.rows):
            row = self.rows[num]
            if row.get(STATUS) in FINAL and row.get("return"):
                by_hash.setdefault(row["config_hash"], []).append(row)
        return by_hash

    def put(self, row: Mapping[str, object], params: Mapping[str, str]) -> None:
        """Record a job's row (replacing its earlier row, if any): in the journal, fsynced,
        before this returns; in results.csv now, or within SAVE_INTERVAL_S by `flush` (the
        sweep's loop calls it). `params`: the job's swept keys and values."""
        columns = {param_column(k): v for k, v in params.items()}
        for column in columns:
            if column not in self.params:
                self.params.append(column)
        for key in row:
            if key not in FIXED and key not in self.values and key not in self.params:
                self.values.append(key)
        cells = {k: "" if v is None else str(v) for k, v in row.items()} | columns
        self._record([cells])
        self.rows[int(cells["job"])] = cells
        self._dirty = True
        self.flush()

    def keep(self) -> None:
        """The sweep's own table, at its start: its journal holds every row (one is begun
        from an older sweep's results.csv), a results.csv that lags behind is rebuilt, and a
        rewrite a kill cut short (its temporary file) is removed: the sweep dir is held."""
        for stale in self.path.parent.glob(f".{FILENAME}.*"):
            stale.unlink(missing_ok=True)
        if not self.journal.path.exists() and self.rows:  # begun from results.csv: it is whole
            self._record([self.rows[n] for n in sorted(self.rows)])
            return
        lags = not self.path.exists() or self._text() != self.path.read_text()
        if self.rows and lags:
            log.info(
                "hpsearch: %s lagged behind %s (the sweep was killed): rebuilt from it",
                self.path,
                self.journal.path.name,
            )
            self.save()

    def _record(self, rows: list[dict[str, str]]) -> None:
        self.journal.append(rows, self.params)

    def flush(self, force: bool = False) -> None:
        """Write the file if rows changed since the last write and it is time (or `force`)."""
        if self._dirty and (force or time.monotonic() - self._saved >= self._interval()):
            self.save()

    def _interval(self) -> float:
        grown = self.min_interval * max(1.0, len(self.rows) / ROWS_PER_INTERVAL)
        return max(self.min_interval, min(grown, MAX_SAVE_INTERVAL_S))

    def supersede(self, config_hash: str, before_job: int, by_job: int) -> None:
        """Mark the unfinished rows of `config_hash` from earlier runs (job < before_job) as
        superseded by job `by_job`, which ran that config again."""
        for num, row in self.rows.items():
            earlier = num < before_job and row.get("config_hash") == config_hash
            if earlier and row.get(STATUS) not in (*FINAL, SUPERSEDED):
                row["error"] = f"{row.get(STATUS)}: {row.get('error', '')}; re-run as job {by_job}"
                row[STATUS] = SUPERSEDED
                self._record([row])

    def relocate(self, nums: Iterable[int], run_dir: Path) -> None:
        """Point these rows at `run_dir`, where their run dir was moved; written at once, so
        the file never names a dir that holds another job's run."""
        for num in nums:
            self.rows[num]["run_dir"] = str(run_dir)
            self._record([self.rows[num]])
        self.save()

    def save(self) -> None:
        with writing(self.path):  # not the temporary file's name: the file it would have been
            write_text_atomic(self.path, self._text(), lambda: crash_point("csv-written"))
        self._saved, self._dirty = time.monotonic(), False

    def header(self) -> list[str]:
        """The columns, left to right."""
        return [columns.JOB.name, *self.params, STATUS, *self.values, *TAIL]

    def _text(self) -> str:
        header = self.header()
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=header, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for num in sorted(self.rows):
            row = self.rows[num]
            writer.writerow({c: _one_line(row.get(c, "")) for c in header})
        return text.getvalue()

    def set_aside(self) -> Path | None:
        """Move an existing results.csv and its journal out of the way, unread (resume=false):
        kept as results.csv.bak and results.jsonl.bak (or .bak2, ...), never overwritten.
        Returns where results.csv went (or its journal, if it had no results.csv)."""
        self.journal.close()
        moved = [_set_aside(p) for p in (self.journal.path, self.path)]
        return moved[1] or moved[0]


def _set_aside(path: Path) -> Path | None:
    if not path.exists():
        return None
    n = 1
    while (target := path.with_name(f"{path.name}.bak{n if n > 1 else ''}")).exists():
        n += 1
    path.rename(target)
    return target


def _value_columns(rows: Mapping[int, Mapping[str, str]], params: list[str]) -> list[str]:
    """The value columns of rows read from a journal: neither fixed nor a parameter, in the
    order jobs first gave them."""
    values: dict[str, None] = {}
    for num in sorted(rows):
        values |= {k: None for k in rows[num] if k not in FIXED and k not in params}
    return list(values)


def _row_problem(row: Mapping[str | None, object], width: int, seen: set[int]) -> str:
    if None in row or any(v is None for v in row.values()):
        cells = width + len(row.get(None) or []) if None in row else "fewer"  # type: ignore[arg-type]
        return f"{cells} cells where the header has {width}"
    job = str(row["job"])
    if not job.isdigit():
        return f"job {job!r} is not a job number"
    if int(job) in seen:
        return f"job {job} appears twice"
    seen.add(int(job))
    if row[STATUS] not in STATUSES:
        return f"status {row[STATUS]!r} is not one of {', '.join(STATUSES)}"
    return ""


def _unreadable(path: Path, problem: str) -> ResultsFileError:
    return ResultsFileError(
        f"{path} {problem}: not a results.csv this launcher wrote, or edited since. Move it "
        "away (or fix it) to resume this sweep, or set hydra.launcher.resume=false to run every "
        "job again (the file is then kept as results.csv.bak)"
    )


def _one_line(value: str) -> str:
    return " ".join(str(value).split()) if "\n" in str(value) or "\r" in str(value) else value
