"""A job ends with its whole tree: what its process started and left running (a child in its
own session, a daemon that double-forked) is ended when the job's process ends, before its slot
takes the next job, on every path; results.csv counts them; keep_daemons keeps them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, processes_tagged, read_records, role

pytestmark = pytest.mark.slow

PATHS = ["hydra.launcher.warm_start=fork", "hydra.launcher.warm_start=spawn"]
ONE_CPU_SLOT = ("hydra.launcher.gpus=[]", "hydra.launcher.n_jobs=1")


@pytest.mark.parametrize("path", PATHS, ids=["fork", "spawn"])
def test_what_a_job_leaves_running_ends_with_it_before_the_next_job_starts(
    runner: Runner, marks: Path, tmp_path: Path, path: str
) -> None:
    done = runner.run(
        runner.probe_sweep(marks, "x=0,1,2", "mode=leave", "chain=true", path, *ONE_CPU_SLOT)
    )
    assert done.returncode == 0, done.stdout
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert list(rows["status"]) == ["completed"] * 3 and list(rows["leftovers"]) == [2] * 3
    # Each job found none of the earlier jobs' sleepers when it began, on its one slot.
    assert [r["sleepers_at_start"] for r in read_records(marks)] == [0, 0, 0]
    said = [line for line in done.stdout.splitlines() if "left 2 process(es) running" in line]
    assert len(said) == 1 and "keep_daemons=true keeps them" in said[0], done.stdout
    assert not [p for p in processes_tagged(runner.tag) if role(p) == "grandchild"]


def test_keep_daemons_leaves_a_jobs_processes_running(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    args = ("x=0", "mode=leave", "hydra.launcher.keep_daemons=true", *ONE_CPU_SLOT)
    done = runner.run(runner.probe_sweep(marks, *args))
    try:
        assert done.returncode == 0, done.stdout
        kept = [p for p in processes_tagged(runner.tag) if role(p) == "grandchild"]
        assert len(kept) == 2, done.stdout
        rows = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
        assert list(rows["leftovers"]) == [""]  # not looked for
        assert "process(es) running" not in done.stdout
    finally:
        for proc in processes_tagged(runner.tag):
            proc.kill()
