"""SIGINT and SIGTERM as a flag that the sweep's scheduling loop checks between its steps.

A flag, not an exception raised from the handler: an exception could land anywhere in the
loop (between a job's process starting and its being recorded as running, or inside a lock),
leaving a job nobody ends; the loop looks at the flag between its steps instead.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class StopRequest:
    """The first stop signal received, if any."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Record SIGINT and SIGTERM instead of dying (main thread only; elsewhere, no change)."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: Any) -> None:
        stop.signum = stop.signum or signum

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
