"""Fork soak: many jobs of a TensorFlow task, each forked from one server (warm_start=fork), then
the first of them again in spawned processes, and what they drew compared.

    python bench/fork_soak.py --jobs 10000 --compare 200

Each job (bench/apps/workload.py, mode=seeded) imports TensorFlow and NumPy, draws from their
unseeded streams (its process's own), then seeds both with x and draws again. Printed, one line:
jobs, rows completed, and not (failed or timed out: each job has a 300 s timeout, so one that
hangs fails), unseeded draws shared by two jobs (two forked processes on one stream), and
seeded values that differ from a spawned job's for the same x (each should be 0 but the first).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "bench" / "apps" / "workload.py"


def sweep(work: Path, name: str, jobs: int, warm_start: str) -> tuple[list[dict], float]:
    """Run `jobs` seeded jobs; their records and the sweep's wall time."""
    marks = work / f"marks-{name}"
    marks.mkdir()
    command = [
        sys.executable,
        str(APP),
        "--multirun",
        "mode=seeded",
        f"marks={marks}",
        f"x=range(0,{jobs})",
        "hydra/launcher=hpsearch",
        "hydra.launcher.gpus=[]",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.timeout=300",
        f"hydra.launcher.warm_start={warm_start}",
        f"hydra.sweep.dir={work / name}",
    ]
    started = time.monotonic()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    lines = (marks / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--compare", type=int, default=200, help="jobs run spawned as well")
    parser.add_argument("--keep", type=Path, help="work in this (new) dir and keep it")
    args = parser.parse_args()
    from hpsearch_launcher.results import read_results

    with tempfile.TemporaryDirectory(prefix="fork-soak-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        forked, fork_wall = sweep(work, "fork", args.jobs, "fork")
        spawned, spawn_wall = sweep(work, "spawn", args.compare, "true")
        rows = read_results(work / "fork")
        by_x = {r["x"]: r["value"] for r in spawned}
        fresh = collections.Counter(tuple(r["fresh"]) for r in forked)
        differ = sum(r["value"] != by_x[r["x"]] for r in forked if r["x"] in by_x)
        figures = {
            "jobs": args.jobs,
            "completed": int((rows["status"] == "completed").sum()),
            "not_completed": int((rows["status"] != "completed").sum()),
            "records": len(forked),
            "unseeded_draws_shared": sum(n - 1 for n in fresh.values()),
            "compared": len(by_x),
            "seeded_values_differ": differ,
            "fork_wall_s": round(fork_wall),
            "spawn_wall_s": round(spawn_wall),
        }
    print("fork soak: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
