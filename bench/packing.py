"""jobs_per_gpu=auto against hand-set counts, on simulated GPUs whose memory the jobs hold.

    python bench/packing.py                     # 64 jobs of 9 GB, 20 s each (about 16 minutes)
    python bench/packing.py --jobs 16 --hold 4  # a quick look

Two simulated 80 GB GPUs (tests/fake_nvml: NVML answers from what each job's process holds;
a job past its cap, or past what its GPU has free, gets CUDA's out-of-memory error). Every
job holds 9 GB for `--hold` seconds (the probe app, tests/apps/probe.py, gpu_mb=9216). For
each setting: the makespan, the most jobs one GPU held at once, how long until the sweep first
ran that many (steady state), and the jobs that ran out of memory.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "tests" / "apps" / "probe.py"
FAKE_NVML = REPO / "tests" / "fake_nvml"
SETTINGS = ("auto", "1", "4")


def run(jobs_per_gpu: str, jobs: int, hold: float, mb: int, root: Path) -> dict[str, object]:
    memory, marks, out = root / "memory", root / "marks", root / "sweep"
    for path in (memory, marks):
        path.mkdir(parents=True)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]),
        HPS_FAKE_GPUS="2",
        HPS_FAKE_GPU_MEMORY=str(memory),
        HPS_FAKE_GPU_MB=str(80 * 1024),
    )
    args = [
        sys.executable,
        str(PROBE),
        "--multirun",
        f"x=range(0,{jobs})",
        f"gpu_mb={mb}",
        f"sleep={hold}",
        f"marks={marks}",
        f"hydra.sweep.dir={out}",
        "hydra.launcher.gpus=[0,1]",
        f"hydra.launcher.jobs_per_gpu={jobs_per_gpu}",
    ]
    began = time.time()
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=root)
    wall = time.time() - began
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    records = [json.loads(line) for line in (marks / "records.jsonl").read_text().splitlines()]
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    most, steady = 0, 0.0
    for r in sorted(records, key=lambda r: r["start"]):
        here = sum(
            1 for o in records if o["cuda"] == r["cuda"] and o["start"] <= r["start"] < o["end"]
        )
        if here > most:
            most, steady = here, r["start"] - began
    return {
        "jobs_per_gpu": jobs_per_gpu,
        "makespan_s": round(wall, 1),
        "most_per_gpu": most,
        "steady_after_s": round(steady, 1),
        "oom": sum("out of memory" in r["error"] for r in rows),
        "failed": sum(r["status"] != "completed" for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--hold", type=float, default=20.0)
    parser.add_argument("--mb", type=int, default=9216)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    opts = parser.parse_args()
    table = []
    for setting in opts.settings:
        with tempfile.TemporaryDirectory(prefix="hps-pack-") as tmp:
            result = run(setting, opts.jobs, opts.hold, opts.mb, Path(tmp))
        print(json.dumps(result), flush=True)
        table.append(result)
    base = next((r for r in table if r["jobs_per_gpu"] == "auto"), table[0])
    print(f"\n{opts.jobs} jobs of {opts.mb} MB, {opts.hold:g} s each, 2 simulated 80 GB GPUs\n")
    print("| jobs_per_gpu | makespan | vs auto | most at once per GPU | steady after | OOM |")
    print("|---|---|---|---|---|---|")
    for r in table:
        ratio = float(r["makespan_s"]) / float(base["makespan_s"])  # type: ignore[arg-type]
        print(
            f"| {r['jobs_per_gpu']} | {r['makespan_s']} s | {ratio:.2f}x | {r['most_per_gpu']} "
            f"| {r['steady_after_s']} s | {r['oom']} |"
        )


if __name__ == "__main__":
    main()
