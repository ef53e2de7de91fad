"""plan/backends.py's table: each backend's opener, when it opens, its settings, what it needs
installed, whether it assigns GPUs; and the launcher's settings read from it, not by name."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import fields, replace
from typing import Any

import pytest
from backend_suite import BackendSuite, assert_shared_signature

from hpsearch_launcher.config import LauncherSettings
from hpsearch_launcher.plan.backends import BACKENDS, SECTIONS, BackendEntry
from hpsearch_launcher.plan.settings import (
    LauncherSettingsError,
    check_setting_key,
    parse_backend,
    parse_settings,
)

RAY_MISSING = (
    "hydra.launcher.backend=ray: Ray is not installed here; install it with "
    'pip install "hpsearch[ray]", or use hydra.launcher.backend=local'
)


@pytest.mark.parametrize("entry", BACKENDS.values(), ids=list(BACKENDS))
def test_every_opener_resolves_to_a_callable_with_the_shared_signature(entry: BackendEntry) -> None:
    """The table's own backends: each in its folder under execute/ (its opener module there)."""
    opener = entry.resolve()
    assert opener.__module__.startswith(f"hpsearch_launcher.execute.{entry.name}."), entry.opener
    assert_shared_signature(opener)


def test_the_table_names_each_backend_once_and_says_when_it_opens() -> None:
    """local opens first (its devices refuse a sweep before results.csv is touched); Ray and
    SLURM join their cluster only once the jobs are found good. The default backend is in the
    table."""
    assert {name: entry.name for name, entry in BACKENDS.items()} == {
        "local": "local",
        "ray": "ray",
        "slurm": "slurm",
    }
    assert BACKENDS["local"].opens_first and not BACKENDS["ray"].opens_first
    assert not BACKENDS["slurm"].opens_first
    assert LauncherSettings().backend in BACKENDS
    assert [entry.package for entry in BACKENDS.values()] == [None, "ray", "submitit"]
    assert BACKENDS["ray"].install == 'pip install "hpsearch[ray]"'
    assert BACKENDS["slurm"].install == 'pip install "hpsearch[slurm]"'


def test_each_section_is_a_setting_parsed_by_its_backends_parser() -> None:
    declared = {f.name for f in fields(LauncherSettings)}
    assert set(SECTIONS) == {"ray", "slurm"} and not set(SECTIONS) & declared
    parsed = parse_settings({"ray": {"address": "auto"}})
    assert parsed.section("ray") == SECTIONS["ray"].parse(
        {**SECTIONS["ray"].settings().__dict__, "address": "auto"}
    )
    with pytest.raises(LauncherSettingsError, match=r"^hydra\.launcher\.ray\.adress: no such"):
        check_setting_key("ray.adress")
    with pytest.raises(
        LauncherSettingsError, match=r"^hydra\.launcher\.ray='x': must be a mapping"
    ):
        parse_settings({"ray": "x"})


def test_an_unknown_backend_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings({"backend": "k8s"})
    assert str(err.value) == (
        "hydra.launcher.backend='k8s': must be one of local, ray, slurm "
        "(e.g. hydra.launcher.backend=ray)"
    )


def test_a_backend_whose_package_is_missing_is_refused_with_its_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "ray" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings({"backend": "ray"})
    assert str(err.value) == RAY_MISSING
    assert parse_settings({"backend": "local"}).backend == "local"  # needs nothing installed


def test_a_new_table_entry_is_read_not_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks come from the entry: a backend added to the table is accepted, its missing
    package refused with its own hint and title, its GPU rule its own."""
    k8s = BackendEntry(
        "k8s",
        "hpsearch_launcher.execute.k8s.k8s_execution",
        opens_first=False,
        title="Kubernetes",
        package="no_such_package_for_hpsearch_tests",
        install='pip install "hpsearch[k8s]"',
    )
    monkeypatch.setitem(BACKENDS, "k8s", k8s)
    with pytest.raises(LauncherSettingsError) as err:
        parse_backend("k8s", "auto")
    assert str(err.value) == (
        "hydra.launcher.backend=k8s: Kubernetes is not installed here; install it with "
        'pip install "hpsearch[k8s]", or use hydra.launcher.backend=local'
    )
    monkeypatch.setitem(BACKENDS, "k8s", replace(k8s, package=None))
    assert parse_backend("k8s", [0, 1]) == "k8s"  # it assigns no GPUs: a list is kept
    monkeypatch.setitem(BACKENDS, "k8s", replace(k8s, package=None, assigns_gpus=True))
    with pytest.raises(LauncherSettingsError, match="with backend=k8s, Kubernetes assigns"):
        parse_backend("k8s", [0, 1])


@pytest.mark.parametrize("name", [n for n, e in BACKENDS.items() if e.assigns_gpus])
def test_a_gpu_assigning_backend_refuses_explicit_gpus(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda *_: object())  # installed or not
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings({"backend": name, "gpus": [0, 1]})
    assert str(err.value) == (
        f"hydra.launcher.gpus=[0, 1]: with backend={name}, {BACKENDS[name].title} assigns each "
        "job its GPU: gpus must be auto (the cluster's GPUs) or [] (CPU only) "
        "(e.g. hydra.launcher.gpus=auto)"
    )
    assert parse_settings({"backend": name, "gpus": "auto"}).gpus is None
    assert parse_settings({"backend": name, "gpus": []}).gpus == ()


def test_the_local_backend_keeps_explicit_gpus() -> None:
    assert not BACKENDS["local"].assigns_gpus
    assert parse_settings({"backend": "local", "gpus": [0, 1]}).gpus == ("0", "1")


def test_reading_the_settings_imports_no_backend() -> None:
    """plan/ names each opener by its path: reading the settings imports nothing of execute/
    (nor Ray)."""
    code = (
        "import sys; from hpsearch_launcher.plan.settings import parse_settings; "
        "parse_settings({'backend': 'local'}); "
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('hpsearch_launcher.execute', 'ray.')) or m == 'ray'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class TestLocalBackend(BackendSuite):
    """The suite every backend runs (tests/backend_suite.py), on the local backend."""

    backend = "local"
