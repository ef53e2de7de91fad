"""`PR_SET_CHILD_SUBREAPER`, for both sides (execute.local.leftovers: why), and a process's
descendants as /proc lists them. Light: ctypes and the standard library alone."""

from __future__ import annotations

import ctypes
import os

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper(on: bool = True) -> bool:
    """Make this process the child subreaper of its descendants (Linux 3.4+): an orphan among
    them is reparented to it, not to init. Whether it is now. Not inherited across a fork."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no libc prctl: not Linux
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)


def descendants(pid: int) -> list[int]:
    """The processes below `pid`, read from /proc (light: no psutil in a job's process). Below a
    subreaper, that is every process it started that is still running."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(int(entry))
        try:
            ppid = int(fields[1])
        except (ValueError, IndexError):  # gone meanwhile (no fields)
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def stat_fields(pid: int) -> list[bytes]:
    """/proc/PID/stat's fields after the command name (state, ppid, ...); [] if it is gone.
    The name is cut at its last `)`: a command name may hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []
