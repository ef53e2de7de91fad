"""A warm spare as the sweep sees it, and what its processes tell the sweep on their status
pipe (see execute.child): the lines read, and the preload plan they feed (plan.preload).

The plan is shared by the sweep's loop (which makes and checks spares) and the threads that
watch running jobs (which hear what the jobs import): its updates hold a lock.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..plan.preload import PreloadPlan

log = logging.getLogger("hpsearch.launcher")


class StatusReader:
    """The sweep's end of a process's status pipe: whole lines, as they come."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._partial = b""

    def lines(self, timeout: float = 0.0) -> list[str] | None:
        """The lines written since the last call, waiting up to `timeout` s for any; None once
        the pipe is closed (the process ended, or closed it) or was closed here."""
        if self.fd < 0:
            return None
        readable, _, _ = select.select([self.fd], [], [], timeout)
        if not readable:
            return []
        data = os.read(self.fd, 65536)
        if not data:
            self.close()
            return None
        *whole, self._partial = (self._partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in whole]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class Spare:
    proc: subprocess.Popen[bytes]
    log: Path  # what it printed while it prepared: goes first into its job's stderr.log
    status: StatusReader
    asked: list[str]  # modules asked of it, not yet imported (or failed)
    has: set[str] = field(default_factory=set)  # every module asked of it
    batches: int = 1  # preload batches not yet answered `ready`
    importing: tuple[str, float] | None = None  # the module it imports now, since when

    def __post_init__(self) -> None:
        self.has.update(self.asked)


class Preloads:
    """The preload plan, fed by the status lines of spares and running jobs; warns once per
    module dropped."""

    def __init__(self, explicit: tuple[str, ...] | None) -> None:
        self.plan = PreloadPlan(explicit)
        self._lock = threading.Lock()

    def modules(self) -> list[str]:
        with self._lock:
            return self.plan.modules()

    def unproven(self, names: list[str]) -> bool:
        with self._lock:
            return self.plan.unproven(names)

    def heard(self, line: str, spare: Spare | None = None) -> None:
        """One status line from a spare (`spare`) or a job's process (None)."""
        word, _, rest = line.partition(" ")
        if word == "imported":
            with self._lock:
                self.plan.learn(rest.split())
        elif word == "ready" and spare is not None:
            spare.batches -= 1
        elif word == "preloading" and spare is not None:
            spare.importing = (rest, time.monotonic())
        elif word in ("preloaded", "failed"):
            name, _, detail = rest.partition(" ")
            if spare is not None:
                spare.importing = None
                if name in spare.asked:
                    spare.asked.remove(name)
            if word == "failed":
                self.drop(name, f"failed in a waiting process ({detail})")
            else:
                with self._lock:
                    self.plan.imported(name, float(detail))

    def drop(self, name: str, why: str) -> None:
        with self._lock:
            warning = self.plan.failed(name, why)
        if warning:
            log.warning(warning)

    def read(self, spare: Spare) -> bool:
        """Take in what `spare` said since last asked; whether its imports are all done."""
        lines = spare.status.lines()
        for line in lines or ():
            self.heard(line, spare)
        return lines is not None and spare.batches <= 0
