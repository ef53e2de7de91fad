"""The sweep process itself is interrupted or killed, several times over, at scripted moments:
no job process survives, results.csv always parses, and a resume finishes every job once."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, read_records, wait_no_tagged

from hpsearch_launcher.plan.settings import WARM_STARTS

pytestmark = pytest.mark.slow

# The signal, and how many new job starts to wait for before sending it.
SCRIPT = [
    (signal.SIGINT, 2),
    (signal.SIGKILL, 3),
    (signal.SIGTERM, 1),
    (signal.SIGKILL, 2),
    (signal.SIGINT, 3),
]


def count_starts(marks: Path) -> int:
    path = marks / "starts.log"
    return len(path.read_text().split()) if path.exists() else 0


@pytest.mark.parametrize("warm_start", WARM_STARTS)
def test_repeated_parent_faults_then_resume(
    runner: Runner, marks: Path, tmp_path: Path, warm_start: str
) -> None:
    args = runner.probe_sweep(
        marks,
        f"x={','.join(map(str, range(12)))}",
        "sleep=0.8",
        "hydra.launcher.n_jobs=2",
        f"hydra.launcher.warm_start={warm_start}",
    )
    results = tmp_path / "sweep" / "results.csv"
    for sig, new_starts in SCRIPT:
        before = count_starts(marks)
        sweep = runner.popen(args)
        deadline = time.monotonic() + 60
        while count_starts(marks) < before + new_starts:
            assert time.monotonic() < deadline, f"no progress before {sig.name}"
            time.sleep(0.05)
        sweep.send_signal(sig)
        out, _ = sweep.communicate(timeout=30)
        assert sweep.returncode == (-9 if sig == signal.SIGKILL else 128 + sig), out
        assert wait_no_tagged(runner.tag, within=10) == [], f"left behind after {sig.name}"
        if results.exists():
            frame = pd.read_csv(results)  # parses after every fault, whatever the moment
            # One live row per config: a job run again supersedes its earlier row.
            assert frame.loc[frame["status"] != "superseded", "x"].is_unique
            if sig != signal.SIGKILL:
                assert "interrupted" in set(frame["status"]), out
    final = runner.run(args)
    assert final.returncode == 0, final.stdout
    frame = pd.read_csv(results)
    live = frame[frame["status"] != "superseded"]
    assert sorted(live["x"]) == list(range(12))  # every job exactly once
    assert set(live["status"]) == {"completed"}
    assert frame["job"].is_unique and frame["run_dir"].is_unique
    # Every job's final result came from a run that finished.
    finished = {r["x"] for r in read_records(marks)}
    assert finished == set(range(12))
