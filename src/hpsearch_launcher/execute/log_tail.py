"""A job's stderr as the sweep reads it, whichever backend ran the job: its end, and the line
of it that reads like the error."""

from __future__ import annotations

import re
from pathlib import Path

_ERROR_LINE = re.compile(r"error|exception|fatal|abort|killed|out of memory", re.IGNORECASE)


def last_error_line(text: str) -> str:
    """The last line of a job's stderr that reads like an error (e.g. `hpsearch: error: ...`,
    or an exception's last traceback line), cut to 300 characters; "" if none."""
    for line in reversed(text.splitlines()[-200:]):
        line = line.strip()
        if line and _ERROR_LINE.search(line):
            return line if len(line) <= 300 else line[:297] + "..."
    return ""


def file_tail(path: Path, max_bytes: int) -> str:
    """The last `max_bytes` of a file as text; "" if it cannot be read."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - max_bytes))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
