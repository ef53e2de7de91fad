"""What every backend must do, as one suite (Hydra's LauncherTestSuite is the model, and is part
of it): a backend's test file subclasses `BackendSuite` and names its backend. The real ones
run it in tests/test_backends.py (local) and tests/test_ray.py (Ray); a test backend kept whole
in its own file, tests/test_subprocess_backend.py, runs it too."""

from __future__ import annotations

import inspect
import os
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from apps.probe import probe
from conftest import PROBE, read_records
from hydra.core.utils import JobStatus
from hydra.test_utils.launcher_common_tests import LauncherTestSuite
from hydra.version import VersionBase

from hpsearch_launcher.config import LauncherSettings
from hpsearch_launcher.execute.backend import Execution
from hpsearch_launcher.plan.backends import BACKENDS

# A job's own end, whichever backend ran it: mode, the reason in its JobReturn and its row (in
# any case: a segfault is "killed by SIGSEGV (segmentation fault)" where the exit status is
# known, Python's "Segmentation fault" where it is not, on Ray).
FAULTS = [
    ("raise", "valueerror: probe asked to raise"),
    ("exit", "exited with status 3"),
    ("segfault", "segmentation fault"),
]


def assert_shared_signature(opener: Any) -> None:
    """Every backend's opener: (settings, task, sweep_dir) -> an Execution (plan/backends.py)."""
    assert callable(opener)
    assert list(inspect.signature(opener).parameters) == ["settings", "task", "sweep_dir"]
    hints = typing.get_type_hints(opener)
    assert [hints["settings"], hints["task"], hints["sweep_dir"]] == [LauncherSettings, bytes, Path]
    assert issubclass(hints["return"], Execution)


class BackendSuite(LauncherTestSuite):
    backend: str  # hydra.launcher.backend=<it>
    extra: tuple[str, ...] = ()  # the overrides it needs besides

    @pytest.fixture(autouse=True)
    def hydra_default_version_base(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Hydra's version base as in Hydra's own test runs (test_launcher_conformance.py's
        fixture: importing hpsearch.app sets it)."""
        default = VersionBase.__new__(VersionBase)
        default.__init__()  # type: ignore[misc]
        monkeypatch.setattr(VersionBase.instance(), "version_base", default.version_base)

    @pytest.fixture
    def launcher_name(self) -> str:
        return "hpsearch"

    @pytest.fixture
    def overrides(self) -> list[str]:
        """Hydra's suite reads numbered run dirs: asked for, as a user keeps them."""
        return [
            f"hydra.launcher.backend={self.backend}",
            "hydra.sweep.subdir=${hydra.job.num}",
            "hydra.launcher.n_jobs=2",
            *self.extra,
        ]

    def test_its_opener_has_the_shared_signature(self) -> None:
        assert_shared_signature(BACKENDS[self.backend].resolve())

    @pytest.mark.slow
    @pytest.mark.parametrize(("mode", "reason"), FAULTS, ids=[f[0] for f in FAULTS])
    def test_each_job_has_a_fresh_process_and_a_failing_one_fails_alone(
        self, launch_app, mode: str, reason: str, marks: Path, tmp_path: Path
    ) -> None:
        jobs = [["x=1"], [f"mode={mode}", "x=2"], ["x=3"]]
        returns = launch_app(
            PROBE.parent / "conf",
            "probe",
            probe,
            jobs,
            f"hydra.launcher.backend={self.backend}",
            "hydra.launcher.n_jobs=3",
            *self.extra,
        )
        assert [r.overrides[:-1] for r in returns] == jobs  # one per job, in input order
        statuses = [r.status for r in returns]
        assert statuses == [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.COMPLETED]
        assert returns[0].return_value == 1.0 and returns[2].return_value == 3.0
        with pytest.raises(Exception) as error:
            _ = returns[1].return_value
        assert reason in f"{error.type.__name__}: {error.value}".lower()
        rows = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
        assert sorted(rows["status"]) == ["completed", "completed", "failed"]
        assert reason in rows.loc[rows["mode"] == mode, "error"].iloc[0].lower()
        pids = [r["pid"] for r in read_records(marks)]
        assert len(set(pids)) == len(pids) and os.getpid() not in pids
