"""The SLURM jobs a sweep has submitted, one JSON line each in its sweep dir, written before
the job can end: which job of the sweep each one runs (its config hash and overrides, its run
dir, its attempt) and where it hands its end back (submitit's result file, its start file).
A sweep killed with SIGKILL leaves it behind; the next run of the sweep (which holds the sweep
dir's lock, so the writer is gone) reads it to adopt those jobs (adopt.py) instead of
submitting them again. Pure reading: `read_entries` takes the text, a cut or foreign line is
left out and counted."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...contract import END_FILE

log = logging.getLogger("hpsearch.launcher")

LEDGER = ".hpsearch-slurm-jobs"  # in the sweep dir


@dataclass(frozen=True)
class Entry:
    """One submitted attempt of one job."""

    job_id: str  # SLURM's
    config_hash: str  # the job's identity across runs of the sweep (plan.jobs.config_hash)
    overrides: tuple[str, ...]
    run_dir: str  # where it runs: its logs, reports and end file
    attempt: int  # 1 for the first
    result: str  # submitit's result pickle, written when its process returns
    started: str  # its start file, written where it runs when it begins
    submitted: float  # epoch s

    def ended(self) -> bool:
        """Whether its task is done: its end file or its result is there (its process may
        still be winding down)."""
        return (Path(self.run_dir) / END_FILE).exists() or Path(self.result).exists()

    def line(self) -> str:
        return json.dumps(asdict(self)) + "\n"


def read_entries(text: str) -> tuple[list[Entry], int]:
    """The entries in a ledger's text, the last one of each run dir (a job's later attempt
    replaces its earlier), in the order they were written; and how many lines are no entry
    (cut by a kill, or an older hpsearch's bare job id)."""
    latest: dict[str, Entry] = {}
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        entry = _entry(line)
        if entry is None:
            bad += 1
            continue
        latest.pop(entry.run_dir, None)  # the later attempt goes last, as it was written
        latest[entry.run_dir] = entry
    return list(latest.values()), bad


def _entry(line: str) -> Entry | None:
    try:
        data: Any = json.loads(line)
        return Entry(
            job_id=_text(data["job_id"]),
            config_hash=_text(data["config_hash"]),
            overrides=tuple(_text(o) for o in data["overrides"]),
            run_dir=_text(data["run_dir"]),
            attempt=int(data["attempt"]),
            result=_text(data["result"]),
            started=_text(data["started"]),
            submitted=float(data["submitted"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"not a non-empty string: {value!r}")
    return value


class Ledger:
    """The sweep dir's ledger: an earlier run's entries read once, this run's appended."""

    def __init__(self, sweep_dir: Path) -> None:
        self.path = sweep_dir / LEDGER

    def earlier(self) -> list[Entry]:
        """What earlier runs of the sweep submitted and never saw end (they were killed)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        entries, bad = read_entries(text)
        if bad:
            log.warning(
                "hpsearch: %s: %d lines are no SLURM job entry (cut by a kill, or written by "
                "an older hpsearch): left out, their jobs are not adopted",
                self.path,
                bad,
            )
        return entries

    def add(self, entry: Entry) -> None:
        """Kept beside the earlier entries: those stay the sweep's until it ends. A line a
        kill cut short is ended first, so this one starts on its own."""
        with self.path.open("ab+") as f:  # appends land at the end, wherever it read
            size = f.seek(0, 2)
            cut = size > 0 and f.seek(size - 1) >= 0 and f.read(1) != b"\n"
            f.write((b"\n" if cut else b"") + entry.line().encode())

    def close(self) -> None:
        """The sweep ended with every job it adopted or submitted: nothing left to adopt."""
        self.path.unlink(missing_ok=True)
