"""A warm spare as the sweep sees it, and what its processes tell the sweep on their status
pipe (execute.job.wire's `StatusLine`s, sent by execute.job.child_status): the lines read, and the
preload plan they feed (plan.preload).

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
from dataclasses import dataclass
from pathlib import Path

from ...plan.preload import PreloadPlan
from ..job.wire import Said, StatusLine, WireError, parse_status

log = logging.getLogger("hpsearch.launcher")
# A process importing one module ahead of its job longer than this (s) is replaced by a fresh
# one, and the module dropped: an import that hangs never holds a job.
PRELOAD_BOUND_S = float(os.environ.get("HPSEARCH_PRELOAD_TIMEOUT", "120"))


class StatusReader:
    """The sweep's end of a process's status pipe: whole lines, as they come, read. A line that
    is not one (nothing of ours writes such) is dropped with a warning that names it: what a
    process says is a hint, never worth a job or the sweep."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._partial = b""

    def lines(self, timeout: float = 0.0) -> list[StatusLine] | None:
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
        read = []
        for line in whole:
            try:
                read.append(parse_status(line.decode(errors="replace")))
            except WireError as err:
                log.warning("hpsearch: a process's status pipe: %s", err)
        return read

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass(eq=False)
class Spare:
    proc: subprocess.Popen[bytes]
    log: Path  # what it printed while it prepared: goes first into its job's stderr.log
    status: StatusReader
    has: set[str]  # every module asked of it
    batches: int = 1  # preload batches not yet answered `ready`
    importing: tuple[str, float] | None = None  # the module it imports now, since when


class Preloads:
    """The preload plan, fed by the status lines of spares and running jobs; warns once per
    module dropped."""

    def __init__(self, explicit: tuple[str, ...] | None) -> None:
        self.plan = PreloadPlan(explicit)
        self._lock = threading.Lock()

    def modules(self) -> list[str]:
        with self._lock:
            return self.plan.modules()

    def heard(self, line: StatusLine, spare: Spare | None = None) -> None:
        """One status line from a spare (`spare`) or a job's process (None)."""
        said = line.said
        log.debug("hpsearch: %s: %s", "a spare" if spare else "a job", line.format())
        if said is Said.IMPORTED:
            with self._lock:
                self.plan.learn(list(line.modules))
        elif said is Said.READY and spare is not None:
            spare.batches -= 1
        elif said is Said.PRELOADING and spare is not None:
            spare.importing = (line.name, time.monotonic())
        elif said in (Said.PRELOADED, Said.FAILED):
            if spare is not None:
                spare.importing = None
            if said is Said.FAILED:
                self.drop(line.name, f"failed in a waiting process ({line.why})")
            else:
                with self._lock:
                    self.plan.imported(line.name, line.seconds)

    def drop(self, name: str, why: str) -> None:
        with self._lock:
            warning = self.plan.failed(name, why)
        if warning:
            log.warning(warning)

    def died(self, spare: Spare, code: int) -> bool:
        """`spare`'s process ended (exit status `code`, or minus a signal) with what it said
        still in its pipe: if it was importing a module ahead, that module is dropped (else
        every next spare dies on it). Whether it was."""
        self.read(spare)  # its last lines: `preloading NAME` may be the one not yet heard
        if spare.importing is None:
            return False
        how = f"exit status {code}" if code >= 0 else f"signal {-code}"
        self.drop(spare.importing[0], f"a waiting process died importing it ({how})")
        return True

    def stuck(self, spare: Spare) -> bool:
        """Whether `spare` has been importing one module ahead for over PRELOAD_BOUND_S: then
        the caller replaces it, and the module is dropped here."""
        if spare.importing is None or time.monotonic() - spare.importing[1] < PRELOAD_BOUND_S:
            return False
        self.drop(
            spare.importing[0],
            f"a process importing it ahead of a job was still at it after {PRELOAD_BOUND_S:g} s "
            "(HPSEARCH_PRELOAD_TIMEOUT), and was replaced by a fresh one",
        )
        return True

    def read(self, spare: Spare) -> bool:
        """Take in what `spare` said since last asked; whether its imports are all done."""
        lines = spare.status.lines()
        for line in lines or ():
            self.heard(line, spare)
        return lines is not None and spare.batches <= 0
