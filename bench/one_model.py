"""A search in the time of one model (issue 49): 256 trials against the best one trained alone.

    python bench/one_model.py                                 # search, then its best alone
    python bench/one_model.py --contenders search "1 gpu x4" "8 gpus x1" ray --trials 256
    python bench/one_model.py --contenders search "no race" --curve b   # another curve

The workload (bench/apps/model_curve.py): lr (log), batch and width, up to 27 epochs of about
0.35-2.9 s (1 in 10 a straggler), a curve whose early ranking is not its last one. Every
hpsearch contender runs the command a user writes, with the sweeper's defaults:

    CUDA_VISIBLE_DEVICES=0,...,7 python bench/apps/model_curve.py --multirun \\
        hydra/sweeper=hpsearch hydra.sweeper.pruner=hyperband hydra.sweeper.n_trials=256 \\
        hydra.sweeper.direction=maximize hydra.sweeper.sampler.seed=0 \\
        hydra.launcher.jobs_per_gpu=4 'lr=tag(log,interval(1e-4,1e-1))' \\
        'batch=choice(16,32,64,128,256)' 'width=choice(64,128,256,512,1024)'

on simulated GPUs (tests/fake_nvml). Then the search's best configuration is trained alone for
27 epochs through the same app (`python bench/apps/model_curve.py lr=... batch=... width=...`),
and the ratio is the search's wall time over that one's. Both walls are the commands' own,
start to exit. The space's best is the noiseless curve's last value, maximised over a fine lr
grid and every batch and width.

Contenders (side by side, in one run, in the order given):
  search           8 simulated GPUs x jobs_per_gpu=4, hyperband with hpsearch's defaults
  no race          the same search with hydra.sweeper.race=0: only the pruner stops trials
  1 gpu x4         the same search on 1 simulated GPU x 4
  8 gpus x1        the same search on 8 simulated GPUs x 1
  optuna brackets  the search with Optuna's own HyperbandPruner defaults (min_resource=1,
                   max_resource=auto: 4 brackets, none until a trial completes)
  hydra optuna     Hydra's Optuna sweeper (optuna<3, its own venv: tests/hydra_optuna_venv.py)
                   on the hpsearch launcher, 8 x 4 slots, batches of n_jobs=32, no pruning
  ray            Ray Tune's ASHA (its defaults: grace 1, reduction 4, max_t 27) over the same
                 space (random search, seeded), 32 trials at once, reuse_actors=False (a fresh
                 process per trial); needs ray[tune], in .venv-bench-tune (bench/search.py);
                 curve a only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf
from search import hydra_optuna_python, job_events, prune_latencies, tune_result

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "bench" / "apps" / "model_curve.py"
FAKE_NVML = REPO / "tests" / "fake_nvml"
EPOCHS = 27
SPACE = {
    "lr": "tag(log,interval(1e-4,1e-1))",
    "batch": "choice(16,32,64,128,256)",
    "width": "choice(64,128,256,512,1024)",
}

sys.path.insert(0, str(APP.parent))
from model_curve import clean  # noqa: E402

# The workload's shapes (--curve): model_curve.yaml's (a), and others, given to the app as
# overrides, to the search and to the best alone alike: b, its best lr 5x higher, slow
# learners, so early epochs rank trials further from their last, twice the noise, shorter
# epochs; c, its best lr 4x lower (the small lrs that learn slowly win), longer epochs.
CURVES = {
    "a": {"peak": 2e-3, "pace": 2.0, "noise": 0.005, "epoch_s": 0.8},
    "b": {"peak": 1e-2, "pace": 5.0, "noise": 0.01, "epoch_s": 0.6},
    "c": {"peak": 5e-4, "pace": 3.0, "noise": 0.007, "epoch_s": 1.0},
}


def space_best(peak: float = 2e-3, pace: float = 2.0) -> float:
    lrs = [10 ** (-4 + 3 * i / 3000) for i in range(3001)]
    choices = [(b, w) for b in (16, 32, 64, 128, 256) for w in (64, 128, 256, 512, 1024)]
    return max(clean(lr, b, w, EPOCHS - 1, peak, pace) for lr in lrs for b, w in choices)


def gpu_env(gpus: int) -> dict[str, str]:
    path = os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")])
    visible = ",".join(map(str, range(gpus)))
    return dict(os.environ, PYTHONPATH=path, HPS_FAKE_GPUS="8", CUDA_VISIBLE_DEVICES=visible)


HPSEARCH = ["hydra/sweeper=hpsearch", "hydra.sweeper.pruner=hyperband"]
# Optuna's own HyperbandPruner defaults, which hpsearch's replace.
OPTUNA_BRACKETS = [
    "+hydra.sweeper.pruner_args.min_resource=1",
    "+hydra.sweeper.pruner_args.max_resource=auto",
]
NO_RACE = ["hydra.sweeper.race=0"]  # only the pruner stops trials, as before issue 49's race


def run_search(
    work: Path,
    trials: int,
    gpus: int,
    per_gpu: int,
    extra: list[str],
    python: str = sys.executable,
    sweeper: list[str] = HPSEARCH,
) -> dict:
    out = work / "sweep"
    command = [
        python,
        str(APP),
        "--multirun",
        *sweeper,
        f"hydra.sweeper.n_trials={trials}",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.sampler.seed=0",
        f"hydra.launcher.jobs_per_gpu={per_gpu}",
        f"hydra.sweep.dir={out}",
        *(f"{key}={value}" for key, value in SPACE.items()),
        *extra,
    ]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=work, env=gpu_env(gpus))
    wall = time.monotonic() - began
    log = done.stdout + done.stderr
    (work / "search.log").write_text(log)
    if done.returncode:
        raise SystemExit(f"{command} failed:\n{log[-4000:]}")
    best = OmegaConf.load(out / "optimization_results.yaml")
    params = dict(best.best_params)
    ends = [what for _, _, what in job_events(log) if what in ("done", "ended")]
    latencies = prune_latencies(log)
    return {
        "wall_s": round(wall, 1),
        "best": round(float(best.best_value), 4),
        "best_clean": round(clean(*(params[k] for k in SPACE), EPOCHS - 1, *shape_of(extra)), 4),
        "params": params,
        "trials": len(ends),
        "pruned": len(latencies),
        "epochs_run": epochs_run(out),
        "prune_to_free_max_s": round(max(latencies, default=0.0), 2),
        "summary": [line for line in log.splitlines() if "search took" in line],
    }


def shape_of(overrides: list[str]) -> tuple[float, float]:
    """The curve's peak and pace among the app's overrides (model_curve.yaml's if absent)."""
    given = dict(o.split("=", 1) for o in overrides if o.split("=")[0] in ("peak", "pace"))
    return float(given.get("peak", 2e-3)), float(given.get("pace", 2.0))


def epochs_run(sweep: Path) -> int:
    """Every trial's reported epochs, added up (its reports.jsonl's lines)."""
    return sum(len(p.read_text().splitlines()) for p in sweep.rglob("reports.jsonl"))


def run_alone(work: Path, params: dict, shape: list[str]) -> dict:
    """The best configuration, trained alone for every epoch through the same app."""
    values = [f"{key}={params[key]!r}" for key in SPACE]
    command = [sys.executable, str(APP), *values, *shape, f"hydra.run.dir={work / 'alone'}"]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=work, env=gpu_env(1))
    wall = time.monotonic() - began
    if done.returncode:
        raise SystemExit(f"{command} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return {"wall_s": round(wall, 1)}


TUNE_SCRIPT = r"""
import json, sys, time
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from model_curve import accuracy, epoch_seconds
trials, epochs, slots = json.loads(sys.argv[1])

def trainable(config):  # the app's epochs and curve, its defaults: epoch_s 0.8, noise 0.005
    lr, batch, width = config["lr"], config["batch"], config["width"]
    seconds = epoch_seconds(lr, batch, width, 0.8, 0)
    for epoch in range(epochs):
        time.sleep(seconds)
        value = accuracy(lr, batch, width, epoch, 0, 0.005)
        tune.report({"objective": value, "epoch": epoch})

began = time.time()
ray.init(num_cpus=slots, include_dashboard=False, log_to_driver=False)
space = {
    "lr": tune.loguniform(1e-4, 1e-1),
    "batch": tune.choice([16, 32, 64, 128, 256]),
    "width": tune.choice([64, 128, 256, 512, 1024]),
}
analysis = tune.run(
    trainable, config=space, num_samples=trials,
    search_alg=tune.search.BasicVariantGenerator(random_state=0),
    scheduler=ASHAScheduler(metric="objective", mode="max", max_t=epochs),
    resources_per_trial={"cpu": 1}, max_concurrent_trials=slots, reuse_actors=False,
    storage_path=sys.argv[2], verbose=0,
)
done = [t for t in analysis.trials if t.last_result.get("epoch") == epochs - 1]
best = max(done, key=lambda t: t.last_result["objective"])
c = best.config
print(json.dumps({"wall": time.time() - began, "best": best.last_result["objective"],
                  "params": {k: c[k] for k in ("lr", "batch", "width")},
                  "epochs": sum(t.last_result.get("epoch", -1) + 1 for t in analysis.trials)}))
"""


def run_tune(work: Path, trials: int) -> dict:
    began = time.monotonic()
    r = tune_result(TUNE_SCRIPT, [trials, EPOCHS, 32], work)
    wall = time.monotonic() - began
    p = r["params"]
    return {
        "wall_s": round(wall, 1),
        "tune_wall_s": round(r["wall"], 1),
        "best": round(r["best"], 4),
        "best_clean": round(clean(p["lr"], p["batch"], p["width"], EPOCHS - 1), 4),
        "params": p,
        "epochs_run": r["epochs"],
    }


CONTENDERS = {
    "search": lambda work, n, extra: run_search(work, n, 8, 4, extra),
    "1 gpu x4": lambda work, n, extra: run_search(work, n, 1, 4, extra),
    "8 gpus x1": lambda work, n, extra: run_search(work, n, 8, 1, extra),
    "optuna brackets": lambda work, n, extra: run_search(work, n, 8, 4, extra + OPTUNA_BRACKETS),
    "no race": lambda work, n, extra: run_search(work, n, 8, 4, extra + NO_RACE),
    "hydra optuna": lambda work, n, extra: run_search(
        work,
        n,
        8,
        4,
        extra,
        hydra_optuna_python(),
        ["hydra/sweeper=optuna", "hydra.sweeper.n_jobs=32"],
    ),
    "ray": lambda work, n, extra: run_tune(work, n),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--contenders", nargs="*", default=["search"])
    # More overrides for hpsearch's contenders, to explore (the reported runs add none).
    parser.add_argument("--extra", nargs="*", default=[])
    parser.add_argument("--curve", choices=CURVES, default="a")
    args = parser.parse_args()
    shape = [f"{key}={value}" for key, value in CURVES[args.curve].items()]
    load = os.getloadavg()[0]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load {load:.1f}")
    top = space_best(*shape_of(shape))
    print(f"curve {args.curve}, space's best (noiseless, epoch {EPOCHS}): {top:.4f}", flush=True)
    work_root = Path(os.environ.get("BENCH_WORK") or REPO / "outputs" / "one_model")
    stamp = time.strftime("%H%M%S")
    for name in args.contenders:
        work = work_root / f"{stamp}-{name.replace(' ', '-')}"
        work.mkdir(parents=True)
        result = CONTENDERS[name](work, args.trials, shape + args.extra)
        alone = run_alone(work, result["params"], shape)
        result["alone_s"] = alone["wall_s"]
        result["ratio"] = round(result["wall_s"] / alone["wall_s"], 2)
        result["gap"] = round(top - result["best_clean"], 4)
        result["load"] = round(os.getloadavg()[0], 1)
        print(f"{name}: {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
