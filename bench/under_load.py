"""A command run beside CPU burners, as the suite is tried on a loaded machine (issue 28: the
whole suite passes under load 8 on 2 cores, 3 times in a row).

    python bench/under_load.py --burners 6 -- .venv/bin/python -m pytest

Starts `--burners` busy loops (plain Python processes, nice 0, like other work on a shared
box), runs the command, stops the burners, and prints one line: the command's exit status, its
wall time, and the 1-minute load average sampled every 5 s while it ran (mean, min, max).
Exits with the command's status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time

BURN = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burners", type=int, default=6, help="busy loops beside it (6)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    loads: list[float] = []
    start = time.monotonic()
    try:
        job = subprocess.Popen(command)
        while job.poll() is None:
            loads.append(os.getloadavg()[0])
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.wait(timeout=5)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    wall = time.monotonic() - start
    mean = sum(loads) / len(loads) if loads else float("nan")
    low, high = (min(loads), max(loads)) if loads else (float("nan"),) * 2
    print(
        f"under_load: rc={job.returncode} wall={wall:.0f}s burners={args.burners} "
        f"load mean={mean:.2f} min={low:.2f} max={high:.2f} ({len(loads)} samples)",
        flush=True,
    )
    return job.returncode


if __name__ == "__main__":
    sys.exit(main())
