"""A killed run's SLURM jobs, taken up by the next run of the sweep instead of submitted again:
`kill -9` of the sweep, then the same command, and nothing is submitted twice.

Each job the ledger lists (ledger.py) is looked up once, as the run starts: one SLURM knows
(pending, running, or ended and still listed, or in sacct where it answers), or whose result
file is there, is adoptable; one SLURM no longer knows and that left no result is gone, and its
job is submitted again. A job of this run with the same config hash and overrides takes the
first adoptable entry (each entry once) and waits on that SLURM job; the entries no job took
once the sweep has no more jobs (the sweep's settings changed) are cancelled (`rest`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from .ledger import Entry

log = logging.getLogger("hpsearch.launcher")


class Adoptions:
    """The adoptable entries an earlier, killed run of the sweep left."""

    def __init__(self, entries: Sequence[Entry], known: Callable[[list[str]], set[str]]) -> None:
        found = known([e.job_id for e in entries]) if entries else set()
        self.left = [e for e in entries if e.job_id in found or Path(e.result).exists()]
        self.handed: dict[str, Entry] = {}  # by job id: handed to a job, not yet watched
        gone = len(entries) - len(self.left)
        if gone:
            log.warning(
                "hpsearch: %d SLURM jobs an earlier run of this sweep submitted are gone from "
                "SLURM without a result: their jobs are submitted again",
                gone,
            )
        if self.left:
            log.info(
                "hpsearch: %d SLURM jobs an earlier run of this sweep submitted (it was "
                "killed) are adopted by the jobs of their configs, not submitted again",
                len(self.left),
            )

    def take(self, config_hash: str, overrides: tuple[str, ...]) -> Entry | None:
        """The first adoptable entry of this config and these overrides; each once."""
        for entry in self.left:
            if entry.config_hash == config_hash and entry.overrides == overrides:
                self.left.remove(entry)
                self.handed[entry.job_id] = entry
                return entry
        return None

    def watched(self, entry: Entry) -> None:
        """The job it was handed to waits on it now: the sweep ends it as its own."""
        self.handed.pop(entry.job_id, None)

    def rest(self) -> list[Entry]:
        """The entries no job took (or took but did not watch: its run dir was another's),
        no longer adoptable from now on."""
        rest = [*self.left, *self.handed.values()]
        self.left, self.handed = [], {}
        return rest
