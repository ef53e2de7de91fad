"""Server soak: sweeps whose fork server is killed, stopped, or stopped and continued at random
instants, then what their records say checked against what their jobs did (issue 44).

    python bench/server_soak.py --jobs 200 --rounds 10 --seed 1

Each round is one sweep of the launcher tests' probe app (tests/apps/probe.py) on 2 CPU slots,
`--jobs / --rounds` jobs of `--sleep` s each, with the default settings (warm_start=fork). At a
random instant while its fork server lives, the server gets one of: SIGKILL; SIGSTOP, then SIGCONT
after 0.5-8 s; SIGSTOP for good. A server the sweep killed meanwhile gets nothing more (the
sweep falls back to spawning for the rest of that round: one fault per round, as the sweep
sees it). Printed, one line: rounds, the faults sent, jobs, and what went wrong (each should
be 0): rows lost, rows not completed, jobs run twice (their task began twice), jobs blamed on
memory, processes left, and ends recorded more than 5 s after the job's task returned (and
the largest gap seen).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import psutil
from soak import tagged  # bench/, the script's own directory

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "tests" / "apps" / "probe.py"
FAULTS = ("kill", "stop-continue", "stop")
# The sweep's line for an end, as logged when it is recorded: its time and the job's number.
ENDED = re.compile(r"^\[(\S+ \S+)\]\[HYDRA\] job (\d+) (?:done|ended|FAILED|TIMEOUT)")


def fork_server(sweep: psutil.Process) -> psutil.Process | None:
    """The sweep's fork server, if it has one now."""
    try:
        for proc in sweep.children():
            if "execute.local.fork_server" in " ".join(proc.cmdline()):
                return proc
    except psutil.Error:
        pass
    return None


def attack(sweep: subprocess.Popen[str], fault: str, at: float, rng: random.Random) -> str:
    """Wait for the sweep's fork server, then `at` s more, then send it `fault`; what was
    done."""
    server = None
    while server is None and sweep.poll() is None:
        try:
            server = fork_server(psutil.Process(sweep.pid))
        except psutil.Error:  # the sweep has ended
            break
        time.sleep(0.05)
    time.sleep(at)
    if server is None or not server.is_running() or sweep.poll() is not None:
        return "none (no server)"
    try:
        if fault == "kill":
            server.kill()
        else:
            server.suspend()
            if fault == "stop-continue":
                time.sleep(rng.uniform(0.5, 8.0))
                server.resume()
    except psutil.Error:
        return f"{fault} (the server was gone)"
    return fault


def one_round(work: Path, first: int, jobs: int, sleep: float, rng: random.Random) -> dict:
    """One sweep of `jobs` jobs (x from `first`) with one fault; what went wrong."""
    marks, tag = work / "marks", uuid.uuid4().hex
    marks.mkdir()
    command = [
        sys.executable,
        str(PROBE),
        "--multirun",
        f"marks={marks}",
        f"sleep={sleep}",
        f"x=range({first},{first + jobs})",
        "hydra.launcher.gpus=[]",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={work / 'sweep'}",
    ]
    env = dict(os.environ, SOAK_TAG=tag, PYTHONUNBUFFERED="1")
    started = time.monotonic()
    sweep = subprocess.Popen(
        command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    fault = rng.choice(FAULTS)
    # An instant within the sweep's likely span, from the server's start (at the first job).
    at = rng.uniform(0.0, max(1.0, jobs * (sleep + 0.2) / 2))
    done: list[str] = []
    thread = threading.Thread(target=lambda: done.append(attack(sweep, fault, at, rng)))
    thread.start()
    out, _ = sweep.communicate(timeout=600)
    thread.join()
    for proc in psutil.Process().children(recursive=True):  # a server stopped for good is gone
        if "execute.local.fork_server" in " ".join(proc.cmdline()):
            proc.resume()
    time.sleep(1.0)
    left = tagged(tag)
    for proc in left:
        proc.kill()
    return check(work, marks, out, jobs, sweep.returncode, len(left)) | {
        "fault": done[0] if done else "none",
        "wall_s": round(time.monotonic() - started, 1),
    }


def check(work: Path, marks: Path, out: str, jobs: int, code: int, left: int) -> dict:
    if code != 0:
        print(out[-4000:], file=sys.stderr)
    journal = work / "sweep" / "results.jsonl"
    lines = journal.read_text().splitlines() if journal.exists() else []
    final = {}  # each job's last row
    for line in lines:
        if "row" in (entry := json.loads(line)):
            final[entry["row"]["job"]] = entry["row"]
    starts, records = marks / "starts.log", marks / "records.jsonl"
    began = collections.Counter(starts.read_text().split() if starts.exists() else [])
    returned = {}
    for line in records.read_text().splitlines() if records.exists() else []:
        record = json.loads(line)
        returned[record["num"]] = record["end"]
    recorded = {}
    for line in out.splitlines():
        if match := ENDED.match(line):
            when = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            recorded[int(match[2])] = when
    gaps = [recorded[n] - returned[n] for n in returned if n in recorded]
    return {
        "exit": code,
        "jobs": jobs,
        "lost": jobs - len(final),
        "not_completed": sum(r["status"] != "completed" for r in final.values()),
        "run_twice": sum(n > 1 for n in began.values()),
        "blamed_on_memory": out.count("out of memory") + out.count("OOM killer)"),
        "left": left,
        "late_over_5s": sum(g > 5.0 for g in gaps),
        "max_gap_s": round(max(gaps, default=0.0), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    per_round = args.jobs // args.rounds
    totals: collections.Counter[str] = collections.Counter()
    faults: collections.Counter[str] = collections.Counter()
    max_gap = 0.0
    for number in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="server-soak-") as tmp:
            result = one_round(Path(tmp), number * per_round, per_round, args.sleep, rng)
        print(json.dumps({"round": number, **result}), flush=True)
        faults[result["fault"]] += 1
        max_gap = max(max_gap, result["max_gap_s"])
        for key in ("jobs", "lost", "not_completed", "run_twice", "blamed_on_memory", "left"):
            totals[key] += result[key]
        totals["late_over_5s"] += result["late_over_5s"]
        totals["failed_exits"] += result["exit"] != 0
    summary = {"rounds": args.rounds, "faults": dict(faults), **totals, "max_gap_s": max_gap}
    print(json.dumps(summary))


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
