"""The SLURM jobs a sweep has submitted, one id a line in its sweep dir, so that none outlives
a sweep killed with SIGKILL unnoticed: the next run of the sweep (which holds the sweep dir's
lock, so the writer is gone) cancels those still queued or running before it submits its own,
and runs their jobs again. Adopting them instead is not done yet (docs/slurm.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("hpsearch.launcher")

LEDGER = ".hpsearch-slurm-jobs"  # in the sweep dir


class Ledger:
    def __init__(self, sweep_dir: Path) -> None:
        self.path = sweep_dir / LEDGER

    def cancel_left(
        self, queued: Callable[[Sequence[str]], Sequence[str]], cancel: Callable[[list[str]], None]
    ) -> None:
        """Cancel the jobs an earlier run of the sweep submitted that SLURM still holds
        (`queued`: those of these ids it holds); start a new ledger."""
        try:
            ids = self.path.read_text().split()
        except FileNotFoundError:
            ids = []
        left = list(queued(ids)) if ids else []
        if left:
            log.warning(
                "hpsearch: cancelled %d SLURM jobs an earlier run of this sweep left running "
                "(it was killed): their jobs run again",
                len(left),
            )
            cancel(left)
        self.path.write_text("")

    def add(self, job_id: str) -> None:
        with self.path.open("a") as f:
            f.write(f"{job_id}\n")

    def close(self) -> None:
        self.path.unlink(missing_ok=True)
