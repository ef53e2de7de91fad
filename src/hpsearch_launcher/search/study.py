"""The study: its storage (memory, an RDB URL, a journal file), made or loaded by name, its
direction checked against the settings'."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import optuna

from .config import SearchSettings
from .settings import fail

log = logging.getLogger("hpsearch.sweeper")
SQLITE = "sqlite:///"


def open_storage(url: str | None, sweep_dir: Path | None = None) -> optuna.storages.BaseStorage:
    """null: in memory; a path ending in .log: Optuna's journal file; else an RDB URL. A sqlite
    file in the sweep dir (sqlite:///${hydra.sweep.dir}/study.db) gets its folder made."""
    if url is None:
        return optuna.storages.InMemoryStorage()
    if "://" not in url:
        if not url.endswith(".log"):
            raise fail(
                "storage",
                url,
                "must be an RDB URL (sqlite:///study.db, postgresql://...) or a journal file "
                "path ending in .log",
                "storage=sqlite:///study.db",
            )
        return _journal(Path(url).expanduser())
    folder = Path(url[len(SQLITE) :]).expanduser().parent if url.startswith(SQLITE) else None
    if folder is not None and sweep_dir is not None and folder.is_relative_to(sweep_dir):
        folder.mkdir(parents=True, exist_ok=True)
    try:
        return optuna.storages.RDBStorage(url)
    except Exception as err:  # SQLAlchemy's many kinds: a bad URL, a missing driver, no file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise fail("storage", url, f"cannot be opened: {first}") from None


def _journal(path: Path) -> optuna.storages.BaseStorage:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Optuna 4 names the file backend JournalFileBackend; 3.x had JournalFileStorage.
    journal = getattr(optuna.storages, "journal", None)
    backend: Any = (
        getattr(journal, "JournalFileBackend", None) or optuna.storages.JournalFileStorage
    )
    return optuna.storages.JournalStorage(backend(str(path)))


def default_study_name(storage: optuna.storages.BaseStorage, sweep_dir: Path) -> str:
    """An unnamed study's name: the sweep dir's last two parts and a hash of its absolute path
    (`2026-12-07/10-00-00-3fa9c1d2`: readable in a listing of the storage, and another dir's
    study in a shared storage is another study). A study an earlier version named after the
    absolute path itself is continued under that name."""
    where = sweep_dir.resolve()
    try:
        storage.get_study_id_from_name(str(where))
    except KeyError:
        digest = hashlib.sha1(str(where).encode()).hexdigest()[:8]
        return f"{'/'.join(where.parts[-2:])}-{digest}"
    return str(where)


def open_study(
    settings: SearchSettings,
    storage: optuna.storages.BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
    sweep_dir: Path,
) -> optuna.Study:
    """The named study, made or loaded (a later run of the sweep continues it); unnamed, the
    sweep dir names it."""
    name = settings.study_name or default_study_name(storage, sweep_dir)
    study = optuna.create_study(
        storage=storage,
        sampler=sampler,
        pruner=pruner,
        study_name=name,
        directions=list(settings.direction),
        load_if_exists=True,
    )
    stored = tuple(d.name.lower() for d in study.directions)
    wanted = tuple(settings.direction)
    if stored != wanted:
        # Optuna would load it silently and search the other way.
        raise fail(
            "direction",
            wanted[0] if len(wanted) == 1 else list(wanted),
            f"the study {name!r} in {settings.storage} was made to {', '.join(stored)}: keep "
            "its direction, or name another study (hydra.sweeper.study_name)",
        )
    return study
