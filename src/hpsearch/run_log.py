"""The job's log file, `hpsearch.log` in its run dir, unless the job's console already goes to
a file in that same dir.

The hpsearch launcher keeps each job's console (stdout) as its run dir's `stdout.log`, and the
console carries every log line: Hydra's file handler would write a second, identical copy. A
single run's console is a terminal or a pipe, so its run dir keeps `hpsearch.log`.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path
from typing import IO, Any


class RunLogFile(logging.FileHandler):
    """A FileHandler (hydra/job_logging: hpsearch) that writes nothing, and makes no file, when
    `console` (default: sys.stdout) already writes to a file in the log file's directory."""

    def __init__(self, filename: str, console: IO[str] | None = None, **kwargs: Any) -> None:
        super().__init__(filename, **(kwargs | {"delay": True}))  # no file until a record
        stream = sys.stdout if console is None else console
        self.redundant = writes_into(stream, Path(filename).parent)

    def emit(self, record: logging.LogRecord) -> None:
        if not self.redundant:
            super().emit(record)


def writes_into(stream: IO[str], directory: Path) -> bool:
    """Whether `stream` writes to a regular file in `directory`."""
    try:
        console = os.fstat(stream.fileno())
        if not stat.S_ISREG(console.st_mode):
            return False
        with os.scandir(directory) as entries:
            return any(os.path.samestat(console, e.stat()) for e in entries if e.is_file())
    except (AttributeError, OSError, ValueError):  # no file descriptor (a StringIO), no dir
        return False
