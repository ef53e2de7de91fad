"""The job's side of the report channel: a task reports its progress, the sweep may stop it.

    from hpsearch_launcher import report, should_stop

    for epoch in range(epochs):
        ...
        if report(val_accuracy, step=epoch):   # True: the sweep pruned this job
            save_checkpoint(); break

Reports go to a file in the job's run dir, one JSON line each (one append: nothing to lose if
the job then crashes, and a few microseconds an epoch); the sweep reads it as the job runs.
The sweep asks a job to stop by creating a file beside it, then ends its process tree after a
short grace. Outside a sweep of the hpsearch launcher both calls do nothing.
"""

from __future__ import annotations

import json
import math
import os
import sys

from .contract import REPORTS, STOP_FILE

_warned = False
_next_step = 0


def report(value: float, step: int | None = None) -> bool:
    """Report the job's objective `value` at `step` (default: 0, 1, 2, ... per call); return
    whether the sweep asks the job to stop. A NaN or a non-number is ignored (one warning)."""
    global _next_step, _warned
    path = os.environ.get(REPORTS)
    if not path:
        return False
    number = _number(value)
    if number is None or (step is not None and not isinstance(step, int)):
        if not _warned:
            _warned = True
            print(
                f"hpsearch: report({value!r}, step={step!r}) ignored: value must be a finite "
                "number and step an integer (warned once)",
                file=sys.stderr,
            )
        return should_stop()
    step = _next_step if step is None else step
    _next_step = step + 1
    line = json.dumps({"step": step, "value": number}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return should_stop()


def should_stop() -> bool:
    """Whether the sweep asked this job to stop (pruned): save what it needs and return."""
    path = os.environ.get(REPORTS)
    if not path:
        return False
    return os.path.exists(os.path.join(os.path.dirname(path), STOP_FILE))


def _number(value: object) -> float | None:
    """A finite float from a number (numpy's and TensorFlow's scalars too); None otherwise:
    text is no number here, even "0.9"."""
    if isinstance(value, (bool, str, bytes)):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
