"""A file the sweep cannot write (a full disk, a read-only or lost mount, no permission) as one
error naming that file: the sweep stops on it in one line, with the command that resumes
(`launch.one_line_errors`), instead of failing every job after it or printing tracebacks.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra.errors import CompactHydraException

# The errors that say the disk, not the job, is at fault: no room, no writing, no mount.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
DISK_ERRNOS = NO_ROOM | {
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.EIO,
    errno.ESTALE,  # NFS: the file's mount was lost
    errno.ENOTCONN,  # FUSE: its daemon is gone
    errno.ENODEV,
}


class CannotWrite(CompactHydraException):
    """The sweep could not write `path`: `err` says why; `ended` counts the running jobs the
    sweep ended as it stopped."""

    def __init__(self, path: str, err: OSError) -> None:
        super().__init__(f"cannot write {path}: [Errno {err.errno}] {err.strerror}")
        self.path = path
        self.err = err
        self.ended = 0

    @property
    def once(self) -> str:
        """When a resume can work: what has to change first."""
        if self.err.errno in NO_ROOM:
            return "once there is room"
        if self.err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return "once it can be written"
        return "once its filesystem is back"


def cannot_write(err: BaseException) -> CannotWrite | None:
    """`err` as a CannotWrite: one already, or a disk's OSError that names its file; None
    for any other error (the job's, or the code's)."""
    if isinstance(err, CannotWrite):
        return err
    if isinstance(err, OSError) and err.errno in DISK_ERRNOS and err.filename is not None:
        return CannotWrite(str(err.filename), err)
    return None


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """A disk's OSError inside, as a CannotWrite naming `path`: the file meant, where the
    error names a temporary file beside it, or none (a write to an open file)."""
    try:
        yield
    except OSError as err:
        if err.errno not in DISK_ERRNOS:
            raise
        raise CannotWrite(str(path), err) from err
