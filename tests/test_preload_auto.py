"""preload: auto (the default): the fork server, or the spares (warm_start=spawn), import ahead
what the jobs were seen to import, never a module that takes a GPU, and a module that fails or
hangs ahead of a job never harms one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from apps.probe import probe
from conftest import PROBE, REPO, Runner, processes_tagged, read_records, roles

from hpsearch_launcher.execute.job.wire import parse_status
from hpsearch_launcher.execute.local.backend import LocalBackend
from hpsearch_launcher.execute.local.spare import StatusReader
from hpsearch_launcher.execute.local.spare_pool import env_key
from hpsearch_launcher.plan.settings import WARM_STARTS

pytestmark = pytest.mark.slow

ONE_AT_A_TIME = ("hydra.launcher.n_jobs=1", "sleep=1")
# Each way a process is made ahead: forked from the server (the default), or a spawned spare.
warm_starts = pytest.mark.parametrize("warm_start", WARM_STARTS)


@warm_starts
def test_a_module_the_task_imports_is_imported_ahead_from_the_third_job_on(
    runner: Runner, marks: Path, warm_start: str
) -> None:
    """No preload setting: job 0 (cold) teaches the sweep that its task imports the marker."""
    args = runner.probe_sweep(
        marks,
        "x=0,1,2,3,4",
        "imports=[preload_marker]",
        *ONE_AT_A_TIME,
        f"hydra.launcher.warm_start={warm_start}",
    )
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    assert records[0]["preloaded_at"] is None  # the first job starts cold
    for r in records[2:]:
        assert r["preloaded_at"] is not None, f"job {r['num']} imported the marker itself"
        assert r["preloaded_at"] < r["start"]
    assert "preload" not in result.stdout  # nothing to warn about
    assert roles(processes_tagged(runner.tag))["spare"] == 0


def test_what_a_job_imports_last_is_told_as_its_task_returns(
    launch_app, marks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's process looks at its imports every 0.5 s, and once more as its task returns.
    With the periodic looks off (PROBE_IMPORT_WATCH_OFF, read when the task's module loads)
    the last look alone must teach the sweep, as for imports made just before a job exits."""
    monkeypatch.setenv("PROBE_IMPORT_WATCH_OFF", "1")
    monkeypatch.syspath_prepend(str(PROBE.parent))  # preload_marker, for the jobs' processes
    jobs = [[f"x={x}", "imports=[preload_marker]", "sleep=0.5"] for x in range(4)]
    launch_app(PROBE.parent / "conf", "probe", probe, jobs, "hydra.launcher.n_jobs=1")
    records = read_records(marks)
    assert records[0]["preloaded_at"] is None  # the first job starts cold
    for r in records[2:]:  # spares made once job 0 had ended
        assert r["preloaded_at"] is not None, f"job {r['num']} imported the marker itself"


@warm_starts
@pytest.mark.parametrize(
    ("moody", "why"),
    [
        ("raise", "ImportError"),
        ("hang", "still at it after 3 s"),
        ("kill", "a waiting process died importing it (signal 9)"),
    ],
)
def test_a_learned_module_that_fails_or_hangs_ahead_never_harms_a_job(
    runner: Runner, marks: Path, tmp_path: Path, moody: str, why: str, warm_start: str
) -> None:
    """moody_module imports fine in a job, but raises, hangs or kills its process in a
    waiting process: every job still runs (one handed to a spare that hangs there gets a cold
    process), one warning, and it is dropped (else spares would die in a loop)."""
    args = runner.probe_sweep(
        marks,
        "x=0,1,2,3,4,5",
        "imports=[moody_module]",
        *ONE_AT_A_TIME,
        "sleep=1.5",
        f"hydra.launcher.warm_start={warm_start}",
    )
    env = {"PROBE_MOODY": moody, "HPSEARCH_PRELOAD_TIMEOUT": "3"}
    result = runner.run(args, env=env)
    assert result.returncode == 0, result.stdout
    assert len(read_records(marks)) == 6
    assert set(pd.read_csv(tmp_path / "sweep" / "results.csv")["status"]) == {"completed"}
    warnings = [line for line in result.stdout.splitlines() if "preload moody_module" in line]
    assert len(warnings) == 1, result.stdout
    assert why in warnings[0]
    assert roles(processes_tagged(runner.tag))["spare"] == 0


def dying_spare(
    env: object, early_log: str, preload: list[str]
) -> tuple[subprocess.Popen, StatusReader]:
    """Stands in for SparePool.spawn: a real process that says it imported the first of
    `preload` ahead, says it is importing the last, and is killed by it (SIGKILL)."""
    read_end, write_end = os.pipe()
    said = f"preloading {preload[0]}\npreloaded {preload[0]} 1.0\npreloading {preload[-1]}\n"
    code = f"import os, signal; os.write({write_end}, {said.encode()!r}); os.kill(os.getpid(), 9)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        pass_fds=(write_end,),
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(write_end)
    return proc, StatusReader(read_end)


def test_a_module_whose_import_killed_a_waiting_spare_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spare dies importing `killer` ahead while it waits: found dead (what it said last
    read first), it is replaced, and `killer` is dropped, or every next spare would die on it."""
    backend = LocalBackend(b"", preload=None)
    monkeypatch.setattr(backend.spares, "spawn", dying_spare)
    backend.preloads.heard(parse_status("imported numpy killer"))  # what a job was seen to import
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    wanted = {env_key(env): (env, 1)}
    try:
        backend.spares.refill(wanted)
        (spare,) = backend.spares.waiting(env_key(env))
        spare.proc.wait()
        backend.spares.refill(wanted)  # finds it dead: replaced
        assert backend.preloads.modules() == ["numpy"]
        (replaced,) = backend.spares.waiting(env_key(env))
        assert replaced is not spare
    finally:
        backend.close()


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
