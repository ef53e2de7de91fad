"""The local backend's scratch directory (the task's pickle, each job's ticket, the spares' early
logs): `hpsearch-*` in the temporary directory, removed when the sweep closes its backend.

A sweep killed with SIGKILL cannot remove its own. So each holds an exclusive `flock` on the
`.lock` file in its directory for as long as it lives (the kernel drops it with the process,
whatever ended it), and a sweep that starts removes every such directory whose lock it can take:
nobody holds it, its sweep is gone. A directory without that file (one being made, one of an
older version, someone else's) is left alone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "hpsearch-"
LOCK = ".lock"


class Scratch:
    """This sweep's scratch directory, locked while it lives."""

    def __init__(self) -> None:
        for left in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
            remove_if_abandoned(left)
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX))
        self._lock = os.open(self.path / LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def remove(self) -> None:
        """Remove the directory, then let go of its lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1


def remove_if_abandoned(path: Path) -> None:
    """Remove `path`, a scratch directory, if no live sweep holds its lock."""
    try:
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CLOEXEC)
    except OSError:  # no lock file (being made, not ours, an older version's) or not ours to open
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # its sweep lives
        os.close(fd)
        return
    shutil.rmtree(path, ignore_errors=True)
    os.close(fd)
