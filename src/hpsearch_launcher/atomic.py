"""Atomic file writes: a reader never sees half a file, even if the writer is killed."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_text_atomic(
    path: Path, text: str, before_replace: Callable[[], None] | None = None
) -> None:
    """`write_bytes_atomic` of `text` in UTF-8."""
    write_bytes_atomic(path, text.encode(), before_replace)


def write_bytes_atomic(
    path: Path, data: bytes, before_replace: Callable[[], None] | None = None
) -> None:
    """Write `data` to a temporary file beside `path`, fsync it, then rename it into place.

    The file gets the mode a plain open() would (0o666 less the umask): mkstemp's 0600 would
    hide results from teammates on a shared server. `before_replace` runs once the temporary
    file is whole (a test hook kills the writer there).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (os.umask(0) would open
    a window in which another thread's files get mode 0666)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
