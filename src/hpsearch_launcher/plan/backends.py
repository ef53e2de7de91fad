"""The backends, one entry each: where its opener is, when it opens, its own settings (their
dataclass and parser), what it needs installed, whether it assigns GPUs itself. A new backend is
one folder under execute/, one entry here and, if it has any, its settings' module (as
plan/ray_settings.py is Ray's); a backend kept outside the package (a plugin's, a test's) adds
its entry with `register`. The launcher's own settings (config.py), their checks
(plan/settings.py) and Hydra's config classes (launcher_conf.py) name no backend: they read
the sections here.

Light: an opener is named by its dotted path and imported only when the sweep opens it (plan
must not import execute, and the local backend must not pay for Ray's imports)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..config import LauncherSettings
from .ray_settings import RaySettings, parse_ray
from .slurm_settings import SlurmSettings, parse_slurm

# Every backend's opener: (settings, the pickled task, the sweep dir) -> its execute.backend
# Execution (Any here: plan does not import execute).
Opener = Callable[[LauncherSettings, bytes, Path], Any]


@dataclass(frozen=True)
class Section:
    """A backend's nested settings, hydra.launcher.<name>.*: checked whichever backend runs."""

    name: str
    # Its dataclass: each key's name, type, default and meaning, in comments above it (read
    # by `hpsearch --help` and docs/settings.md); no `from __future__ import annotations` in
    # its module (OmegaConf reads the annotations as types).
    settings: type
    parse: Callable[[Mapping[str, Any]], Any]  # its values (defaults overlaid) -> its settings
    example: str  # one of its keys, set, for a refusal's fix ("ray.address=auto")
    # Not None: a hydra/launcher option of its own, hpsearch_<name>, whose keys are also taken
    # in hydra.launcher itself, where a migrated config has them (SLURM's, as
    # hydra-submitit-launcher's submitit_slurm holds them), with these defaults over the
    # declared ones (the launcher's or the section's).
    flat: Mapping[str, Any] | None = None

    @property
    def flat_keys(self) -> frozenset[str]:
        """Its keys taken in hydra.launcher itself (none unless `flat`)."""
        if self.flat is None:
            return frozenset()
        return frozenset(f.name for f in fields(self.settings))


@dataclass(frozen=True)
class BackendEntry:
    name: str  # hydra.launcher.backend=<name>
    opener: str  # "package.module.function", an Opener
    # True: opened before results.csv is touched (its devices refuse a sweep first); False:
    # only once the jobs' feed is found good (joining a cluster is slow and may start one).
    opens_first: bool
    title: str = ""  # its name in a sentence ("Ray")
    section: Section | None = None  # its own settings, if any
    package: str | None = None  # what it needs installed beyond hpsearch, if anything
    install: str = ""  # how to install that package
    assigns_gpus: bool = False  # True: it gives each job its GPU, so gpus must be auto

    def resolve(self) -> Opener:
        """The opener, imported now (when the sweep opens the backend)."""
        module, _, function = self.opener.rpartition(".")
        found: Opener = getattr(importlib.import_module(module), function)
        return found


_EXECUTE = "hpsearch_launcher.execute"
BACKENDS: dict[str, BackendEntry] = {
    entry.name: entry
    for entry in (
        BackendEntry("local", f"{_EXECUTE}.local.machine.machine_execution", opens_first=True),
        BackendEntry(
            "ray",
            f"{_EXECUTE}.ray.driver.ray_execution",
            opens_first=False,
            title="Ray",
            section=Section("ray", RaySettings, parse_ray, "ray.address=auto"),
            package="ray",
            install='pip install "hpsearch[ray]"',
            assigns_gpus=True,
        ),
        BackendEntry(
            "slurm",
            f"{_EXECUTE}.slurm.driver.slurm_execution",
            opens_first=False,
            title="SLURM",
            section=Section(
                "slurm",
                SlurmSettings,
                parse_slurm,
                "slurm.partition=gpu",
                flat={"backend": "slurm", "submitit_folder": "${hydra.sweep.dir}/.submitit/%j"},
            ),
            package="submitit",
            install='pip install "hpsearch[slurm]"',
            assigns_gpus=True,
        ),
    )
}
SECTIONS = {e.section.name: e.section for e in BACKENDS.values() if e.section is not None}


def declared_settings() -> list[tuple[str, type]]:
    """Where hydra.launcher's settings are declared, in order, each with its keys' prefix:
    ("", LauncherSettings), then each backend's section's ("ray.", RaySettings), ..."""
    return [("", LauncherSettings), *((f"{n}.", s.settings) for n, s in SECTIONS.items())]


def fold_flat(given: Mapping[str, Any], known: Mapping[str, Any]) -> dict[str, Any]:
    """hydra.launcher as given, each section's keys given in hydra.launcher itself that are no
    launcher setting (`known`) moved into the section (hydra/launcher=hpsearch_slurm's, where
    submitit_slurm has them); those given in the section too win."""
    folded = dict(given)
    for name, section in SECTIONS.items():
        flat = {k: folded.pop(k) for k in list(folded) if k in section.flat_keys and k not in known}
        if flat:
            inner = folded.get(name)
            folded[name] = flat | dict(inner if isinstance(inner, Mapping) else {})
    return folded


def register(entry: BackendEntry) -> None:
    """Add a backend to the table (one kept outside this package: a plugin's, a test's), by a
    name not taken; its section, if any, by a name that is no launcher setting nor another
    section. A section is in Hydra's config (hydra.launcher.<name>.* on the command line)
    when it is registered before hpsearch's plugin is imported (at the import of the app's
    module, before @hydra.main runs); parse_settings reads it either way."""
    if entry.name in BACKENDS:
        raise ValueError(f"backend {entry.name!r} is in the table already")
    if entry.section is not None:
        taken = {f.name for f in fields(LauncherSettings)} | set(SECTIONS)
        if entry.section.name in taken:
            raise ValueError(
                f"backend {entry.name!r}: its section {entry.section.name!r} is a launcher "
                "setting or another backend's section already"
            )
        SECTIONS[entry.section.name] = entry.section
    BACKENDS[entry.name] = entry


def unregister(name: str) -> None:
    """Take a backend `register` added out of the table again."""
    entry = BACKENDS.pop(name)
    if entry.section is not None:
        SECTIONS.pop(entry.section.name, None)
