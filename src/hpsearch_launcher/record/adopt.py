"""Ends a killed sweep never heard of: a job's process writes its return value into its run
dir (END_FILE) before it exits; if the sweep died before recording that end, a resumed sweep
adopts it instead of running the job again.

An end is adopted by the job of the same overrides, from a run dir named after them (`lr=0.1`,
`lr=0.1~2`, ...) that no results row names yet: each end is adopted once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from ..contract import END_FILE
from ..plan.jobs import Job, sweep_dir
from ..plan.naming import suffixed
from .superseded import FOLDER

log = logging.getLogger("hpsearch.launcher")
# Where Hydra writes a job's overrides as the job begins (hydra.output_subdir, its default).
HYDRA_OVERRIDES = Path(".hydra") / "overrides.yaml"


@dataclass(frozen=True)
class Adopted:
    run_dir: Path
    value: Any  # what the task returned
    ended: float  # when its process wrote the end (epoch s)


class Adopter:
    """Finds unrecorded ends for the jobs a sweep is about to run."""

    def __init__(self, rows: Mapping[int, Mapping[str, str]]) -> None:
        self._rows = rows
        self._named: set[Path] | None = None  # run dirs results rows name, resolved

    def find(self, job: Job) -> Adopted | None:
        """The end of `job`'s overrides a killed run left unrecorded, if there is one."""
        if not job.name:  # a run dir the user's hydra.sweep.subdir names (by job number, say)
            return None
        named = self._named_dirs()
        for path in _existing(sweep_dir(job), job.name):
            if path.resolve() in named:
                continue
            end = read_end(path)
            if end is not None and end.get("overrides") == list(job.overrides):
                named.add(path.resolve())
                return Adopted(path, end.get("return"), (path / END_FILE).stat().st_mtime)
        return None

    def unrecorded(self, sweep_dir: Path) -> tuple[list[list[str]], list[list[str]]]:
        """The overrides of each attempt a killed run left in a run dir of `sweep_dir` no row
        names: those that ended, in the order they ended, and those it left in flight (begun:
        Hydra wrote the job's .hydra/overrides.yaml; no end), in the order they began. A
        search whose study died with that run (in memory) asks them first again: an end is
        adopted, an attempt in flight taken up where the backend's cluster still runs it
        (SLURM), else run again: none lost, none run twice."""
        named = self._named_dirs()
        ends: list[tuple[float, list[str]]] = []
        begun: list[tuple[float, list[str]]] = []
        for path in sorted(sweep_dir.iterdir()) if sweep_dir.is_dir() else ():
            if not path.is_dir() or path.resolve() in named:
                continue
            end = read_end(path)
            if end is not None:
                overrides = end.get("overrides")
                if _is_overrides(overrides):
                    ends.append(((path / END_FILE).stat().st_mtime, overrides))
            elif (overrides := _begun(path)) is not None:
                begun.append(((path / HYDRA_OVERRIDES).stat().st_mtime, overrides))
        return _in_order(ends), _in_order(begun)

    def claimed(self, path: Path) -> None:
        """A job of this run took `path`: its end is this run's to record, never adopted."""
        self._named_dirs().add(path.resolve())

    def take(self, path: Path) -> bool:
        """Claim `path` for a job of this run that takes up the attempt a killed run left
        running there; False where a row names it or a job of this run took it already."""
        named = self._named_dirs()
        if path.resolve() in named:
            return False
        named.add(path.resolve())
        return True

    def abandoned(self, path: Path) -> bool:
        """Whether the run dir `path` is an attempt a killed run left unrecorded, with no end:
        no job of this run took it, no row names it, and it holds no end file (an end is
        adopted, never superseded). A row names it by its name too: a relative run_dir
        resolves to it only from where its run ran."""
        if path.resolve() in self._named_dirs() or (path / END_FILE).exists():
            return False
        recorded = (Path(row.get("run_dir", "")) for row in self._rows.values())
        return all(d.name != path.name or d.parent.name == FOLDER for d in recorded)

    def _named_dirs(self) -> set[Path]:
        if self._named is None:
            dirs = (row.get("run_dir", "") for row in self._rows.values())
            self._named = {Path(d).resolve() for d in dirs if d}
        return self._named


def _existing(parent: Path, name: str) -> Iterable[Path]:
    """`parent/name`, `parent/name~2`, ... while they exist."""
    for candidate in suffixed(name):
        path = parent / candidate
        if not path.is_dir():
            return
        yield path


def read_end(path: Path) -> dict[str, Any] | None:
    """The end file's content; None if there is none, or it is not whole JSON (said once)."""
    try:
        data = json.loads((path / END_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("hpsearch: %s is cut or unreadable (%s): that job runs again", path, err)
        return None
    return data if isinstance(data, dict) else None


def _is_overrides(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(o, str) for o in value)


def _begun(path: Path) -> list[str] | None:
    """The overrides of the job that began in run dir `path`, as Hydra wrote them; None if
    none began there (or Hydra's file is not a list of overrides)."""
    try:
        overrides = yaml.safe_load((path / HYDRA_OVERRIDES).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return overrides if _is_overrides(overrides) else None


def _in_order(found: list[tuple[float, list[str]]]) -> list[list[str]]:
    return [overrides for _, overrides in sorted(found, key=lambda item: item[0])]
