"""Beyond one machine, side by side: an Optuna search on a real SLURM, hpsearch's SLURM backend
against the pair Hydra's users reach for today (hydra-submitit-launcher + hydra-optuna-sweeper).

    .ci/slurm-up.sh down; HPSEARCH_SLURM_GPUS=8 .ci/slurm-up.sh
    python bench/slurm.py                          # every contender, 2 repeats, interleaved
    python bench/slurm.py --contenders "hpsearch" --repeats 1

The workload: the search bench's (bench/search.py): bench/apps/curve.py's trial (a noisy
learning curve, 10 epochs of simulated training whose time depends on the batch size, 1 in 8 a
straggler 3x slower), 64 TPE trials (seeded) over lr in tag(log, interval(1e-5, 1e-1)) x batch
in choice(32, 64, 128, 256), each one SLURM job holding one of the node's 8 simulated GPUs
(gpus_per_node=1): 8 at once. Each contender's command is what its user writes; all run on the
cluster .ci/slurm-up.sh starts (one node). Per run, from the command and from SLURM's own
records (its job completion log): the command's wall time (start to exit), the SLURM jobs it
submitted, their slot-seconds (each job's elapsed time, added up), the seconds from a GPU
freeing to the next job's start on it (SLURM's start times; median and max over the jobs that
waited for one), and the best value its search reports (optimization_results.yaml).

Contenders:
  hpsearch             hydra/launcher=hpsearch_slurm hydra/sweeper=hpsearch (trials asked as
                       slots free), hydra.launcher.array_parallelism=8
  hpsearch hyperband   the same with hydra.sweeper.pruner=hyperband (hpsearch's defaults)
  hpsearch hyperband no liar
                       the same, TPE without Optuna's constant_liar (hpsearch's default since
                       the 14:29 run: running trials count as bad guesses in TPE's model)
  submitit optuna      hydra/launcher=submitit_slurm hydra/sweeper=optuna, n_jobs=8 trials a
                       batch, array_parallelism=8; no pruning (Hydra's sweeper has none). In
                       its own venv, .venv-bench-submitit (Hydra's Optuna sweeper pins
                       optuna < 3 on the 1.3 line; hydra-submitit-launcher from the registry),
                       made on first use.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from search import contender_args, hydra_optuna_python, interleaved

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "bench" / "apps" / "curve.py"
VENV = REPO / ".venv-bench-submitit"
TRIALS, AT_ONCE = 64, 8
JOBCOMP = Path("/var/log/slurm/jobcomp.log")  # .ci/slurm-up.sh's JobCompLoc
SPACE = ["lr=tag(log,interval(1e-5,1e-1))", "batch=choice(32,64,128,256)"]
WORKLOAD = ["epochs=10", "epoch_s=0.5"]


def submitit_python() -> str:
    """Hydra's Optuna sweeper's venv (tests/hydra_optuna_venv.py) with hydra-submitit-launcher
    installed too; its python."""
    python = hydra_optuna_python(VENV)
    probe = [python, "-c", "import hydra_plugins.hydra_submitit_launcher"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        install = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
        subprocess.run([*install, "hydra-submitit-launcher>=1.2,<1.3"], check=True)
    return python


def command(python: str, out: Path, *extra: str) -> list[str]:
    return [
        python,
        str(APP),
        "--multirun",
        "--config-name=slurm_curve",
        *WORKLOAD,
        *SPACE,
        f"hydra.sweeper.n_trials={TRIALS}",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.sampler.seed=0",
        f"hydra.sweep.dir={out}",
        f"hydra.launcher.array_parallelism={AT_ONCE}",
        "hydra.launcher.gpus_per_node=1",
        "hydra.launcher.timeout_min=10",
        *extra,
    ]


def slurm_jobs_since(start: float) -> list[tuple[float, float]]:
    """(start, end) of each SLURM job submitted since `start`, as SLURM's job completion log
    records them (.ci/slurm-up.sh's JobCompLoc: this cluster has no accounting database)."""
    for _ in range(60):  # each job's line is written once SLURM is done with it
        if not subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout:
            break
        time.sleep(0.5)
    jobs = []
    for line in JOBCOMP.read_text().splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        begun, ended = (_epoch(fields.get(key, "")) for key in ("SubmitTime", "EndTime"))
        if begun is not None and ended is not None and begun >= int(start):
            jobs.append((_epoch(fields["StartTime"]) or begun, ended))
    return jobs


def _epoch(stamp: str) -> float | None:
    try:
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def waits_for_a_gpu(jobs: list[tuple[float, float]]) -> list[float]:
    """For each job that started after the first wave: its start minus the latest end before
    it (the GPU it took freed then, or later: SLURM's second-resolution times)."""
    ends = sorted(end for _, end in jobs)
    waits = []
    for start, _ in sorted(jobs)[AT_ONCE:]:
        freed = [end for end in ends if end <= start]
        if freed:
            waits.append(start - freed[-1])
    return waits


def run(args: list[str], work: Path) -> dict[str, float]:
    start = time.monotonic()
    started = time.time()
    done = subprocess.run(args, capture_output=True, text=True, cwd=work)
    wall = time.monotonic() - start
    if done.returncode:
        raise SystemExit(f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    best = yaml.safe_load((work / "sweep" / "optimization_results.yaml").read_text())
    jobs = slurm_jobs_since(started)
    waits = waits_for_a_gpu(jobs) or [0.0]
    return {
        "wall_s": round(wall, 1),
        "best": round(float(best["best_value"]), 4),
        "slurm_jobs": len(jobs),
        "slot_s": sum(end - begin for begin, end in jobs),
        "wait_median_s": statistics.median(waits),
        "wait_max_s": max(waits),
    }


def hpsearch(work: Path, *extra: str) -> dict[str, float]:
    ours = ["hydra/launcher=hpsearch_slurm", "hydra/sweeper=hpsearch", *extra]
    return run(command(sys.executable, work / "sweep", *ours), work)


def submitit_optuna(work: Path) -> dict[str, float]:
    theirs = [
        "hydra/launcher=submitit_slurm",
        "hydra/sweeper=optuna",
        f"hydra.sweeper.n_jobs={AT_ONCE}",
        f"hydra.launcher.submitit_folder={work / 'sweep' / '.submitit' / '%j'}",
    ]
    return run(command(submitit_python(), work / "sweep", *theirs), work)


CONTENDERS = {
    "hpsearch": lambda work: hpsearch(work),
    "hpsearch hyperband": lambda work: hpsearch(work, "hydra.sweeper.pruner=hyperband"),
    "hpsearch hyperband no liar": lambda work: hpsearch(
        work, "hydra.sweeper.pruner=hyperband", "+hydra.sweeper.sampler.constant_liar=false"
    ),
    "submitit optuna": submitit_optuna,
}


def main() -> None:
    args = contender_args(__doc__, CONTENDERS, 2)
    load = os.getloadavg()[0]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load {load:.1f}")
    results = interleaved(CONTENDERS, args.contenders, args.repeats, "hpsearch-slurm-bench-")
    print(f"# load at the end {os.getloadavg()[0]:.1f}")
    print(
        "\n| contender | wall (s), each run | median | best value, each run | SLURM jobs | "
        "slot-s (median) | GPU free to next start, median / max (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        walls = [r["wall_s"] for r in runs]
        print(
            f"| {name} | {', '.join(map(str, walls))} | {statistics.median(walls):.1f} | "
            f"{', '.join(str(r['best']) for r in runs)} | "
            f"{', '.join(str(r['slurm_jobs']) for r in runs)} | "
            f"{statistics.median(r['slot_s'] for r in runs):.0f} | "
            f"{statistics.median(r['wait_median_s'] for r in runs):.0f} / "
            f"{max(r['wait_max_s'] for r in runs):.0f} |"
        )


if __name__ == "__main__":
    main()
