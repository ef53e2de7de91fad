"""The launcher's policies, each test stating the promise it keeps: resume re-runs exactly the
jobs that did not finish, numbered after the earlier run; a timeout fires on time, ends the
job's whole tree before its slot is reused, and is retried under max_retries."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, read_records

from hpsearch_launcher.execute.sweep import INTERRUPT_GRACE_S, POLL_S

pytestmark = pytest.mark.slow


@pytest.fixture
def timeout(cold_start_s: float) -> float:
    """hydra.launcher.timeout for these tests: it counts from the job process's start, so it
    must leave a job that does not hang room for its cold start, on a loaded machine too."""
    return float(max(2, round(6 * cold_start_s)))


def starts(marks: Path) -> collections.Counter[int]:
    return collections.Counter(int(x) for x in (marks / "starts.log").read_text().split())


@pytest.mark.timeout(120)
def test_resume_runs_failed_and_timed_out_jobs_again_exactly_once(
    runner: Runner, marks: Path, tmp_path: Path, timeout: float
) -> None:
    args = runner.probe_sweep(
        marks,
        "x=0,1,2",
        "fail_x=1",
        "hang_x=2",
        f"hydra.launcher.timeout={timeout:g}",
        "hydra.launcher.n_jobs=3",
    )
    first = runner.run(args)
    assert first.returncode == 1, first.stdout
    before = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert dict(zip(before["x"], before["status"], strict=True)) == {
        0: "completed",
        1: "failed",
        2: "timeout",
    }
    again = runner.run(args)
    assert again.returncode == 1, again.stdout
    assert starts(marks) == {0: 1, 1: 2, 2: 2}  # the finished job is not run again
    after = pd.read_csv(tmp_path / "sweep" / "results.csv")
    new = after[after["job"] > before["job"].max()]  # numbered after the earlier run
    assert dict(zip(new["x"], new["status"], strict=True)) == {1: "failed", 2: "timeout"}
    # In their plain run dirs again: the earlier attempts were moved to superseded/.
    assert set(new["run_dir"]) == set(before.loc[before["x"] > 0, "run_dir"])
    old = after[after["job"] <= before["job"].max()].set_index("x")
    assert old.loc[0, "status"] == "completed"
    assert (old.loc[1, "status"], old.loc[2, "status"]) == ("superseded", "superseded")
    for x in (1, 2):
        assert Path(old.loc[x, "run_dir"]).parent.name == "superseded"
        assert (tmp_path / old.loc[x, "run_dir"] / "stderr.log").exists()


@pytest.mark.timeout(120)
def test_a_timeout_fires_on_time_is_retried_and_frees_its_slot_clean(
    runner: Runner, marks: Path, tmp_path: Path, timeout: float
) -> None:
    """One slot: the hanging job (with a grandchild) times out twice (max_retries=1), then the
    next job takes the slot and finds no process of the hung tree left."""
    args = runner.probe_sweep(
        marks,
        "x=0,1",
        "hang_x=0",
        f"hydra.launcher.timeout={timeout:g}",
        "hydra.launcher.max_retries=1",
        "hydra.launcher.n_jobs=1",
    )
    result = runner.run(args)
    assert result.returncode == 1, result.stdout
    row = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x").loc[0]
    assert (row["status"], row["attempts"]) == ("timeout", 2)
    timed_out = re.match(rf"attempt 1 \((\d+\.\d)s\): timed out after {timeout:g}s", row["error"])
    assert timed_out, row["error"]
    first = float(timed_out[1])
    # Each attempt lasted the timeout, plus at most the kill grace and one poll.
    for seconds in (first, float(row["wall_time_s"])):
        assert timeout <= seconds <= timeout + INTERRUPT_GRACE_S + POLL_S, row["error"]
    (after,) = read_records(marks)
    assert after["x"] == 1 and after["sleepers_at_start"] == 0
