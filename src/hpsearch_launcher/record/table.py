"""results.csv: one row per job of a sweep, rewritten atomically as each job ends.

A row's identity is its job number. The config hash is a column: resume matches on it, so a
job that already finished is not run again, and a config held twice by one sweep is two jobs,
two rows. Columns, left to right: `job`, the swept parameters, `status`, the values (what the
task returned, and its metrics.json's `final` numbers), then the fixed TAIL. No pandas here:
the sweep process writes this file, and it stays light.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from hydra.errors import CompactHydraException

from ..atomic import write_text_atomic
from ..outcome import FINAL, STATUSES, SUPERSEDED

FILENAME = "results.csv"
STATUS = "status"
TAIL = (
    "device",
    "gpu_peak_mb",  # the most GPU memory the job held (NVML, or its own report); "": unknown
    "gpu_cap_mb",  # the GPU memory cap it ran under; "": none (the CPU)
    "start",
    "end",
    "wall_time_s",
    "attempts",
    "run_dir",
    "config_hash",
    "error",
    "return",  # the task's return value as JSON: what resume hands the sweeper again
)
REQUIRED = ("job", STATUS, "run_dir", "config_hash")
# While jobs end, the file is rewritten at most this often (each rewrite is the whole file,
# fsync'd); the sweep always writes it when it ends, is stopped, or fails.
SAVE_INTERVAL_S = 0.5
# Beyond this many rows the interval grows with the table, up to MAX_SAVE_INTERVAL_S: a write
# costs every row, so a 1,000-job sweep's writes cost each job what a 100-job sweep's do.
ROWS_PER_INTERVAL = 100
MAX_SAVE_INTERVAL_S = 10.0


class ResultsFileError(CompactHydraException):
    """A results.csv this launcher cannot read: the message names the file, the problem, the fix."""


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
        self._saved = -SAVE_INTERVAL_S  # monotonic time of the last write
        self._dirty = False
        self.params: list[str] = list(params)
        self.values: list[str] = list(values)
        self.rows: dict[int, dict[str, str]] = {int(r["job"]): dict(r) for r in rows}

    @classmethod
    def load(cls, sweep_dir: Path) -> ResultsTable:
        """The sweep dir's table; empty if it has none. Raises ResultsFileError, in one line,
        for a file this launcher did not write or that was edited since."""
        path = sweep_dir / FILENAME
        if not path.exists():
            return cls(path)
        try:
            with path.open(newline="") as f:
                reader = csv.DictReader(f)
                fields = list(reader.fieldnames or [])
                rows = list(reader)
        except (OSError, UnicodeDecodeError, csv.Error) as err:
            raise _unreadable(path, f"cannot be read ({err})") from None
        missing = [c for c in REQUIRED if c not in fields]
        if missing:
            raise _unreadable(path, f"has no {', '.join(missing)} column")
        status_at = fields.index(STATUS)
        params = [c for c in fields[1:status_at] if c not in TAIL]
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
        """Record a job's row (replacing its earlier row, if any); the file is rewritten now,
        or within SAVE_INTERVAL_S by `flush` (the sweep's loop calls it)."""
        for key in params:
            if key not in self.params:
                self.params.append(key)
        fixed = {"job", STATUS, *TAIL}
        for key in row:
            if key not in fixed and key not in self.values and key not in self.params:
                self.values.append(key)
        cells = {k: "" if v is None else str(v) for k, v in row.items()} | dict(params)
        self.rows[int(str(row["job"]))] = cells
        self._dirty = True
        self.flush()

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

    def relocate(self, nums: Iterable[int], run_dir: Path) -> None:
        """Point these rows at `run_dir`, where their run dir was moved; written at once, so
        the file never names a dir that holds another job's run."""
        for num in nums:
            self.rows[num]["run_dir"] = str(run_dir)
        self.save()

    def save(self) -> None:
        columns = ["job", *self.params, STATUS, *self.values, *TAIL]
        text = io.StringIO()
        writer = csv.DictWriter(
            text, fieldnames=columns, extrasaction="ignore", lineterminator="\n"
        )
        writer.writeheader()
        for num in sorted(self.rows):
            row = self.rows[num]
            writer.writerow({c: _one_line(row.get(c, "")) for c in columns})
        write_text_atomic(self.path, text.getvalue())
        self._saved, self._dirty = time.monotonic(), False

    def set_aside(self) -> Path | None:
        """Move an existing results.csv out of the way, unread (resume=false): it is kept as
        results.csv.bak (or .bak2, ...), never overwritten. Returns where it went."""
        if not self.path.exists():
            return None
        n = 1
        while (target := self.path.with_name(f"{FILENAME}.bak{n if n > 1 else ''}")).exists():
            n += 1
        self.path.rename(target)
        return target


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
