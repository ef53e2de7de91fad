"""Hydra's Optuna-sweeper example (sphere.py, its conf/config.yaml as shipped: TPE seed 123,
20 trials, n_jobs=1, Hydra's basic launcher) with hydra/sweeper=optuna and with
hydra/sweeper=hpsearch, side by side, alternating, in one run.

    python bench/hydra_sphere.py [--repeats 3]

Per sweeper: wall time of the whole command and its CPU time (user + system, the command and
its children), and the best value. Hydra's sweeper runs in tests/hydra_optuna_venv.py's venv
(Optuna 2.x); hpsearch's in this one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tests" / "apps" / "hydra_optuna" / "example"


def run(python: str, sweeper: str, sweep_dir: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, best value) of one sweep."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [
            python,
            "sphere.py",
            "--multirun",
            f"hydra/sweeper={sweeper}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=EXAMPLE,
        check=True,
        capture_output=True,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    best = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())["best_value"]
    return wall, cpu, float(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    sys.path.insert(0, str(REPO / "tests"))
    from hydra_optuna_venv import make_venv

    pythons = {"optuna": str(make_venv()), "hpsearch": sys.executable}
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in pythons}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for name, python in pythons.items():
                runs[name].append(run(python, name, Path(tmp) / f"{name}-{i}"))
    print("| hydra/sweeper | wall s (median, min-max) | CPU s (median) | best value |")
    print("|---|---|---|---|")
    for name, results in runs.items():
        walls, cpus, bests = zip(*results, strict=True)
        print(
            f"| {name} | {statistics.median(walls):.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
            f"{statistics.median(cpus):.1f} | {', '.join(f'{b:g}' for b in bests)} |"
        )


if __name__ == "__main__":
    main()
