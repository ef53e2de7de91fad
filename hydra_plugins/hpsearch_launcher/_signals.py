"""SIGINT and SIGTERM as an exception in the sweep's scheduling loop, so it can end its jobs."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class SweepInterrupted(BaseException):
    """SIGINT or SIGTERM reached the sweep process."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def signals_raise_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM become SweepInterrupted in the scheduling loop (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SweepInterrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
