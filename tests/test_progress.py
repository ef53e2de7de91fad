"""Progress while a sweep runs: a live table on a terminal, plain lines when piped."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Runner

from hpsearch_launcher.record.progress import SweepState, counted


def test_eta_and_summary() -> None:
    state = SweepState(
        total=10,
        done=3,
        failed=1,
        queued=4,
        slots=2,
        running={"0": ["lr=0.1"], "1": ["lr=0.2"]},
        durations=[10.0, 20.0],
    )
    assert state.eta_s() == pytest.approx((4 + 2) * 15.0 / 2)
    assert state.summary().startswith(
        "4/10 finished (3 done, 1 failed, 0 resumed), 2 running, 4 queued; elapsed 0:00:0"
    )
    assert state.summary().endswith("ETA 0:00:45")


def test_an_interrupted_searchs_counts_add_up() -> None:
    """A search counts its interrupted trial as still to run (it runs again on resume), so
    its queue holds it; it started all the same: 7 + 1 + 8 of 16, not 7 + 1 + 9."""
    state = SweepState(total=16, done=7, interrupted=1, queued=9, stopping=True)
    assert state.never_started() == 8
    assert ", 1 interrupted, 0 running, 8 never started; elapsed" in state.summary()
    assert counted(1, "running job") == "1 running job"
    assert counted(2, "interrupted one") == "2 interrupted ones"


@pytest.mark.slow
def test_piped_output_gets_plain_progress_lines(runner: Runner, marks: Path) -> None:
    result = runner.run(runner.probe_sweep(marks, "x=0,1,2,3", "sleep=0.5"))
    assert result.returncode == 0, result.stdout
    assert "progress: 0/4 finished" in result.stdout
    assert "\x1b[" not in result.stdout  # no terminal control codes in a log


@pytest.mark.slow
def test_terminal_gets_a_live_table(runner: Runner, marks: Path, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    args = runner.probe_sweep(marks, "x=0,1,2,3", "sleep=1.0", "hydra.launcher.n_jobs=2")
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=tmp_path,
        env=runner.env(),
        stdout=follower,
        stderr=follower,
        stdin=subprocess.DEVNULL,
    )
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, screen
    assert "device" in screen and "running" in screen  # the live table's header
    assert "x=0, x=1" in screen  # the jobs on the CPU slots, side by side
    assert "\x1b[2K" in screen  # redrawn in place
    assert "job 3 done" in screen  # log lines still print above it
