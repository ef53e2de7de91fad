"""Every way a job can die becomes a FAILED JobReturn with its reason; the other jobs go on;
interrupting or killing the sweep ends every job's process tree."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from apps.probe import probe
from conftest import PROBE, Runner, processes_tagged, read_records, wait_for, wait_for_roles
from hydra.core.utils import JobReturn, JobStatus

from hpsearch_launcher.plan.settings import WARM_STARTS

pytestmark = pytest.mark.slow


@pytest.fixture
def launch(launch_app, marks: Path) -> Callable[..., list[JobReturn]]:
    """The probe app's jobs through our launcher, in this process, as a sweeper would."""
    return lambda jobs, *overrides: launch_app(
        PROBE.parent / "conf", "probe", probe, jobs, *overrides
    )


FAULTS = [
    # mode, final status, reason (in the JobReturn and results.csv), attempts
    ("raise", "failed", "ValueError: probe asked to raise", 1),
    ("exit", "failed", "exited with status 3", 1),
    ("hard_exit", "failed", "exited with status 7", 1),
    ("segfault", "failed", "killed by SIGSEGV (segmentation fault)", 1),
    # A SIGKILL hpsearch did not send, while the kernel's OOM killer killed nothing: not
    # taken for running out of memory (it once was, and retried alone).
    pytest.param(
        "sigkill",
        "failed",
        "killed by SIGKILL (not the OOM killer, which killed nothing",
        1,
        marks=pytest.mark.xdist_group("oom-kills"),  # test_server_faults.py's OOM_KILLS
        id="sigkill",
    ),
    ("tf_oom", "failed", "ResourceExhaustedError: OOM when allocating tensor", 2),
    ("hang", "timeout", "timed out after 3s (hydra.launcher.timeout); its process tree was", 1),
    ("flood", "completed", "", 1),
]


@pytest.mark.parametrize(
    ("mode", "status", "reason", "attempts"),
    FAULTS,
    ids=[None if hasattr(f, "marks") else f[0] for f in FAULTS],  # a pytest.param has its id
)
def test_a_failing_job_is_isolated(
    launch, mode: str, status: str, reason: str, attempts: int, tmp_path: Path
) -> None:
    jobs = [["x=1"], [f"mode={mode}", "x=2"], ["x=3"]]
    started = time.monotonic()
    timeout = "hydra.launcher.timeout=3" if mode == "hang" else "hydra.launcher.timeout=null"
    returns = launch(jobs, timeout, "hydra.launcher.n_jobs=3")
    assert [r.overrides[:-1] for r in returns] == jobs  # one per job, in input order
    expected = JobStatus.COMPLETED if status == "completed" else JobStatus.FAILED
    assert [r.status for r in returns] == [JobStatus.COMPLETED, expected, JobStatus.COMPLETED]
    assert returns[0].return_value == 1.0 and returns[2].return_value == 3.0
    if reason:
        with pytest.raises(Exception) as error:
            _ = returns[1].return_value
        assert reason in f"{error.type.__name__}: {error.value}"
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
    row = rows.loc[rows["mode"] == mode].iloc[0]
    assert (row["status"], row["attempts"]) == (status, attempts)
    if reason:
        assert reason in row["error"]
    else:  # it completed: no error at all
        assert row["error"] == ""
    assert list(rows.loc[rows["mode"] != mode, "status"]) == ["completed", "completed"]
    run_dir = tmp_path / "sweep" / f"mode={mode},x=2"
    if mode == "raise":  # the traceback is kept in the job's own log
        stderr = (run_dir / "stderr.log").read_text()
        assert "Traceback" in stderr and "ValueError: probe asked to raise" in stderr
    if mode == "flood":
        assert (run_dir / "stdout.log").stat().st_size >= 20_000 * 1024
    if mode == "hang":
        assert time.monotonic() - started < 30


# A job's own end, read the same whether its process was forked or spawned: mode, status, the
# reason (in the JobReturn and results.csv), and the end of its stderr.log.
OWN_ENDS = [
    ("raise", "failed", "ValueError: probe asked to raise", "ValueError: probe asked to raise\n"),
    # It returned: completed, though its progress line can no longer be flushed.
    ("close_stdio", "completed", "", "probe job 0 stderr\n"),
    # The task's own KeyboardInterrupt, not the sweep's: an error it raised, traceback kept.
    (
        "keyboard_interrupt",
        "failed",
        "KeyboardInterrupt",
        "raise KeyboardInterrupt\nKeyboardInterrupt\n",
    ),
]


@pytest.mark.parametrize("warm_start", WARM_STARTS)
@pytest.mark.parametrize(
    ("mode", "status", "reason", "log_end"), OWN_ENDS, ids=[e[0] for e in OWN_ENDS]
)
def test_a_jobs_own_end_reads_the_same_forked_or_spawned(
    launch,
    marks: Path,
    tmp_path: Path,
    warm_start: str,
    mode: str,
    status: str,
    reason: str,
    log_end: str,
) -> None:
    (ret,) = launch(
        [[f"mode={mode}"]],
        f"hydra.launcher.warm_start={warm_start}",
        "hydra.launcher.gpus=[]",
        "hydra.launcher.n_jobs=1",
    )
    forked = int((marks / "start-0").read_text()) != os.getpid()  # its parent: the server
    assert forked == (warm_start == "fork")
    if reason:  # an Exception in the sweep: a KeyboardInterrupt there would stop it
        with pytest.raises(Exception, match=reason):
            _ = ret.return_value
    else:
        assert ret.return_value == 0.0
    row = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False).iloc[0]
    assert (row["status"], row["error"]) == (status, reason)
    (stderr,) = (tmp_path / "sweep").glob("*/stderr.log")
    assert stderr.read_text().endswith(log_end)


def test_an_out_of_memory_line_only_in_stderr_retries_alone(
    launch, marks: Path, tmp_path: Path, simulated_gpus: None
) -> None:
    """The job's exit status says nothing; CUDA's line at the end of its stderr.log does."""
    jobs = [["x=0", "sleep=1"], ["x=1", "mode=stderr_oom_once"], ["x=2", "sleep=1"]]
    returns = launch(jobs, "hydra.launcher.gpus=[0,1]", "hydra.launcher.jobs_per_gpu=2")
    assert [r.return_value for r in returns] == [0.0, 1.0, 2.0]
    retry = {r["x"]: r for r in read_records(marks)}[1]
    assert (retry["cuda"], retry["fraction"]) == ("1", "0.95")  # alone, the whole GPU
    row = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x").loc[1]
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert "out of memory: exited with status 1: CUDA error: out of memory" in row["error"]


@pytest.mark.parametrize("warm_start", WARM_STARTS)
def test_out_of_memory_job_is_retried_alone_on_its_gpu(
    launch, marks: Path, tmp_path: Path, simulated_gpus: None, warm_start: str
) -> None:
    jobs = [
        ["x=0", "sleep=2"],
        ["x=1", "mode=cuda_oom_once"],
        ["x=2", "sleep=2"],
        ["x=3", "sleep=2"],
    ]
    returns = launch(
        jobs,
        "hydra.launcher.gpus=[0,1]",
        "hydra.launcher.jobs_per_gpu=2",
        f"hydra.launcher.warm_start={warm_start}",
    )
    assert [r.return_value for r in returns] == [0.0, 1.0, 2.0, 3.0]
    records = {r["x"]: r for r in read_records(marks)}
    retry = records[1]
    assert (retry["cuda"], retry["fraction"]) == ("1", "0.95")  # its GPU, the whole memory
    others_on_gpu1 = [r for r in records.values() if r["cuda"] == "1" and r["x"] != 1]
    assert others_on_gpu1, "the test needs another job on GPU 1"
    for other in others_on_gpu1:  # alone: no other job ran on GPU 1 during the retry
        assert other["end"] <= retry["start"] or other["start"] >= retry["end"]
    row = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x").loc[1]
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert re.match(
        r"attempt 1 \(\d+\.\ds\): out of memory: RuntimeError: CUDA out of", row["error"]
    )


def test_out_of_memory_on_the_cpu_is_retried_alone_and_told_without_a_gpu(
    launch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A sweep without GPUs retries alone too (no other job beside it), and says so."""
    launch([["x=1", "mode=stderr_oom"], ["x=2"]], "hydra.launcher.gpus=[]")
    row = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x").loc[1]
    assert (row["status"], row["attempts"]) == ("failed", 2)
    assert (
        "attempt 2: out of memory alone, with no other job running beside it: the job needs "
        "more memory than this machine has free"
    ) in row["error"]
    retrying = [line for line in capfd.readouterr().out.splitlines() if "retrying" in line]
    assert len(retrying) == 1 and "retrying alone, with no other job running" in retrying[0]
    assert "GPU" not in row["error"] + retrying[0]


@pytest.mark.parametrize(
    ("max_retries", "status", "attempts"), [(0, "failed", 1), (1, "completed", 2)]
)
def test_other_failures_retry_only_when_asked(
    launch, tmp_path: Path, max_retries: int, status: str, attempts: int
) -> None:
    launch([["x=5", "mode=raise_once"]], f"hydra.launcher.max_retries={max_retries}")
    row = pd.read_csv(tmp_path / "sweep" / "results.csv").iloc[0]
    assert (row["status"], row["attempts"]) == (status, attempts)


@pytest.mark.parametrize(
    ("sig", "exit_code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)],
)
def test_stopping_the_sweep_ends_every_job_tree(
    runner: Runner, marks: Path, sig: signal.Signals, exit_code: int
) -> None:
    # Spawned spares (test_fork_server.py has the fork server's twin of this test).
    args = runner.probe_sweep(
        marks,
        "x=0,1,2,3",
        "mode=hang",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.warm_start=spawn",
    )
    sweep = runner.popen(args)
    wait_for(marks / "start-0", marks / "start-1")
    # 2 jobs, their 2 grandchildren, and a spare waiting for each queued job.
    wanted = {"job": 2, "grandchild": 2, "spare": 2, "server": 0}
    assert wait_for_roles(runner.tag, wanted) == wanted
    sweep.send_signal(sig)
    out, _ = sweep.communicate(timeout=30)
    assert sweep.returncode == exit_code, out
    deadline = time.monotonic() + 10
    while processes_tagged(runner.tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_tagged(runner.tag) == []  # within 10 s, nothing is orphaned
    assert not (marks / "start-2").exists(), "no new job may start after the signal"
    if sig != signal.SIGKILL:
        assert "stopping 2 running jobs, 2 never started" in out
