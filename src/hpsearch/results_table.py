"""results.csv: one row per job of a sweep, rewritten atomically as each job ends.

A row's identity is the hash of its job's resolved config, so a resumed sweep updates the row
of a job it re-runs instead of adding a second one. No pandas here: the launcher's parent
process writes this file, and it stays light.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from pathlib import Path

from hpsearch.atomic import write_text_atomic

FILENAME = "results.csv"
METRICS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy")
# Columns before and after the swept parameters.
HEAD = ("job",)
TAIL = (
    "status",
    "objective",
    *METRICS,
    "gpu",
    "start",
    "end",
    "wall_time_s",
    "attempts",
    "run_dir",
    "config_hash",
    "error",
)
STATUSES = ("completed", "resumed", "failed", "timeout", "interrupted")
DONE = ("completed", "resumed")  # statuses whose objective a resumed sweep reuses


class ResultsTable:
    """The rows of one sweep dir's results.csv, keyed by config hash, in first-seen order."""

    def __init__(
        self, path: Path, rows: Iterable[Mapping[str, str]] = (), params: Iterable[str] = ()
    ) -> None:
        self.path = path
        self.params: list[str] = list(params)
        self.rows: dict[str, dict[str, str]] = {}
        for row in rows:
            self.rows[row["config_hash"]] = dict(row)

    @classmethod
    def load(cls, sweep_dir: Path) -> ResultsTable:
        path = sweep_dir / FILENAME
        if not path.exists():
            return cls(path)
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            fields = list(reader.fieldnames or [])
            params = [c for c in fields if c not in HEAD and c not in TAIL]
            return cls(path, list(reader), params)

    def max_job(self) -> int:
        """The highest job number recorded, -1 for none."""
        return max((int(r["job"]) for r in self.rows.values() if r.get("job")), default=-1)

    def put(self, row: Mapping[str, object], params: Mapping[str, str]) -> None:
        """Record a job's row (replacing its earlier row, if any) and rewrite the file."""
        for key in params:
            if key not in self.params:
                self.params.append(key)
        cells = {k: "" if v is None else str(v) for k, v in row.items()}
        cells |= params
        self.rows[str(row["config_hash"])] = cells
        self.save()

    def save(self) -> None:
        columns = [*HEAD, *self.params, *TAIL]
        text = io.StringIO()
        writer = csv.DictWriter(
            text, fieldnames=columns, extrasaction="ignore", lineterminator="\n"
        )
        writer.writeheader()
        for row in sorted(self.rows.values(), key=lambda r: int(r.get("job") or 0)):
            writer.writerow({c: _one_line(row.get(c, "")) for c in columns})
        write_text_atomic(self.path, text.getvalue())


def _one_line(value: str) -> str:
    return " ".join(str(value).split()) if "\n" in str(value) or "\r" in str(value) else value
