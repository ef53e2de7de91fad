"""What a job's process (a spare's, the fork server's) tells the sweep on its status pipe, and
the imports it does ahead of its job and tells of (execute.job.wire's `StatusLine`s): `preloading
NAME`, then `preloaded NAME SECONDS` or `failed NAME WHY`; `ready` once its imports are done;
while its job runs, `imported NAME ...` (what `preload: auto` learns). What a preload prints
goes nowhere: it is not the job's output.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .wire import Said, StatusLine

IMPORT_WATCH_S = 0.5  # how often a running job's new imports are looked for


class StatusPipe:
    """This process's line to the sweep (a pipe; -1: none). A sweep that stopped reading (it
    handed the job on, or ended) is no error: the line is lost, nothing else."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        if fd >= 0:
            os.set_inheritable(fd, False)  # the job's own subprocesses do not hold it open
        self._lock = threading.Lock()

    def send(self, line: StatusLine) -> None:
        if self.fd < 0:
            return
        with self._lock, contextlib.suppress(OSError):
            os.write(self.fd, (line.format() + "\n").encode())


class ImportWatch:
    """Tells the sweep the top-level packages the job imports, as it imports them (every
    IMPORT_WATCH_S, so spares learn while the first jobs still run): a thread that compares
    `sys.modules` with what this process had when the job began."""

    def __init__(self, status: StatusPipe) -> None:
        self.status = status
        self.seen = set(sys.modules)
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="hpsearch-import-watch", daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(IMPORT_WATCH_S)
            self.check()

    def check(self) -> None:
        with self._lock:
            now = sys.modules.copy()  # one C call: safe while another thread imports
            new = [n for n in now if n not in self.seen]
            self.seen.update(new)
        # Top-level names only (a dotted one is not an identifier), none made up by a package
        # (a hash, "_sysconfigdata__linux_x86_64-linux-gnu").
        found = [n for n in new if n.isidentifier() and n != "__main__" and _is_imported(now[n])]
        if found:
            self.status.send(StatusLine(Said.IMPORTED, modules=tuple(found)))


def _is_imported(module: Any) -> bool:
    """A module made by an import (it has a spec), not one a package put in sys.modules by
    hand. Read past the module's own attribute hooks: a lazy module would load on access."""
    try:
        return object.__getattribute__(module, "__dict__").get("__spec__") is not None
    except Exception:
        return False


def preload_modules(modules: Sequence[str], status: StatusPipe) -> None:
    """Import what the job will need, ahead of it, its output discarded; each import timed and
    told to the sweep. A failure is reported, not raised: the job meets it, if it needs it."""
    import importlib

    for name in modules:
        status.send(StatusLine(Said.PRELOADING, name=name))
        started = time.perf_counter()
        try:
            with _output_discarded():
                importlib.import_module(name)
        except BaseException as err:  # SystemExit at import too: the spare stays usable
            status.send(StatusLine(Said.FAILED, name=name, why=f"{type(err).__name__}: {err}"))
        else:
            seconds = time.perf_counter() - started
            status.send(StatusLine(Said.PRELOADED, name=name, seconds=seconds))
    status.send(StatusLine(Said.READY))


@contextlib.contextmanager
def _output_discarded() -> Iterator[None]:
    """fd 1 and 2 (C code writes there directly) at /dev/null, then back."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
