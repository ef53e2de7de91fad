"""preload: auto (the default): spares import ahead what the jobs were seen to import, never a
module that takes a GPU, and a module that fails or hangs ahead of a job never harms one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, Runner, processes_tagged, read_records, roles

pytestmark = pytest.mark.slow

ONE_AT_A_TIME = ("hydra.launcher.n_jobs=1", "sleep=1")


def test_a_module_the_task_imports_is_imported_ahead_from_the_third_job_on(
    runner: Runner, marks: Path
) -> None:
    """No preload setting: job 0 (cold) teaches the sweep that its task imports the marker."""
    args = runner.probe_sweep(marks, "x=0,1,2,3,4", "imports=[preload_marker]", *ONE_AT_A_TIME)
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    assert records[0]["preloaded_at"] is None  # the first job starts cold
    for r in records[2:]:
        assert r["preloaded_at"] is not None, f"job {r['num']} imported the marker itself"
        assert r["preloaded_at"] < r["start"]
    assert "preload" not in result.stdout  # nothing to warn about
    assert roles(processes_tagged(runner.tag))["spare"] == 0


@pytest.mark.parametrize("moody", ["raise", "hang"])
def test_a_learned_module_that_fails_or_hangs_ahead_never_harms_a_job(
    runner: Runner, marks: Path, tmp_path: Path, moody: str
) -> None:
    """moody_module imports fine in a job, but raises or hangs in a waiting process: every job
    still runs (one handed to a spare that hangs there gets a cold process), one warning."""
    args = runner.probe_sweep(
        marks, "x=0,1,2,3,4,5", "imports=[moody_module]", *ONE_AT_A_TIME, "sleep=1.5"
    )
    env = {"PROBE_MOODY": moody, "HPSEARCH_PRELOAD_TIMEOUT": "3"}
    result = runner.run(args, env=env)
    assert result.returncode == 0, result.stdout
    assert len(read_records(marks)) == 6
    assert set(pd.read_csv(tmp_path / "sweep" / "results.csv")["status"]) == {"completed"}
    warnings = [line for line in result.stdout.splitlines() if "preload moody_module" in line]
    assert len(warnings) == 1, result.stdout
    assert ("ImportError" if moody == "raise" else "still at it after 3 s") in warnings[0]
    assert roles(processes_tagged(runner.tag))["spare"] == 0


def test_a_module_that_takes_a_gpu_at_import_is_never_imported_ahead(
    runner: Runner, marks: Path
) -> None:
    """`theano` (here a stand-in that notes each import) is on the deny-list: every import of
    it is a job's own, inside its task."""
    args = runner.probe_sweep(marks, "x=0,1,2,3", "imports=[theano]", *ONE_AT_A_TIME)
    path = os.pathsep.join([str(REPO / "tests" / "apps" / "gpu_at_import"), *sys.path])
    result = runner.run(args, env={"PYTHONPATH": path, "PROBE_MARKS": str(marks)})
    assert result.returncode == 0, result.stdout
    imports = [line.split() for line in (marks / "theano.log").read_text().splitlines()]
    pids = sorted(r["pid"] for r in read_records(marks))
    assert sorted(int(pid) for pid, _ in imports) == pids  # once per job, in no other process
    assert {when for _, when in imports} == {"job"}  # by the task itself, never ahead
