"""A test hook: the sweep process kills itself with SIGKILL at a named instant, so a test can
aim a kill at the worst moments (between a job's end and its record, between the record and
the search's tell, in the middle of a results.csv rewrite) instead of hoping to hit them."""

from __future__ import annotations

import os
import signal

CRASH_AT = "HPSEARCH_TEST_CRASH_AT"  # "POINT" or "POINT:N": kill at the Nth pass of POINT
POINTS = ("job-ended", "recorded", "csv-written")  # the instants below, in a job's order
_passes: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process if CRASH_AT names `name` and this is the pass it counts to."""
    wanted = os.environ.get(CRASH_AT)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
