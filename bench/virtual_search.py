"""The one-model search (bench/one_model.py) in virtual time, to compare pruner settings fast.

    python bench/virtual_search.py                                # hpsearch's hyperband defaults
    python bench/virtual_search.py --pruner-args reduction_factor=4 bootstrap_count=16
    python bench/virtual_search.py --race 0                       # only the pruner stops
    python bench/virtual_search.py --curve b --seeds 0 1 2 3 4
    python bench/virtual_search.py --curve c --seeds $(seq 0 29)   # a third curve, 30 seeds

The sweep's own OptunaSource (open_search: its TPE sampler, seeded, and the pruner its settings
make) drives 256 trials of model_curve's curves and epoch times on 32 slots, with a clock that
jumps from one report to the next instead of sleeping: a search of a minute and a half takes a
few seconds of CPU. Each trial's process costs `--start-s` before its first epoch (fork and
Hydra's job set-up: 0.14 s median, 0.55 s p90, BENCHMARKS.md); the verdict on a report comes at
once. The ratio is the search's end over its best trial's 27 epochs (plus --start-s), as
one_model.py measures it with real processes; the gap is the space's best (noiseless) minus the
found configuration's. What it leaves out (the sweep's own CPU, the machine's load) one_model.py
measures.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import tempfile
from pathlib import Path

import optuna
import yaml
from hydra.core.utils import JobReturn, JobStatus
from one_model import CURVES, EPOCHS, SPACE, space_best

from hpsearch_launcher.outcome import Status
from hpsearch_launcher.search.settings import parse_settings
from hpsearch_launcher.search.space import parse_space
from hpsearch_launcher.search.sweeper import open_search
from hpsearch_launcher.stream import JobEnd

from model_curve import accuracy, clean, epoch_seconds  # isort: skip (one_model's sys.path)


def search(given: dict, seed: int, curve: dict, slots: int, start_s: float) -> dict:
    tpe = {"_target_": "optuna.samplers.TPESampler", "seed": seed}
    given = given | {"sampler": tpe, "n_trials": 256}
    settings = parse_settings(given, "max")
    space = parse_space(None, [f"{k}={v}" for k, v in SPACE.items()])
    with tempfile.TemporaryDirectory(prefix="hps-virtual-") as tmp:
        source = open_search(settings, space, Path(tmp), replay=False)
        return drive(source, curve, slots, start_s)


def drive(source: object, curve: dict, slots: int, start_s: float) -> dict:
    """Every slot asks when free; each trial reports each epoch until pruned or done."""
    clock, epochs, events, params = 0.0, 0, [], {}
    free = slots
    while True:
        while free and (ask := source.ask()) is not None:  # type: ignore[attr-defined]
            p = dict(o.split("=", 1) for o in ask.overrides)
            lr, batch, width = float(p["lr"]), int(p["batch"]), int(p["width"])
            seconds = epoch_seconds(lr, batch, width, curve["epoch_s"], 0)
            params[ask.key] = (lr, batch, width, seconds)
            heapq.heappush(events, (clock + start_s + seconds, ask.key, 0))
            free -= 1
        if not events:
            break
        clock, key, step = heapq.heappop(events)
        lr, batch, width, seconds = params[key]
        value = accuracy(lr, batch, width, step, 0, curve["noise"], curve["peak"], curve["pace"])
        epochs += 1
        pruned = source.report(key, step, value)  # type: ignore[attr-defined]
        if pruned or step == EPOCHS - 1:
            status = Status.PRUNED if pruned else Status.COMPLETED
            ret = JobReturn(status=JobStatus.COMPLETED, _return_value=value)
            source.ended(key, JobEnd(ret, status, step, value, 0))  # type: ignore[attr-defined]
            free += 1
        else:
            heapq.heappush(events, (clock + seconds, key, step + 1))
    best = source.study.best_trial.params  # type: ignore[attr-defined]
    lr, batch, width = best["lr"], best["batch"], best["width"]
    alone = start_s + EPOCHS * epoch_seconds(lr, batch, width, curve["epoch_s"], 0)
    found = clean(lr, batch, width, EPOCHS - 1, curve["peak"], curve["pace"])
    return {"wall": clock, "ratio": clock / alone, "found": found, "epochs": epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pruner", default="hyperband")
    parser.add_argument("--pruner-args", nargs="*", default=[], help="key=value ...")
    parser.add_argument("--race", type=int, default=3, help="0: only the pruner stops trials")
    parser.add_argument("--curve", choices=CURVES, default="a")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--start-s", type=float, default=0.3)
    a = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in a.pruner_args)}
    curve = CURVES[a.curve]
    top = space_best(curve["peak"], curve["pace"])
    given = {"pruner": a.pruner, "pruner_args": args, "race": a.race}
    runs = [search(given, s, curve, a.slots, a.start_s) for s in a.seeds]
    for seed, r in zip(a.seeds, runs, strict=True):
        print(
            f"seed {seed}: {r['wall']:.1f} s, ratio {r['ratio']:.2f}x, "
            f"gap {top - r['found']:.4f}, epochs {r['epochs']}"
        )
    ratios = [r["ratio"] for r in runs]
    gaps = [top - r["found"] for r in runs]
    print(
        f"{given} curve {a.curve}: median {statistics.median(ratios):.2f}x, mean "
        f"{statistics.mean(ratios):.2f}x, {sum(x <= 1.5 for x in ratios)} of {len(runs)} at "
        f"or under 1.5x; gap mean {statistics.mean(gaps):.4f}, worst {max(gaps):.4f}, "
        f"{sum(g > 0.02 for g in gaps)} over 0.02"
    )


if __name__ == "__main__":
    main()
