"""Warm start: every job still gets a fresh process of its own, with its slot's environment,
but the process was made ahead and has its imports done when the job arrives. These are the
spawned spares' tests (warm_start=spawn); the fork server's (the default) are in
test_fork_server.py."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from apps.probe import probe
from conftest import (
    PROBE,
    Runner,
    processes_tagged,
    read_records,
    roles,
    simulated_gpus_env,
    wait_for,
    wait_for_roles,
)

pytestmark = pytest.mark.slow

PRELOAD = "hydra.launcher.preload=[preload_marker]"
SPAWN = "hydra.launcher.warm_start=spawn"


def test_a_warm_sweep_gives_each_job_a_fresh_preloaded_process(runner: Runner, marks: Path) -> None:
    """12 jobs on 4 slots (2 GPUs x 2). Each round of 4 ends only once the spares for the
    next round have their imports done (each spare's import leaves a mark: PROBE_MARKS), as
    on a machine where a job outlasts a spare's making: so every later job finds one, on a
    machine of any speed."""
    args = runner.probe_sweep(
        marks,
        f"x={','.join(map(str, range(12)))}",
        "gate=true",
        "hydra.launcher.gpus=[0,1]",
        "hydra.launcher.jobs_per_gpu=2",
        PRELOAD,
        SPAWN,
    )
    sweep = runner.popen(args, env=simulated_gpus_env({"PROBE_MARKS": str(marks)}))
    try:
        gated = list(range(12))
        while gated and sweep.poll() is None:
            ready = len(list(marks.glob("preloaded-*")))
            while gated and ready >= min(8, 4 * (gated[0] // 4 + 1)):
                (marks / f"go-{gated.pop(0)}").touch()
            time.sleep(0.05)
        out, _ = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == 0, out
    records = read_records(marks)
    assert len({r["pid"] for r in records}) == 12  # one process per job, never reused
    for r in records:  # each job's environment is its slot's
        assert (r["cuda"], r["fraction"], r["jax_fraction"]) in {
            ("0", "0.45", "0.45"),
            ("1", "0.45", "0.45"),
        }
    first, later = records[:4], records[4:]
    assert all(r["preloaded_at"] is None for r in first)  # the first round starts cold
    warm = [r for r in later if r["preloaded_at"] is not None]
    assert len(warm) >= 6, f"only {len(warm)} of 8 later jobs found a spare ready"
    assert all(r["preloaded_at"] < r["start"] for r in warm)  # imported before the job began
    # The spares belong to their slot's GPU: 2 jobs per GPU at once, never more.
    for gpu in ("0", "1"):
        spans = [(r["start"], r["end"]) for r in records if r["cuda"] == gpu]
        for start, _ in spans:
            assert sum(s <= start < e for s, e in spans) <= 2


def test_warm_start_off_starts_every_process_cold(runner: Runner, marks: Path) -> None:
    args = runner.probe_sweep(
        marks,
        "x=0,1,2,3,4,5",
        "sleep=1",
        "hydra.launcher.n_jobs=2",
        PRELOAD,
        "hydra.launcher.warm_start=false",
    )
    result = runner.run(args)
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    assert len(records) == 6 and all(r["preloaded_at"] is None for r in records)


def spares(tag: str) -> list[psutil.Process]:
    found = []
    for proc in processes_tagged(tag):
        try:
            if "/spare-" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_a_spare_killed_while_waiting_is_replaced(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    (marks / "hold").touch()
    args = runner.probe_sweep(marks, "x=0,1,2", "hydra.launcher.n_jobs=1", PRELOAD, SPAWN)
    sweep = runner.popen(args)
    deadline = time.monotonic() + 30
    while not (waiting := spares(runner.tag)):
        assert time.monotonic() < deadline, "no spare was made while job 0 ran"
        time.sleep(0.1)
    assert len(waiting) == 1  # one slot busy: one spare
    killed = waiting[0].pid
    waiting[0].send_signal(signal.SIGKILL)
    while [p.pid for p in spares(runner.tag)] in ([], [killed]):
        assert time.monotonic() < deadline, "the dead spare was not replaced"
        time.sleep(0.1)
    (marks / "hold").unlink()
    out, _ = sweep.communicate(timeout=60)
    assert sweep.returncode == 0, out
    assert f"a spare process (pid {killed}) died while waiting for a job" in out
    records = read_records(marks)
    assert len(records) == 3 and killed not in {r["pid"] for r in records}
    assert set(pd.read_csv(tmp_path / "sweep" / "results.csv")["status"]) == {"completed"}
    assert roles(processes_tagged(runner.tag))["spare"] == 0  # none outlives the sweep


def test_a_job_ends_without_interpreter_teardown_yet_keeps_its_files(
    runner: Runner, marks: Path
) -> None:
    """The process skips Python's slow teardown, but atexit handlers run and a file the task
    never closed still gets its data."""
    result = runner.run(runner.probe_sweep(marks, "x=0,1", "mode=unclosed"))
    assert result.returncode == 0, result.stdout
    for record in read_records(marks):
        pid = record["pid"]
        text = (marks / f"unclosed-{pid}.txt").read_text()
        assert text == "written, never flushed or closed\n"
        assert (marks / f"atexit-{pid}").exists()


def test_no_spare_waits_once_the_queue_is_empty(
    launch_app, runner: Runner, marks: Path, simulated_gpus: None
) -> None:
    """A spare nobody will need is killed at once: none waits once the last job has started
    (while the last jobs still run), and none outlives launch(), which a sweeper calls again
    and again in one process (Optuna's batches: they would pile up).

    GPU 0's job holds while GPU 1's runs: a spare is made on GPU 0 for the third job. Then
    GPU 1's job ends, the third job takes GPU 1 (cold), and GPU 0's spare is surplus."""
    (marks / "hold").touch()
    seen: dict[str, int] = {}

    def drive() -> None:
        try:
            seen["spares beside the first jobs"] = wait_for_roles(runner.tag, {"spare": 1})["spare"]
            wait_for(marks / "start-1")
            (marks / "go").touch()  # job 1 ends: job 2 takes GPU 1, the queue is empty
            wait_for(marks / "start-2")
            deadline = time.monotonic() + 10
            while (spares := roles(processes_tagged(runner.tag))["spare"]) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.1)
            seen["spares once the queue is empty"] = spares
        finally:  # whatever happened, every job may end
            (marks / "go").touch()
            (marks / "hold").unlink()

    driver = threading.Thread(target=drive)
    driver.start()
    try:
        returns = launch_app(
            PROBE.parent / "conf",
            "probe",
            probe,
            [["x=5", "hold_from=5"], ["x=0", "hold_from=5", "wait_for=go"], ["x=6", "hold_from=5"]],
            "hydra.launcher.gpus=[0,1]",
            SPAWN,
        )
    finally:
        driver.join()
    assert [r.return_value for r in returns] == [5.0, 0.0, 6.0]
    assert {r["x"]: r["cuda"] for r in read_records(marks)} == {5: "0", 0: "1", 6: "1"}
    assert seen == {"spares beside the first jobs": 1, "spares once the queue is empty": 0}
    assert roles(processes_tagged(runner.tag))["spare"] == 0  # launch() returned: none is left
