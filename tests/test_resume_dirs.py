"""Where a resumed sweep puts its run dirs after `kill -9`s (docs/resume.md): a job run again
takes its plain run dir, each dead attempt (no row: the sweep died before it recorded an end)
moves to superseded/, and every dir on disk is accounted for, by a row or by superseded/."""

from __future__ import annotations

import collections
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, read_records, wait_no_tagged, wait_until

from hpsearch_launcher.plan.settings import WARM_STARTS
from hpsearch_launcher.record.table import ResultsTable

pytestmark = pytest.mark.slow

KILLS = 3
# x=2 twice: one config, two jobs, two run dirs (`x=2`, `x=2~2`). The jobs with x >= 2 are held
# while the sweep is killed, three at a time: x=4 never starts, and leaves no dir.
JOBS = (0, 1, 2, 2, 3, 4)
HELD = (2, 2, 3)
LIVE_DIRS = {"x=0", "x=1", "x=2", "x=2~2", "x=3", "x=4"}


def started(marks: Path) -> collections.Counter[int]:
    path = marks / "starts.log"
    return collections.Counter(map(int, path.read_text().split() if path.exists() else ()))


def kill_with_held_jobs(runner: Runner, args: list[str], marks: Path) -> None:
    """Run the sweep until the held jobs have started again, then SIGKILL it."""
    before, held = started(marks), collections.Counter(HELD)
    sweep = runner.popen(args)
    try:
        wait_until(
            lambda: started(marks) - before >= held or sweep.poll() is not None,
            within=60,
            what=f"the held jobs {HELD} started",
        )
    finally:
        sweep.kill()
    out, _ = sweep.communicate(timeout=30)
    assert sweep.returncode == -9, out
    assert wait_no_tagged(runner.tag, within=10) == [], "a job outlived its killed sweep"


@pytest.mark.parametrize("warm_start", WARM_STARTS)  # fork (the default) and spawn
def test_kill_9_then_the_same_command_gives_reruns_their_plain_dirs(
    runner: Runner, marks: Path, tmp_path: Path, warm_start: str
) -> None:
    args = runner.probe_sweep(
        marks,
        f"x={','.join(map(str, JOBS))}",
        f"hold_from={min(HELD)}",
        f"hydra.launcher.n_jobs={len(HELD)}",
        f"hydra.launcher.warm_start={warm_start}",
    )
    (marks / "hold").touch()
    for _ in range(KILLS):
        kill_with_held_jobs(runner, args, marks)
    (marks / "hold").unlink()
    done = runner.run(args)
    assert done.returncode == 0, done.stdout

    sweep = tmp_path / "sweep"
    frame = pd.read_csv(sweep / "results.csv", keep_default_na=False)
    live = frame[frame["status"] != "superseded"]
    assert sorted(live["x"]) == sorted(JOBS), frame  # every job once, as final
    assert set(live["status"]) == {"completed"}, frame[["job", "status", "error"]]
    assert frame["job"].is_unique and frame["run_dir"].is_unique
    # Each job in its plain run dir, re-run or not; the repeated config's second in `x=2~2`.
    assert {Path(d) for d in live["run_dir"]} == {Path("sweep", name) for name in LIVE_DIRS}
    journal = ResultsTable.load(sweep).rows  # the record and its view agree
    assert {int(r["job"]): (r["status"], r["run_dir"]) for r in journal.values()} == {
        r.job: (r.status, r.run_dir) for r in frame.itertuples()
    }

    # On disk: the live dirs, no `~N` from a dead attempt, each dead attempt under superseded/.
    assert {p.name for p in sweep.iterdir() if p.is_dir()} == LIVE_DIRS | {"superseded"}
    dead = collections.Counter(p.name.split("~")[0] for p in (sweep / "superseded").iterdir())
    assert dead == {f"x={x}": KILLS * n for x, n in collections.Counter(HELD).items()}, dead

    # No job that finished ran twice: x=0 and x=1 started once, and every job ended once.
    assert started(marks)[0] == started(marks)[1] == 1
    ends = collections.Counter(r["x"] for r in read_records(marks))
    assert ends == collections.Counter(JOBS), ends
