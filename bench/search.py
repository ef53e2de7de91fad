"""Search that never waits and never wastes a slot: contenders side by side on one workload.

    python bench/search.py                       # every contender, 3 repeats
    python bench/search.py --contenders "grid" "grid median" --repeats 1

The workload (bench/apps/curve.py): 64 trials (16 learning rates x 4 batch sizes, the same
for every contender), each 10 epochs of simulated training whose epoch time depends on the
batch size (stragglers: 3x), reporting a noisy learning curve; 8 slots (what 8 GPUs would
give). Per contender: makespan (first start to last end), slot-seconds (the trials' process
lifetimes added up, from results.csv or Ray Tune's own records), slot utilisation
(slot-seconds / (slots x makespan)), and the best final objective reached.

Contenders:
  grid                 hpsearch, the plain grid (Hydra's basic sweeper), no pruning
  grid median          the same with hydra.launcher.prune=median
  search               hydra/sweeper=hpsearch: 64 TPE trials (seeded) over lr in
                       tag(log, interval(1e-5, 1e-1)) x batch in choice(32, 64, 128, 256),
                       asked as slots free; no pruning
  search median, search sh
                       the same with hydra.sweeper.pruner=median / successive_halving
  hydra optuna         Hydra's Optuna sweeper (hydra-optuna-sweeper, optuna<3, in its own venv
                       .venv-hydra-optuna: tests/hydra_optuna_venv.py) on the hpsearch launcher,
                       the same space and seed, n_jobs=8 trials per batch; no pruning (it has
                       none)
  ray tune asha        Ray Tune, the same 64 configs (grid_search), ASHA on the same reports,
                       max_concurrent_trials=8, reuse_actors=False (a fresh process per trial,
                       the setting that gives GPU memory back); needs `ray[tune]`: it runs in
                       its own venv, .venv-bench-tune, made on first use (from the registry)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "bench" / "apps" / "curve.py"
SLOTS = 8
EPOCHS = 10
EPOCH_S = 0.5
LRS = [10 ** (-5 + 4 * i / 15) for i in range(16)]  # 1e-5 .. 1e-1
BATCHES = [32, 64, 128, 256]
TUNE_VENV = REPO / ".venv-bench-tune"


def grid_args(out: Path, *extra: str) -> list[str]:
    lrs = ",".join(f"{lr:.3g}" for lr in LRS)
    batches = ",".join(map(str, BATCHES))
    return [
        sys.executable,
        str(APP),
        "--multirun",
        f"lr={lrs}",
        f"batch={batches}",
        f"epochs={EPOCHS}",
        f"epoch_s={EPOCH_S}",
        f"hydra.sweep.dir={out}",
        f"hydra.launcher.n_jobs={SLOTS}",
        "hydra.launcher.gpus=[]",
        *extra,
    ]


def from_results(path: Path, log: str) -> dict[str, float]:
    """Slot-seconds and the best objective from results.csv; the makespan from the console's
    millisecond times (results.csv's are whole seconds): first job start to last job end."""
    rows = list(csv.DictReader(path.open()))
    busy = sum(float(r["wall_time_s"]) for r in rows)
    finals = [float(r["objective"]) for r in rows if r["status"] == "completed"]
    times = [when for when, _, what in job_events(log) if what != "pruned"]
    return summary(min(times), max(times), busy, max(finals), len(rows))


def job_events(log: str) -> list[tuple[float, str, str]]:
    """(time, job number, what) of each `job N start|done|ended|pruned|FAILED` console line."""
    events = []
    for line in log.splitlines():
        if "] job " not in line or line[:1] != "[":
            continue
        when = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        words = line.split("] job ", 1)[1].split()
        events.append((when, words[0], words[1]))
    return events


def summary(first: float, last: float, busy: float, best: float, trials: int) -> dict:
    makespan = last - first
    return {
        "makespan_s": makespan,
        "slot_s": busy,
        "utilisation": busy / (SLOTS * makespan),
        "best": best,
        "trials": trials,
    }


SPACE = ["lr=tag(log,interval(1e-5,1e-1))", "batch=choice(32,64,128,256)"]


def search_args(out: Path, python: str, *extra: str) -> list[str]:
    return [
        python,
        str(APP),
        "--multirun",
        *SPACE,
        "hydra.sweeper.n_trials=64",
        "hydra.sweeper.direction=maximize",
        f"epochs={EPOCHS}",
        f"epoch_s={EPOCH_S}",
        f"hydra.sweep.dir={out}",
        f"hydra.launcher.n_jobs={SLOTS}",
        "hydra.launcher.gpus=[]",
        *extra,
    ]


def hydra_optuna_python(venv: Path | None = None) -> str:
    """The python of Hydra's Optuna sweeper's venv (tests/hydra_optuna_venv.py: its own
    .venv-hydra-optuna, or `venv`), made if missing."""
    sys.path.insert(0, str(REPO / "tests"))
    from hydra_optuna_venv import VENV, make_venv

    return str(make_venv(venv or VENV))


def run_hpsearch(work: Path, *extra: str, args: list[str] | None = None) -> dict[str, float]:
    out = work / "sweep"
    command = args if args is not None else grid_args(out, *extra)
    done = subprocess.run(command, capture_output=True, cwd=work)
    if done.returncode:
        raise SystemExit(f"{command} failed:\n{done.stdout[-3000:]!r}\n{done.stderr[-3000:]!r}")
    log = done.stdout.decode() + done.stderr.decode()
    result = from_results(out / "results.csv", log)
    result["utilisation_while_trials_remain"] = utilisation_while_trials_remain(log)
    latencies = prune_latencies(log)
    if latencies:
        result["pruned"] = len(latencies)
        result["free_latency_max_s"] = max(latencies)
    return result


def utilisation_while_trials_remain(log: str) -> float:
    """Busy slot-seconds / (slots x time) from the first job's start to the last one's: the
    stretch in which a free slot could have taken a trial (after it, none is left to start)."""
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for when, job, what in job_events(log):
        if what == "start":
            starts.setdefault(job, when)
        elif what != "pruned":
            ends[job] = when
    first, last = min(starts.values()), max(starts.values())
    busy = sum(
        max(0.0, min(ends.get(job, last), last) - max(began, first))
        for job, began in starts.items()
    )
    return busy / (SLOTS * (last - first))


def prune_latencies(log: str) -> list[float]:
    """Seconds from each pruning decision ("job N pruned") to its slot freed ("job N ended"),
    from the sweep's console (Hydra's log lines carry the time to the millisecond)."""
    decided: dict[str, float] = {}
    latencies = []
    for when, job, what in job_events(log):
        if what == "pruned":
            decided[job] = when
        elif what == "ended" and job in decided:
            latencies.append(when - decided.pop(job))
    return latencies


TUNE_SCRIPT = r"""
import json, sys, time
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from curve import accuracy, epoch_seconds
lrs, batches, epochs, epoch_s, slots = json.loads(sys.argv[1])

def trainable(config):
    seconds = epoch_seconds(config["lr"], config["batch"], epoch_s, 0)
    for epoch in range(epochs):
        time.sleep(seconds)
        value = accuracy(config["lr"], config["batch"], epoch, 0, 0.01)
        tune.report({"objective": value, "epoch": epoch})

ray.init(num_cpus=slots, include_dashboard=False, log_to_driver=False)
started = time.time()
analysis = tune.run(
    trainable,
    config={"lr": tune.grid_search(lrs), "batch": tune.grid_search(batches)},
    scheduler=ASHAScheduler(metric="objective", mode="max", max_t=epochs, grace_period=1),
    resources_per_trial={"cpu": 1},
    max_concurrent_trials=slots,
    reuse_actors=False,
    storage_path=sys.argv[2],
    verbose=0,
)
ended = time.time()
trials = analysis.trials
busy = sum(t.last_result.get("time_total_s", 0.0) for t in trials)
best = max(t.last_result["objective"] for t in trials if t.last_result["epoch"] == epochs - 1)
print(json.dumps({"first": started, "last": ended, "busy": busy, "best": best, "n": len(trials)}))
"""


def tune_python() -> Path:
    """A venv for Ray Tune: ray[tune] at the main venv's Ray version; the rest borrowed."""
    python = TUNE_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", TUNE_VENV], check=True)
        import ray

        subprocess.run(
            [python, "-m", "pip", "install", "-q", f"ray[tune]=={ray.__version__}"], check=True
        )
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (Path(site) / "main-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def tune_result(script: str, setup: object, work: Path) -> dict:
    """Run a Ray Tune script (argv: its setup as JSON, the work dir) in Ray Tune's venv; the
    JSON it printed last."""
    # Ray's workers find the workloads (and hpsearch_launcher, which they import) through it.
    env = dict(os.environ, RAY_AIR_NEW_OUTPUT="0", PYTHONPATH=f"{APP.parent}:{REPO / 'src'}")
    done = subprocess.run(
        [tune_python(), "-c", script, json.dumps(setup), str(work)],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
    )
    if done.returncode:
        raise SystemExit(f"Ray Tune failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    # Ray may print after the script's own last line: its JSON is the last line that is one.
    return json.loads(next(x for x in reversed(done.stdout.splitlines()) if x.startswith("{")))


def run_tune(work: Path) -> dict[str, float]:
    r = tune_result(TUNE_SCRIPT, [LRS, BATCHES, EPOCHS, EPOCH_S, SLOTS], work)
    return summary(r["first"], r["last"], r["busy"], r["best"], r["n"])


def run_search(work: Path, *extra: str) -> dict[str, float]:
    ours = ["hydra/sweeper=hpsearch", "hydra.sweeper.sampler.seed=0", *extra]
    return run_hpsearch(work, args=search_args(work / "sweep", sys.executable, *ours))


def run_hydra_optuna(work: Path) -> dict[str, float]:
    theirs = [
        "hydra/sweeper=optuna",
        "hydra.sweeper.sampler.seed=0",
        f"hydra.sweeper.n_jobs={SLOTS}",
    ]
    python = hydra_optuna_python()
    return run_hpsearch(work, args=search_args(work / "sweep", python, *theirs))


CONTENDERS = {
    "grid": lambda work: run_hpsearch(work),
    "grid median": lambda work: run_hpsearch(work, "hydra.launcher.prune=median"),
    "search": lambda work: run_search(work),
    "search median": lambda work: run_search(work, "hydra.sweeper.pruner=median"),
    "search sh": lambda work: run_search(work, "hydra.sweeper.pruner=successive_halving"),
    "hydra optuna": run_hydra_optuna,
    "ray tune asha": run_tune,
}


Contender = Callable[[Path], dict[str, float]]


def contender_args(
    doc: str, contenders: Mapping[str, Contender], repeats: int
) -> argparse.Namespace:
    """--repeats and --contenders (default: all), as a side-by-side bench takes them."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--contenders", nargs="*", default=list(contenders))
    return parser.parse_args()


def interleaved(
    contenders: Mapping[str, Contender], names: list[str], repeats: int, prefix: str
) -> dict[str, list[dict[str, float]]]:
    """Each named contender `repeats` times, interleaved (the machine's noise hits all alike),
    each run in a fresh work dir; each run's result printed as it ends."""
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for repeat in range(repeats):
            for name in names:
                work = Path(tmp) / f"{name.replace(' ', '-')}-{repeat}"
                work.mkdir()
                results.setdefault(name, []).append(contenders[name](work))
                print(f"{name} #{repeat}: {json.dumps(results[name][-1])}", flush=True)
    return results


def main() -> None:
    args = contender_args(__doc__, CONTENDERS, 3)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {SLOTS} slots")
    results = interleaved(CONTENDERS, args.contenders, args.repeats, "hpsearch-search-")
    print(
        "\n| contender | trials | makespan (s) | slot-s | utilisation | utilisation while trials "
        "remain | best objective | pruned | decision to free, max (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in runs[0]}
        worst = max(r.get("free_latency_max_s", 0.0) for r in runs)
        print(
            f"| {name} | {med['trials']:.0f} | {med['makespan_s']:.1f} | {med['slot_s']:.0f} | "
            f"{med['utilisation']:.2f} | {med.get('utilisation_while_trials_remain', 0):.2f} | "
            f"{med['best']:.4f} | {med.get('pruned', 0):.0f} | "
            f"{worst:.2f} |"
        )


if __name__ == "__main__":
    main()
