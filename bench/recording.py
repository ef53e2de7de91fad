"""The sweep's own cost of recording a job's end, per job, at 100 and 1,000 jobs.

    python bench/recording.py                        # this checkout's record
    PYTHONPATH=/tmp/before/src python bench/recording.py   # another's (e.g. `git archive`)

What the sweep process does when a job ends, and nothing else: `ResultsTable.put` of a row
shaped like the scale workload's (two swept values, an objective, the fixed columns), then the
loop's `flush()`, with ends arriving every GAP_S as 2 slots of quick jobs give them. Reported:
the CPU time and the wall time (fsync included) of those calls, per job; the whole-file
results.csv rewrites are counted too.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hpsearch_launcher.record import table as table_module
from hpsearch_launcher.record.table import ResultsTable

GAP_S = 0.01  # between two ends (the scale bench's 1,000 jobs: about one per 0.15 s)


def row(job: int) -> dict[str, object]:
    return {
        "job": job,
        "status": "completed",
        "objective": job / 7,
        "device": "cpu",
        "start": "2026-12-02T10:00:00",
        "end": "2026-12-02T10:00:01",
        "wall_time_s": 0.71,
        "attempts": 1,
        "run_dir": f"/sweeps/scale/x={job},y={job % 3}",
        "config_hash": f"{job:016x}",
        "error": "",
        "return": str(job / 7),
    }


def measure(jobs: int) -> tuple[float, float, int]:
    """CPU ms and wall ms per job of recording `jobs` ends, and how often results.csv was
    written."""
    with tempfile.TemporaryDirectory() as tmp:
        table = ResultsTable(Path(tmp) / "results.csv")
        table.min_interval = table_module.SAVE_INTERVAL_S  # as a sweep sets it
        writes = 0
        save = table.save

        def counted() -> None:
            nonlocal writes
            writes += 1
            save()

        table.save = counted  # type: ignore[method-assign]
        cpu = wall = 0.0
        for job in range(jobs):
            time.sleep(GAP_S)
            c0, w0 = time.process_time(), time.perf_counter()
            table.put(row(job), {"x": str(job), "y": str(job % 3)})
            table.flush()
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
        c0, w0 = time.process_time(), time.perf_counter()
        table.flush(force=True)  # the sweep's end
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
    return cpu / jobs * 1000, wall / jobs * 1000, writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", nargs="*", type=int, default=[100, 1000])
    parser.add_argument("--repeats", type=int, default=3, help="the median is printed")
    args = parser.parse_args()
    print("| jobs | CPU per job (ms) | wall per job (ms) | results.csv writes |")
    print("|---|---|---|---|")
    for jobs in args.jobs:
        runs = sorted((measure(jobs) for _ in range(args.repeats)), key=lambda r: r[1])
        cpu, wall, writes = runs[len(runs) // 2]
        print(f"| {jobs} | {cpu:.3f} | {wall:.3f} | {writes} |")


if __name__ == "__main__":
    main()
