"""A Hydra output dir (a sweep's hydra.sweep.dir, a run's hydra.run.dir): checked before Hydra
makes it, and removed again when the run is refused before anything ran in it.

Neither reaches beyond what this run made: `dirs_to_make` lists the dirs that do not exist yet,
and `remove_made` removes those only, and only while they hold nothing but what Hydra and the
refused run wrote there (the caller says what that is).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra.errors import CompactHydraException


class OutputDirError(CompactHydraException):
    """An output dir that cannot be made or written in: raised before Hydra tries."""


def dirs_to_make(path: Path, key: str) -> list[Path]:
    """The dirs of `path` that do not exist yet, outermost first ([] when it exists), absolute;
    OutputDirError when it cannot be made or written in. `key` names it in the message."""
    target = Path(os.path.abspath(path))
    missing: list[Path] = []
    base = target
    while not os.path.lexists(base):  # lexists: False, not an error, where a dir is unreadable
        missing.insert(0, base)
        base = base.parent
    fix = f"set {key} to a directory you can write in"
    made = "cannot make it: " if missing else ""
    if not base.is_dir():
        raise OutputDirError(f"{key}={path}: {made}{base} is not a directory; {fix}")
    # A real attempt, not os.access: root passes access() where mkdir still fails (/proc, an
    # immutable or read-only-mounted dir).
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hpsearch-probe-", dir=base))
    except OSError as err:
        where = f"in {base}" if missing else "in it"
        raise OutputDirError(
            f"{key}={path}: {made}cannot write {where} ({_why(err)}); {fix}"
        ) from None
    return missing


def _why(err: OSError) -> str:
    """The reason in words: a dir that exists but says "No such file or directory" to a new
    entry is a kernel filesystem (/proc, /sys), not a missing dir."""
    if err.errno == errno.ENOENT:
        return "it takes no new entries: a kernel filesystem such as /proc or /sys"
    return err.strerror or str(err)


def remove_made(made: Sequence[Path], written: Callable[[Path], bool]) -> bool:
    """Remove the dirs a refused run made (`made`: from dirs_to_make, outermost first) if the
    innermost holds only files that `written(path relative to it)` says Hydra and the run put
    there; whether it was removed. Anything else in it, or put in it meanwhile, keeps it and
    the dirs above it; so does a dir above that holds anything (another run's dir)."""
    if not made or not made[-1].is_dir():
        return False
    target = made[-1]
    files: list[Path] = []
    dirs: list[Path] = []
    for root, subdirs, names in os.walk(target):
        here = Path(root)
        if any((here / d).is_symlink() for d in subdirs):
            return False
        for name in names:
            if not written((here / name).relative_to(target)):
                return False
            files.append(here / name)
        dirs.append(here)
    try:
        for file in files:
            file.unlink()
        for directory in [*reversed(dirs), *reversed(made[:-1])]:
            directory.rmdir()
    except OSError:  # something appeared meanwhile, or a dir above holds other runs
        return not target.exists()
    return True
