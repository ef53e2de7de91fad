"""Chaos soak: a sweep `kill -9`ed at random instants, again and again, then run to its end;
then what its records say is checked against what its jobs did.

    python bench/soak.py --kind grid --jobs 2000 --kills 300        # the long soak
    python bench/soak.py --kind sqlite --jobs 60 --kills 20 --seed 1  # a modest one
    kinds: grid; memory, sqlite, journal (hydra/sweeper=hpsearch with that storage)

The app is the launcher tests' probe (tests/apps/probe.py): each job appends one line to
marks/records.jsonl when it runs to its end, so ends can be counted apart from the records.
Printed, one line: kills, jobs, ends, and what went wrong (each should be 0): jobs without a
row, rows not completed or with another config's return, jobs run to their end twice, trials
left RUNNING, job processes alive 2 s after a kill.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "tests" / "apps" / "probe.py"


def command(marks: Path, kind: str, jobs: int, work: Path) -> list[str]:
    base = [sys.executable, str(PROBE), "--multirun", f"marks={marks}", "sleep=0.05"]
    base += ["hydra.launcher.n_jobs=2", f"hydra.sweep.dir={work / 'sweep'}"]
    if kind == "grid":
        return [*base, f"x=range(0,{jobs})"]
    search = [
        "hydra/sweeper=hpsearch",
        "hydra.sweeper.direction=maximize",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=5",
        f"hydra.sweeper.n_trials={jobs}",
        "x=range(0,1000000)",
        "hydra.sweeper.study_name=soak",
    ]
    storage = {"memory": None, "sqlite": f"sqlite:///{work}/study.db", "journal": f"{work}/s.log"}
    url = storage[kind]
    return [*base, *search, *([f"hydra.sweeper.storage={url}"] if url else [])]


def tagged(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("SOAK_TAG") == tag and proc.status() != "zombie":
                found.append(proc)
        except psutil.Error:
            continue
    return found


def soak(kind: str, jobs: int, kills: int, seed: int, work: Path) -> dict[str, int]:
    rng = random.Random(seed)
    marks = work / "marks"
    marks.mkdir()
    tag = uuid.uuid4().hex
    env = dict(os.environ, SOAK_TAG=tag, PYTHONUNBUFFERED="1")
    args = command(marks, kind, jobs, work)
    done = outlived = 0
    for _ in range(kills):
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        time.sleep(rng.uniform(1.0, 6.0))  # start-up is 1-3 s here: some kills land in it
        if proc.poll() is not None:  # it ended by itself: the sweep is complete
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done += 1
        time.sleep(2.0)
        left = tagged(tag)
        outlived += len(left)
        for p in left:
            p.kill()
    final = subprocess.run(args, env=env, capture_output=True, text=True)
    if final.returncode != 0:
        print(final.stdout[-3000:], final.stderr[-3000:], file=sys.stderr)
    return check(work, marks, kind, jobs) | {"kills": done, "outlived_kill": outlived}


def check(work: Path, marks: Path, kind: str, jobs: int) -> dict[str, int]:
    from hpsearch_launcher.results import read_results

    frame = read_results(work / "sweep")
    rows = frame[frame["status"] != "superseded"]
    ends = collections.Counter(
        json.loads(line)["output_dir"]
        for line in (marks / "records.jsonl").read_text().splitlines()
    )
    wrong = (~rows["status"].isin(["completed", "resumed"])) | (
        rows["objective"] != rows["x"].astype(float)
    )
    recorded = {str(Path(d).resolve()) for d in frame["run_dir"]}  # the sweeps ran here
    for output_dir in sorted(set(ends) - recorded):
        print(f"an end with no row: {output_dir}", file=sys.stderr)
    running = 0
    if kind in ("sqlite", "journal"):
        import optuna

        from hpsearch_launcher.search.study import open_storage

        url = f"sqlite:///{work}/study.db" if kind == "sqlite" else f"{work}/s.log"
        study = optuna.load_study(study_name="soak", storage=open_storage(url))
        running = sum(t.state.name == "RUNNING" for t in study.trials)
    return {
        "jobs": jobs,
        "ends": sum(ends.values()),
        "lost": max(0, jobs - len(rows)),
        "wrong_rows": int(wrong.sum()),
        "run_twice": sum(n - 1 for n in ends.values()) + max(0, len(ends) - len(rows)),
        "left_running": running,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=["grid", "memory", "sqlite", "journal"], default="grid")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="work in this (new) dir and keep it")
    args = parser.parse_args()
    started = time.monotonic()
    if args.keep:
        args.keep.mkdir(parents=True)
        figures = soak(args.kind, args.jobs, args.kills, args.seed, args.keep.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            figures = soak(args.kind, args.jobs, args.kills, args.seed, Path(tmp))
    figures["wall_s"] = round(time.monotonic() - started)
    print(f"soak {args.kind}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
