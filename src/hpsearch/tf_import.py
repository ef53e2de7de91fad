"""Import TensorFlow quietly: its C++ log level must be set before the import, and TF 2.16+
prints its start-up lines through absl before that level applies, so they are filtered here."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

# absl's prefix: severity letter, MMDD, then a time. Severities in TF_CPP_MIN_LOG_LEVEL order.
_ABSL_LINE = re.compile(r"^([IWEF])\d{4} ")
_SEVERITY = "IWEF"
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"


def import_tensorflow(log_level: int) -> Any:
    """`import tensorflow`, with C++ lines below `log_level` (0-3) kept off stderr."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", str(log_level))
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    with _stderr_filtered(int(os.environ["TF_CPP_MIN_LOG_LEVEL"])):
        import tensorflow as tf
    return tf


def keep_line(line: str, min_level: int) -> bool:
    """Whether a line TensorFlow printed at import passes the log level."""
    if line.startswith(_ABSL_PREAMBLE):
        return min_level == 0
    match = _ABSL_LINE.match(line)
    return match is None or _SEVERITY.index(match.group(1)) >= min_level


@contextlib.contextmanager
def _stderr_filtered(min_level: int) -> Iterator[None]:
    # C++ writes to file descriptor 2 directly: swapping sys.stderr would not catch it.
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines(keepends=True) if keep_line(line, min_level)]
            sys.stderr.write("".join(kept))
            sys.stderr.flush()
