"""hpsearch beside the launchers people use, side by side in one run, as ratios.

    python bench/launchers.py                 # every workload below (about 15 minutes here)
    python bench/launchers.py --only tf8 sleep16 --repeats 2
    python bench/launchers.py --only tf8 --contenders "hpsearch warm" "hpsearch ray"
    python bench/launchers.py --only scale --scale 100 1000
    python bench/launchers.py --only scale --scale 1000 --baseline /tmp/old   # side by side

Workloads (2 slots each; a "slot" is what a GPU box would give one job):
  tf8, tf3     8 jobs that import TensorFlow, build a model and hold the "GPU" 8 s / 3 s
               (hpsearch with preload=[tensorflow])
  tf8lazy, tf3lazy   the same, run with no launcher settings at all (the user's defaults:
               preload auto), beside joblib: TensorFlow imported inside the task
  tf8top, tf3top     the same, with TensorFlow imported at the top of the script
               (bench/apps/workload_tf_top.py): the sweep process imports it too
  tf8x32       the same with 32 jobs holding 8 s
  sleep16      16 jobs that sleep 1 s
  trivial64    64 jobs that return at once
  digits4      the README's 4-job digits sweep on CPU (python -m hpsearch)
  scale        100, 300 and 1,000 trivial jobs under hpsearch: time until the first job
               starts (from launch() being called), the sweep process's peak RSS and its
               own CPU time per job

Contenders: hpsearch warm (the default: the fork server), hpsearch cold (warm_start=false),
hpsearch spawn (warm_start=spawn: spawned spares; with no other setting: hpsearch defaults
spawn), hpsearch ray
(backend=ray, a Ray of the sweep's own with 2 CPUs), Hydra's basic launcher
(one job at a time, in the sweep process: skipped where that takes over a minute),
hydra-joblib-launcher (reuses worker processes),
hydra-submitit-launcher's local executor (a fresh process per job; it has no slot limit, so
it runs every job at once: skipped for more than 8 TensorFlow jobs, which would not fit in
RAM), and task-spooler (`tsp -S 2`, one `python app.py` per job). One
that is not installed is reported as skipped.

The ideal of a workload is one cold start (the first job cannot hide it: measured here as one
job run alone) plus jobs x hold / slots. "first job at" is when the first job's task began,
counted from the contender's command being started (the sweep's own start-up, its imports).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "bench" / "apps" / "workload.py"
TF_TOP_APP = REPO / "bench" / "apps" / "workload_tf_top.py"
DRIVER = REPO / "bench" / "apps" / "timed_launch.py"
SLOTS = 2


@dataclass(frozen=True)
class Workload:
    name: str
    jobs: int
    mode: str  # trivial, sleep, tf
    hold: float
    app: Path = APP
    defaults: bool = False  # hpsearch with no launcher settings, beside joblib only


WORKLOADS = {
    "tf8": Workload("tf8", 8, "tf", 8.0),
    "tf3": Workload("tf3", 8, "tf", 3.0),
    "tf8x32": Workload("tf8x32", 32, "tf", 8.0),
    "tf8lazy": Workload("tf8lazy", 8, "tf", 8.0, defaults=True),
    "tf8top": Workload("tf8top", 8, "tf", 8.0, TF_TOP_APP, defaults=True),
    "tf3lazy": Workload("tf3lazy", 8, "tf", 3.0, defaults=True),
    "tf3top": Workload("tf3top", 8, "tf", 3.0, TF_TOP_APP, defaults=True),
    "sleep16": Workload("sleep16", 16, "sleep", 1.0),
    "trivial64": Workload("trivial64", 64, "trivial", 0.0),
}


def hydra_args(w: Workload, marks: Path, out: Path) -> list[str]:
    return [
        "--multirun",
        f"x=range(0,{w.jobs})",
        f"mode={w.mode}",
        f"hold={w.hold}",
        f"marks={marks}",
        f"hydra.sweep.dir={out}",
    ]


def contenders(w: Workload) -> dict[str, Callable[[Path, Path], list[list[str]]] | None]:
    """Each contender: the commands that run the workload (None when not installed)."""
    py = sys.executable
    preload = "[tensorflow]" if w.mode == "tf" else "[]"
    ours = [
        "hydra/launcher=hpsearch",
        "hydra.launcher.gpus=[]",
        f"hydra.launcher.n_jobs={SLOTS}",
        f"hydra.launcher.preload={preload}",
    ]

    def command(*launcher: str) -> Callable[[Path, Path], list[list[str]]]:
        return lambda marks, out: [[py, str(w.app), *hydra_args(w, marks, out), *launcher]]

    if w.defaults:  # n_jobs' default is this machine's cores: SLOTS here, else said so
        cores = [] if os.cpu_count() == SLOTS else [f"hydra.launcher.n_jobs={SLOTS}"]
        return {
            "hpsearch defaults": command("hydra/launcher=hpsearch", *cores),
            "hpsearch defaults spawn": command(
                "hydra/launcher=hpsearch", *cores, "hydra.launcher.warm_start=spawn"
            ),
            "joblib": command("hydra/launcher=joblib", f"hydra.launcher.n_jobs={SLOTS}"),
        }

    def spooler(marks: Path, out: Path) -> list[list[str]]:
        return [
            [
                py,
                str(w.app),
                f"x={i}",
                f"mode={w.mode}",
                f"hold={w.hold}",
                f"marks={marks}",
                f"hydra.run.dir={out}/{i}",
            ]
            for i in range(w.jobs)
        ]

    return {
        "hpsearch warm": command(*ours),
        "hpsearch cold": command(*ours, "hydra.launcher.warm_start=false"),
        "hpsearch spawn": command(*ours, "hydra.launcher.warm_start=spawn"),
        # A Ray the sweep starts on this machine, with SLOTS CPUs: Ray's own pool of started
        # workers, one fresh worker per job (its start-up counts: the sweep's own Ray).
        "hpsearch ray": command(
            *ours, "hydra.launcher.backend=ray", f"+hydra.launcher.ray.init.num_cpus={SLOTS}"
        )
        if _installed("ray")
        else None,
        "joblib": command("hydra/launcher=joblib", f"hydra.launcher.n_jobs={SLOTS}"),
        "basic": command("hydra/launcher=basic") if w.jobs * w.hold <= 64 else None,
        # It starts every job at once: more than 8 TensorFlow processes would not fit in RAM.
        "submitit local": command("hydra/launcher=submitit_local", "hydra.launcher.timeout_min=60")
        if _installed("hydra_plugins.hydra_submitit_launcher") and (w.mode != "tf" or w.jobs <= 8)
        else None,
        "task-spooler": spooler if shutil.which("tsp") else None,
    }


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def run_contender(name: str, commands: list[list[str]], marks: Path) -> float:
    """Wall seconds until every job of the workload has ended."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
    started = time.monotonic()
    if name == "task-spooler":
        env["TS_SOCKET"] = str(marks / "tsp.socket")
        env["TS_MAXFINISHED"] = "10000"
        subprocess.run(["tsp", "-S", str(SLOTS)], env=env, check=True, capture_output=True)
        ids = [
            subprocess.run(
                ["tsp", *c], env=env, check=True, capture_output=True, text=True
            ).stdout.strip()
            for c in commands
        ]
        for job_id in ids:
            subprocess.run(["tsp", "-w", job_id], env=env, capture_output=True)
        seconds = time.monotonic() - started
        subprocess.run(["tsp", "-K"], env=env, capture_output=True)
        return seconds
    for command in commands:
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=marks)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def cold_start(w: Workload, work: Path) -> float:
    """One job run alone, with no hold: what the first job of any sweep pays."""
    marks = work / f"cold-{w.name}"
    marks.mkdir()
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            str(w.app),
            f"mode={w.mode}",
            "hold=0",
            f"marks={marks}",
            f"hydra.run.dir={marks}/run",
        ],
        check=True,
        capture_output=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    return time.monotonic() - started


def bench_workload(w: Workload, repeats: int, work: Path, only: list[str] | None) -> None:
    cold = cold_start(w, work)
    ideal = cold + w.jobs * w.hold / SLOTS
    print(f"\n## {w.name}: {w.jobs} jobs, mode={w.mode}, hold {w.hold:g} s, {SLOTS} slots")
    print(f"cold start {cold:.1f} s; ideal {ideal:.1f} s = cold + {w.jobs} x {w.hold:g} / {SLOTS}")
    print(f"| contender | best of {repeats} (s) | x ideal | first job at (s) | distinct pids |")
    print("|---|---|---|---|---|")
    chosen = {name: make for name, make in contenders(w).items() if not only or name in only}
    for name in [name for name, make in chosen.items() if make is None]:
        print(f"| {name} | skipped: not installed, or unfit (see the docstring) | | | |")
    runnable = {name: make for name, make in chosen.items() if make is not None}
    results = dict.fromkeys(runnable, float("inf"))
    first: dict[str, float] = {}
    pids: dict[str, int] = {}
    for _ in range(repeats):  # contenders alternate within a repeat: the same noise for all
        for name, make in runnable.items():
            marks = Path(tempfile.mkdtemp(dir=work, prefix=f"{w.name}-"))
            began = time.time()
            seconds = run_contender(name, make(marks, marks / "out"), marks)
            records = [json.loads(x) for x in (marks / "records.jsonl").read_text().splitlines()]
            assert len(records) == w.jobs, f"{name}: {len(records)} of {w.jobs} jobs recorded"
            if seconds < results[name]:
                results[name] = seconds
                first[name] = min(rec["start"] for rec in records) - began
            pids[name] = len({rec["pid"] for rec in records})
    for name, best in results.items():
        print(f"| {name} | {best:.1f} | {best / ideal:.2f} | {first[name]:.1f} | {pids[name]} |")
    ours = "hpsearch defaults" if w.defaults else "hpsearch warm"
    spawned = "hpsearch defaults spawn" if w.defaults else "hpsearch spawn"
    for mine in (ours, spawned):
        if mine in results and "joblib" in results:
            print(f"{mine} / joblib = {results[mine] / results['joblib']:.2f}")
    if ours in results and spawned in results:
        print(f"fork / spawn = {results[ours] / results[spawned]:.2f}")


def bench_digits(repeats: int, work: Path) -> None:
    print("\n## digits4: python -m hpsearch --multirun lr=1e-3,1e-2 batch=32,128 device=cpu")
    print(f"| contender | best of {repeats} (s) |")
    print("|---|---|")
    for name, extra in (
        ("hpsearch warm", []),
        ("hpsearch cold", ["hydra.launcher.warm_start=false"]),
    ):
        best = float("inf")
        for _ in range(repeats):
            out = Path(tempfile.mkdtemp(dir=work, prefix="digits-"))
            command = [
                sys.executable,
                "-m",
                "hpsearch",
                "--multirun",
                "lr=1e-3,1e-2",
                "batch=32,128",
                "device=cpu",
                f"hydra.sweep.dir={out}",
                *extra,
            ]
            started = time.monotonic()
            subprocess.run(command, check=True, capture_output=True, cwd=work)
            best = min(best, time.monotonic() - started)
        print(f"| {name} | {best:.1f} |")


def bench_scale(work: Path, sizes: list[int], baseline: Path | None) -> None:
    print("\n## scale: trivial jobs under hpsearch's spawned spares and fork server, 2 slots")
    print(
        "| warm_start | jobs | first job starts after launch() (s) | sweep's peak RSS (MB) "
        "| sweep CPU per job (ms) | wall (s) | a task's end to the next one's first line, "
        "p50 / p99 (ms) | a freed slot to the next task's first line, p50 / p99 (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for jobs in sizes:  # side by side: the same noise for each
        if baseline is not None:  # an older checkout's launcher, at its own default
            _scale_once(work, jobs, "true", baseline)
        for warm_start in ("spawn", "fork"):
            _scale_once(work, jobs, warm_start)


def _scale_once(work: Path, jobs: int, warm_start: str, code: Path | None = None) -> None:
    marks = Path(tempfile.mkdtemp(dir=work, prefix=f"scale{jobs}-"))
    w = Workload(f"scale{jobs}", jobs, "trivial", 0.0)
    command = [
        sys.executable,
        str(DRIVER),
        str(APP),
        *hydra_args(w, marks, marks / "out"),
        "hydra/launcher=hpsearch",
        "hydra.launcher.gpus=[]",
        f"hydra.launcher.n_jobs={SLOTS}",
        f"hydra.launcher.warm_start={warm_start}",
    ]
    started = time.monotonic()
    log = marks / "sweep.log"  # a file, not a pipe: nobody reads a pipe while it runs
    env = None if code is None else dict(os.environ, PYTHONPATH=f"{code / 'src'}:{code}")
    with log.open("w") as out_file:
        proc = subprocess.Popen(
            command, stdout=out_file, stderr=subprocess.STDOUT, cwd=marks, env=env
        )
    watched = psutil.Process(proc.pid)
    peak, cpu = 0, 0.0
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
            times = watched.cpu_times()
            cpu = times.user + times.system
        except psutil.Error:
            break
        time.sleep(0.05)
    out = log.read_text()
    wall = time.monotonic() - started
    launch_at, sweep_cpu_before = _printed(out, "LAUNCH_AT"), _printed(out, "CPU_AT_LAUNCH")
    records = [json.loads(x) for x in (marks / "records.jsonl").read_text().splitlines()]
    first = min(r["start"] for r in records) - launch_at
    per_job = (cpu - sweep_cpu_before) / jobs * 1000
    # The i-th task to begin took the slot the (i - SLOTS)-th to end gave back: the gap is the
    # process's exit, the sweep's noticing, and the next process's start (fork or hand-over).
    ends, starts = sorted(r["end"] for r in records), sorted(r["start"] for r in records)
    p50, p99 = _quantiles([starts[i] - ends[i - SLOTS] for i in range(SLOTS, len(starts))])
    # From the sweep's own line for a job's end (logged once its slot is free and its end
    # recorded) to the first line of the task that took the slot.
    freed = sorted(_logged_at(line) for line in out.splitlines() if _DONE.match(line))
    free50, free99 = _quantiles([starts[i] - freed[i - SLOTS] for i in range(SLOTS, len(starts))])
    label = warm_start if code is None else f"{warm_start} ({code})"
    print(
        f"| {label} | {jobs} | {first:.2f} | {peak / 2**20:.0f} | {per_job:.1f} | {wall:.0f} "
        f"| {p50:.0f} / {p99:.0f} | {free50:.0f} / {free99:.0f} |"
    )


_DONE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]\[[^]]*\] job \d+ done ")


def _logged_at(line: str) -> float:
    """When a log line of the sweep's was written (Hydra's format: local time, milliseconds)."""
    found = _DONE.match(line)
    assert found is not None
    stamp, ms = found.groups()
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000


def _quantiles(gaps: list[float]) -> tuple[float, float]:
    """p50 and p99 of `gaps` (s), in ms."""
    gaps = sorted(gaps)
    p50, p99 = (gaps[int(q * (len(gaps) - 1))] * 1000 for q in (0.5, 0.99))
    return p50, p99


def _printed(out: str, tag: str) -> float:
    """The number timed_launch.py printed after `tag`."""
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith(tag)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="workloads to run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--contenders", nargs="*", default=None, help="e.g. 'hpsearch warm'")
    parser.add_argument("--scale", nargs="*", type=int, default=[100, 300, 1000], help="jobs")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="scale: also run this checkout's launcher first (e.g. a `git worktree` of an "
        "older commit), at warm_start=true",
    )
    args = parser.parse_args()
    chosen = args.only or [*WORKLOADS, "digits4", "scale"]
    version = sys.version.split()[0]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, Python {version}")
    with tempfile.TemporaryDirectory(prefix="hpsearch-bench-") as tmp:
        work = Path(tmp)
        for name in chosen:
            if name in WORKLOADS:
                bench_workload(WORKLOADS[name], args.repeats, work, args.contenders)
            elif name == "digits4":
                bench_digits(args.repeats, work)
            elif name == "scale":
                bench_scale(work, args.scale, args.baseline)


if __name__ == "__main__":
    main()
