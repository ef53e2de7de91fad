"""Host memory of what waits for the next job, by PSS (pages shared between processes counted
once, split among them), not RSS: a spawned spare (warm_start=spawn) beside the fork server,
the process it forked ahead for the next job, and a job forked from it (warm_start=fork), each
with TensorFlow imported ahead.

    python bench/fork_memory.py [--hold 40] [--slots 2]

Each sweep runs 3 rounds of jobs of bench/apps/workload.py on `--slots` slots (1: 3 jobs;
mode=sleep: the job itself imports nothing, so what is measured is what was imported ahead),
preload=[tensorflow]. Once the second round runs and the next processes wait, every process of
the sweep is read from /proc/PID/smaps_rollup. (A page shared by n processes counts 1/n in
each one's PSS: more slots, more sharers.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "bench" / "apps" / "workload.py"


def pss_mb(pid: int) -> tuple[float, float, float]:
    """(PSS, USS, RSS) of a process in MB, from smaps_rollup: USS is its private pages alone,
    what it costs beyond what it shares."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value) / 1024
    private = fields["Private_Clean"] + fields["Private_Dirty"]
    return fields["Pss"], private, fields["Rss"]


def kind(proc: psutil.Process) -> str | None:
    cmdline = " ".join(proc.cmdline())
    if "execute.local.fork_server" in cmdline:
        parent = " ".join(proc.parent().cmdline()) if proc.parent() else ""
        if "execute.local.fork_server" not in parent:
            return "fork server"
        # A job's process has a session of its own; one forked ahead waits in the server's.
        return "forked job" if os.getsid(proc.pid) == proc.pid else "forked ahead, waiting"
    if "execute.job.child" in cmdline:
        return "spare" if "/spare-" in cmdline else "job"  # a spare keeps its name in its job
    return None


def measure(
    warm_start: str, hold: float, slots: int, work: Path
) -> list[tuple[str, float, float, float]]:
    marks = Path(tempfile.mkdtemp(dir=work, prefix=f"{warm_start}-"))
    command = [
        sys.executable,
        str(APP),
        "--multirun",
        f"x={','.join(str(x) for x in range(3 * slots))}",
        "mode=sleep",
        f"hold={hold}",
        f"marks={marks}",
        f"hydra.sweep.dir={marks / 'out'}",
        "hydra/launcher=hpsearch",
        "hydra.launcher.gpus=[]",
        f"hydra.launcher.n_jobs={slots}",
        "hydra.launcher.preload=[tensorflow]",
        f"hydra.launcher.warm_start={warm_start}",
    ]
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        # Into the second round's hold: the first ran cold, the next processes have their imports.
        time.sleep(hold * 1.5)
        rows = []
        for proc in psutil.Process(sweep.pid).children(recursive=True):
            try:
                name = kind(proc)
                if name is not None:
                    rows.append((name, *pss_mb(proc.pid)))
            except (psutil.Error, OSError):
                continue
        return rows
    finally:
        sweep.kill()
        sweep.wait()
        time.sleep(2)  # its processes' watchdogs end them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hold", type=float, default=40.0)
    parser.add_argument("--slots", type=int, default=1)
    args = parser.parse_args()
    print("| warm_start | process | PSS (MB) | USS (MB) | RSS (MB) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="hpsearch-fork-memory-") as tmp:
        for warm_start in ("spawn", "fork"):
            for name, pss, uss, rss in sorted(
                measure(warm_start, args.hold, args.slots, Path(tmp))
            ):
                print(f"| {warm_start} | {name} | {pss:.0f} | {uss:.0f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
