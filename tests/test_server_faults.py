"""The fork server's faults are the server's: a stopped, hung or killed server stalls no job's
end, blames none on memory and runs none twice; a job that returned is completed whatever its
process did after; a SIGKILL is out of memory only where the kernel's OOM killer struck."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest
from conftest import Runner, processes_tagged, role, wait_for, wait_until
from test_fork_server import NOT_FORKING, start_fork_sweep

from hpsearch_launcher.execute.local import forked_process
from hpsearch_launcher.execute.local.forked_process import ForkedProcess

PATHS = ["hydra.launcher.warm_start=fork", "hydra.launcher.warm_start=spawn"]
TWO_CPU_SLOTS = ("hydra.launcher.gpus=[]", "hydra.launcher.n_jobs=2")
SIX_JOBS = ("x=0,1,2,3,4,5", "sleep=1.5")
# The kernel's oom_kill count is the machine's: the test that makes the OOM killer strike and
# those that need it not to strike run in one worker, one after the other.
OOM_KILLS = "oom-kills"


def the_server(runner: Runner) -> psutil.Process:
    (server,) = [p for p in processes_tagged(runner.tag) if role(p) == "server"]
    return server


def server_fault(
    runner: Runner, marks: Path, fault: Callable[[psutil.Process], object], *args: str
) -> str:
    """A fork sweep whose server meets `fault` once two jobs run, run to its end (it must
    succeed); what it printed."""
    sweep = start_fork_sweep(runner, marks, *args)
    try:
        wait_for(marks / "start-1")
        fault(the_server(runner))
        out = sweep.finish(timeout=180)
    finally:
        sweep.proc.kill()
    assert sweep.proc.returncode == 0, out
    return out


def starts(marks: Path) -> int:
    """How many times a job's task began (the probe's starts.log)."""
    return len((marks / "starts.log").read_text().split())


@pytest.mark.slow
def test_a_stopped_server_is_killed_and_its_jobs_ends_are_seen_without_it(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """SIGSTOP of the server, never continued: jobs that end meanwhile are seen to end (the
    sweep once waited for the server to reap them, for ever), the sweep falls back in one
    line, and a timeout counts no second of the stop. Run again, nothing runs twice."""
    args = (*SIX_JOBS, *TWO_CPU_SLOTS, "hydra.launcher.timeout=5")
    out = server_fault(runner, marks, psutil.Process.suspend, *args)
    assert out.count(NOT_FORKING) == 1 and "is stopped (SIGSTOP" in out, out
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert set(rows["status"]) == {"completed"} and set(rows["attempts"]) == {1}, rows
    assert starts(marks) == 6
    again = runner.run(runner.probe_sweep(marks, *args))
    assert again.returncode == 0, again.stdout
    assert starts(marks) == 6  # every job finished: resumed, none run again


@pytest.mark.slow
def test_a_killed_server_the_sweep_cannot_adopt_from_loses_its_jobs_not_to_memory(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """With keep_daemons=true the sweep adopts no orphans, so a server's SIGKILL takes its
    running jobs with it (their watchdogs): each is recorded as lost with the server and runs
    again, spawned; never out of memory, never alone."""
    keep = "hydra.launcher.keep_daemons=true"
    out = server_fault(runner, marks, psutil.Process.kill, *SIX_JOBS, *TWO_CPU_SLOTS, keep)
    assert out.count(NOT_FORKING) == 1 and "the fork server ended (-9)" in out, out
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x")
    assert set(rows["status"]) == {"completed"}, rows
    assert "memory" not in out and "alone" not in out, out
    assert "its process was lost: it ended with the fork server" in out, out
    assert rows.loc[[0, 1], "attempts"].tolist() == [2, 2], rows
    assert "its process was lost" in rows.loc[0, "error"]


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=["fork", "spawn"])
def test_a_job_that_returned_is_completed_whatever_its_process_did_after(
    runner: Runner, marks: Path, tmp_path: Path, path: str, cold_start_s: float
) -> None:
    """Its task returned (its end file holds the value), then its process hung on its way out
    and was ended at the timeout: completed, with what it returned, and not run again."""
    timeout = max(3, round(6 * cold_start_s))  # the task returns well within it
    args = ("x=0,1", "mode=hang_after_return", path, *TWO_CPU_SLOTS)
    done = runner.run(runner.probe_sweep(marks, *args, f"hydra.launcher.timeout={timeout}"))
    assert done.returncode == 0, done.stdout
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
    assert list(rows["status"]) == ["completed", "completed"], rows
    assert list(rows["objective"]) == [0.0, 1.0] and list(rows["error"]) == ["", ""]
    assert done.stdout.count("returned (its end file holds the value), then timed out") == 2
    assert starts(marks) == 2


@pytest.mark.slow
@pytest.mark.xdist_group(OOM_KILLS)
@pytest.mark.parametrize("path", PATHS, ids=["fork", "spawn"])
def test_a_sigkill_from_a_user_is_not_taken_for_the_oom_killer(
    runner: Runner, marks: Path, tmp_path: Path, path: str
) -> None:
    """The kernel's OOM killer killed nothing while the job ran: a SIGKILL someone sent is the
    job's failure as it is, not out of memory, and it is not retried alone."""
    sweep = runner.popen(runner.probe_sweep(marks, "x=0", "sleep=60", path, *TWO_CPU_SLOTS))
    try:
        wait_for(marks / "start-0")
        (job,) = [p for p in processes_tagged(runner.tag) if role(p) == "job"]
        job.kill()
        out, _ = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert (rows["status"][0], rows["attempts"][0]) == ("failed", 1), out
    assert "killed by SIGKILL (not the OOM killer" in rows["error"][0]
    assert "memory:" not in out and "alone" not in out, out


def test_an_exit_its_server_does_not_reap_is_told_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forked job's process has exited, and its parent (a server that hangs) does not reap
    it: the sweep's watcher sees the exit itself and says so (the server is then killed)."""
    monkeypatch.setattr(forked_process, "REAP_S", 0.3)
    hangs = subprocess.Popen(  # forks a child that exits at once, then never reaps it
        [
            sys.executable,
            "-c",
            "import os, time\npid = os.fork()\nif pid == 0: os._exit(0)\n"
            "print(pid, flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert hangs.stdout is not None
        pid = int(hangs.stdout.readline())
        told: list[int] = []
        child = ForkedProcess(pid, told.append)
        codes: list[int] = []  # its watcher, as a job's: waits for it
        watcher = threading.Thread(target=lambda: codes.append(child.wait()), daemon=True)
        watcher.start()
        wait_until(lambda: bool(told), 10, "the unreaped exit to be told")
        assert told[0] == pid and not codes
        child.exited(0)  # as the server's word, once it is killed and the sweep adopts it
        watcher.join(timeout=10)
        assert codes == [0]
        with pytest.raises(subprocess.TimeoutExpired):
            ForkedProcess(os.getpid()).wait(timeout=0.3)  # a process still running
    finally:
        hangs.kill()
        hangs.wait()


def test_a_stopped_process_is_seen_stopped() -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        assert not forked_process.is_stopped(sleeper.pid)
        os.kill(sleeper.pid, signal.SIGSTOP)
        wait_until(lambda: forked_process.is_stopped(sleeper.pid), 10, "the stop")
    finally:
        sleeper.kill()
        sleeper.wait()


@contextlib.contextmanager
def memory_cgroup(limit_mb: int) -> Iterator[Path]:
    """A memory cgroup (v2 or v1) below this process's own, capped at `limit_mb`: its
    cgroup.procs file. Skips where none can be made (not root, no memory controller)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers in ("", "memory"):
            root = Path("/sys/fs/cgroup") / ("memory" if controllers else "") / path.lstrip("/")
            limit = "memory.max" if not controllers else "memory.limit_in_bytes"
            if (root / limit).exists() or (controllers and root.is_dir()):
                break
    else:
        pytest.skip("no memory cgroup here")
    group = root / f"hpsearch-test-{os.getpid()}"
    try:
        group.mkdir()
        (group / limit).write_text(str(limit_mb << 20))
    except OSError as err:
        pytest.skip(f"cannot make a memory cgroup here: {err}")
    try:
        yield group / "cgroup.procs"
    finally:
        wait_until(lambda: not (group / "cgroup.procs").read_text().split(), 30, "its end")
        group.rmdir()


@pytest.mark.slow
@pytest.mark.xdist_group(OOM_KILLS)
@pytest.mark.parametrize("path", PATHS, ids=["fork", "spawn"])
def test_a_job_the_oom_killer_kills_is_retried_alone_as_out_of_memory(
    runner: Runner, marks: Path, tmp_path: Path, path: str
) -> None:
    """The real thing: the sweep in a memory cgroup of 800 MB, a job that takes memory until
    the kernel's OOM killer kills it: out of memory, retried alone, where it passes."""
    with memory_cgroup(800) as procs:
        args = runner.probe_sweep(marks, "x=0,1", "mode=hog_once", path, *TWO_CPU_SLOTS)
        sweep = subprocess.Popen(
            ["sh", "-c", f'echo $$ > "{procs}" && exec "$0" "$@"', runner.python, *args],
            cwd=tmp_path,
            env=runner.env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        out, _ = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, out
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
    assert list(rows["status"]) == ["completed", "completed"], out
    assert list(rows["attempts"]) == [2, 2], rows
    assert all("killed by SIGKILL (the OOM killer)" in e for e in rows["error"]), rows["error"]
    assert "ran out of memory on cpu: retrying alone" in out, out
