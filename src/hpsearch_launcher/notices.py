"""Warnings said once: each kind at most once, its first message only (a sweep's notices about
untrusted job output and trials, a job's about its own reports)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # logging is not imported at run time: the job-side API stays light
    import logging


class Notices:
    """Each kind of warning said at most once: its first message goes to `say`."""

    def __init__(self, say: Callable[[str], object]) -> None:
        self.seen: set[str] = set()
        self._say = say

    def warn(self, kind: str, message: str) -> None:
        if kind not in self.seen:
            self.seen.add(kind)
            self._say(message)


def once_per_sweep(log: logging.Logger) -> Notices:
    """A sweep's notices, to `log`: `hpsearch: <message> (said once per sweep)`."""
    return Notices(lambda message: log.warning("hpsearch: %s (said once per sweep)", message))
