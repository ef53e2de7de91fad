"""One sweep per sweep dir: a lock file, `.hpsearch-lock`, held while a sweep process runs.

The lock is an flock on an fd the sweep keeps open: the kernel drops it when the process
ends, however it ends, so a SIGKILLed sweep never leaves a stale lock on a local filesystem.
The file also names its holder (pid, host, process start time, and a heartbeat it refreshes
every HEARTBEAT_S), for two reasons: a refusal can say who holds the dir, and where flock is
not shared between processes (some network filesystems lock per client, or not at all) a live
holder is still seen — on this host by its pid, on another host by a heartbeat younger than
STALE_AFTER_S. The holder removes the file as it lets go, while it still holds the flock, so
no empty file is left behind; a taker that opened the file just before takes its flock on a
removed file, sees the path is no longer its file, and opens it anew (the usual race of
removing a lock file, closed so).

A process takes a sweep dir once and may take it again (Optuna launches a batch at a time; a
test or notebook may run a sweep twice): the lock lives as long as someone in the process
keeps the `SweepLock` (the sweep's records do), and at the latest until the process exits.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import weakref
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil
from hydra.errors import CompactHydraException

from ..disk_errors import writing

log = logging.getLogger("hpsearch.launcher")

LOCK_FILE = ".hpsearch-lock"
HEARTBEAT_S = 10.0  # how often the holder rewrites its line
STALE_AFTER_S = 60.0  # a holder on another host not heard from for this long is gone
# A holder writes its line just after it takes the flock; a refusal that met the lock in between
# waits this long for the line, so that it can name the holder.
NAMED_WITHIN_S = 5.0
# flock errors that mean "no locks on this filesystem", not "someone holds it".
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class SweepDirLocked(CompactHydraException):
    """Another sweep holds the sweep dir: raised before results.csv is read or set aside."""


@dataclass(frozen=True)
class Holder:
    """Who holds a sweep dir, as its lock file says."""

    pid: int
    host: str
    started: float  # the process's start time (epoch s): a reused pid has another
    heartbeat: float  # when it last wrote (epoch s)

    @classmethod
    def this_process(cls) -> Holder:
        now = time.time()
        return cls(os.getpid(), socket.gethostname(), psutil.Process().create_time(), now)

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder of a lock file's first line; None for an empty or unreadable file."""
        try:
            data = json.loads(text.partition("\n")[0])
            pid, host = int(data["pid"]), str(data["host"])
            return cls(pid, host, float(data["started"]), float(data["heartbeat"]))
        except (ValueError, TypeError, KeyError):
            return None

    def line(self) -> str:
        return json.dumps(asdict(self)) + "\n"

    def blocks(self, now: float) -> bool:
        """Whether it still holds the dir. On this host: its process runs (and is not this
        one, which takes its own dir again). Elsewhere: it wrote lately."""
        if self.host != socket.gethostname():
            return now - self.heartbeat < STALE_AFTER_S
        if self.pid == os.getpid():
            return False
        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) < 1.0
        except psutil.Error:  # no such process, or a zombie
            return False


class SweepLock:
    """This process's hold on a sweep dir; let go by close(), or when no one keeps it."""

    def __init__(self, path: Path, fd: int, holder: Holder) -> None:
        self.path = path
        self.holder = holder
        stop = threading.Event()
        beat = threading.Thread(
            target=_heartbeat, args=(fd, holder, stop), name="hpsearch-sweep-lock", daemon=True
        )
        beat.start()
        # Only plain values in the finalizer and the thread: either holding `self` would keep
        # the lock forever.
        self._release = weakref.finalize(self, _release, fd, path, stop, beat)

    def close(self) -> None:
        self._release()

    @property
    def closed(self) -> bool:
        return not self._release.alive


_HELD: weakref.WeakValueDictionary[str, SweepLock] = weakref.WeakValueDictionary()


def hold_sweep_dir(sweep_dir: Path) -> SweepLock:
    """Take the sweep dir for this process, or raise SweepDirLocked naming its holder."""
    path = sweep_dir.absolute() / LOCK_FILE  # a refusal names it wherever it is read
    key = os.path.realpath(path)
    held = _HELD.get(key)
    if held is not None and not held.closed:
        return held
    lock = _take(path)
    _HELD[key] = lock
    return lock


def _take(path: Path) -> SweepLock:
    fd, locked = _open_locked(path)
    try:
        other = _read(fd) if locked is not False else _named_holder(fd)
        now = time.time()
        if locked is False or (other is not None and other.blocks(now)):
            raise SweepDirLocked(refusal(path, other, now, flock_held=locked is False))
        if other is not None:
            log.info(
                "hpsearch: sweep dir %s: its last sweep (pid %d on %s) is gone: taking it over",
                path.parent,
                other.pid,
                other.host,
            )
        holder = Holder.this_process()
        with writing(path):
            _write(fd, holder)
    except BaseException:
        os.close(fd)  # drops the flock too
        raise
    return SweepLock(path, fd, holder)


def _open_locked(path: Path) -> tuple[int, bool | None]:
    """An fd on the lock file and what its flock gave (see _flock); where the holder removed
    the file between this open and this flock, the new file, opened anew."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # the umask applies; not inherited
        try:
            locked = _flock(fd, path)
        except BaseException:
            os.close(fd)
            raise
        if locked is not True or _is_at(fd, path):
            return fd, locked
        os.close(fd)  # a removed file: its flock keeps no one out


def _is_at(fd: int, path: Path) -> bool:
    """Whether `path` is still the file `fd` is open on."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _read(fd: int) -> Holder | None:
    return Holder.parse(os.pread(fd, 4096, 0).decode(errors="replace"))


def _named_holder(fd: int) -> Holder | None:
    """The line of a live flock's holder, waited for up to NAMED_WITHIN_S."""
    deadline = time.monotonic() + NAMED_WITHIN_S
    while (other := _read(fd)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return other


def _flock(fd: int, path: Path) -> bool | None:
    """True: locked; False: another process holds it; None: this filesystem has no locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as err:
        if err.errno not in NO_LOCKS:
            raise
        log.warning(
            "hpsearch: %s: no file locks on this filesystem (%s): only the pid and heartbeat "
            "written in it keep a second sweep out",
            path,
            os.strerror(err.errno),
        )
        return None
    return True


def refusal(path: Path, holder: Holder | None, now: float, *, flock_held: bool) -> str:
    """What the refused sweep prints: who holds the dir, and what to do about it."""
    sweep_dir = path.parent
    if holder is None:
        who = f"another sweep holds it (it has not written its pid into {path} yet)"
        stop = "stop it"
    else:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.started))
        who = f"pid {holder.pid} on host {holder.host}, running since {since}, holds it"
        stop = f"stop it (kill {holder.pid} on {holder.host})"
    text = (
        f"sweep dir {sweep_dir} is in use: {who}; wait for that sweep to end, {stop}, or run "
        f"this one with another hydra.sweep.dir"
    )
    if holder is not None and holder.host != socket.gethostname():
        if flock_held:
            text += f" (if {holder.host} is down and its lock stays, remove {path})"
        else:
            age = max(0.0, now - holder.heartbeat)
            text += (
                f" (its heartbeat is {age:.0f} s old: if {holder.host} is down, the dir is free "
                f"once it is {STALE_AFTER_S:.0f} s old, or remove {path})"
            )
    return text


def _write(fd: int, holder: Holder) -> None:
    """The holder's line, written in place. A reader reads only the first line, so a longer
    earlier content cut short by ftruncate never shows."""
    data = holder.line().encode()
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def _heartbeat(fd: int, holder: Holder, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        try:
            _write(fd, replace(holder, heartbeat=time.time()))
        except OSError:  # a network filesystem's hiccup: the next beat tries again
            continue


def _release(fd: int, path: Path, stop: threading.Event, beat: threading.Thread) -> None:
    """Stop the heartbeat, remove the file under the flock (where it cannot be removed, empty
    it: no holder, the next sweep takes the dir without a second look), then let go."""
    stop.set()
    beat.join(timeout=HEARTBEAT_S)
    try:
        if _is_at(fd, path):
            os.unlink(path)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
    os.close(fd)
