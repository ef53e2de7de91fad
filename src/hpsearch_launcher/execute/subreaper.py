"""`PR_SET_CHILD_SUBREAPER`, for both sides (execute.leftovers: why). Light: ctypes alone."""

from __future__ import annotations

import ctypes

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper(on: bool = True) -> bool:
    """Make this process the child subreaper of its descendants (Linux 3.4+): an orphan among
    them is reparented to it, not to init. Whether it is now. Not inherited across a fork."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no libc prctl: not Linux
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
