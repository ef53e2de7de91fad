"""The sweep dir around a refusal: checked before the sweeper makes it, and put back as it was
when the sweep is refused before any of its jobs ran.

Hydra's sweepers set up the launcher first, then make the sweep dir (the basic one also writes
multirun.yaml in it), then call launch(), where the settings and every job's config are
checked: so the launcher looks at the dir in setup() and, on a refusal, undoes only what the
sweeper and the refused sweep wrote.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from .atomic import write_text_atomic
from .output_dir import dirs_to_make, remove_made
from .record.lock import LOCK_FILE, SweepDirLocked, hold_sweep_dir

MULTIRUN_YAML = "multirun.yaml"  # the basic sweeper's copy of the sweep's config
# All that a refused sweep's new dir holds: the sweeper's copy of the config, and the lock.
LITTER = frozenset({MULTIRUN_YAML, LOCK_FILE})
_REMEMBERED: dict[
    Path, SweepDirBefore
] = {}  # looked at before the sweeper (SweepDirBefore.remember)


@dataclass(frozen=True)
class SweepDirBefore:
    """The sweep dir as it was before the sweeper touched it."""

    path: Path
    made: list[Path]  # the dirs the sweeper will make for it, outermost first; [] if it exists
    had_config: bool  # whether it held a multirun.yaml
    config: str | None  # that multirun.yaml's text (None if unreadable: left alone)

    @classmethod
    def remember(cls, config: DictConfig) -> None:
        """Look now, for the launcher's setup() to find: something runs before the sweeper
        that makes the dir itself (the summary callback, for a study kept in it)."""
        seen = cls._see(config)
        _REMEMBERED[seen.path.resolve()] = seen

    @classmethod
    def look(cls, config: DictConfig) -> SweepDirBefore:
        """OutputDirError if the sweep dir cannot be made or written in; else how it was
        before this sweep touched it (as remembered, if something looked earlier)."""
        path = Path(str(config.hydra.sweep.dir))
        return _REMEMBERED.pop(path.resolve(), None) or cls._see(config)

    @classmethod
    def peek(cls, config: DictConfig) -> SweepDirBefore:
        """As look(), leaving what was remembered for the launcher's own look()."""
        path = Path(str(config.hydra.sweep.dir))
        return _REMEMBERED.get(path.resolve()) or cls._see(config)

    @classmethod
    def _see(cls, config: DictConfig) -> SweepDirBefore:
        path = Path(str(config.hydra.sweep.dir))
        made = dirs_to_make(path, "hydra.sweep.dir")
        earlier = path / MULTIRUN_YAML
        text = None
        if earlier.is_file():
            try:
                with open(earlier, encoding="utf-8", newline="") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                pass
        return cls(path, made, earlier.is_file(), text)

    def restore(self) -> None:
        """After a refusal before any job of the sweep: a dir the sweeper made goes (and the
        dirs above it that it made) if only LITTER is in it; an earlier dir gets its
        multirun.yaml back (the lock file goes as this sweep lets go of the dir, as at any
        sweep's end). Its other files were never touched. Done holding the dir: one another
        sweep holds is that sweep's now."""
        if not self.path.is_dir() or (self.made and not set(os.listdir(self.path)) <= LITTER):
            return
        try:
            lock = hold_sweep_dir(self.path)  # this sweep's own hold, if it took one already
        except (SweepDirLocked, OSError):
            return
        try:
            if self.made:
                remove_made(self.made, lambda path: str(path) in LITTER)
                return
            if not self.had_config:
                (self.path / MULTIRUN_YAML).unlink(missing_ok=True)
            elif self.config is not None:
                write_text_atomic(self.path / MULTIRUN_YAML, self.config)
        finally:
            lock.close()
