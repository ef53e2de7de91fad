"""The sweep's CPU per report and per decision: OptunaSource driven in-process, 32 trials at once.

    python bench/decisions.py                      # memory, journal and sqlite storages
    python bench/decisions.py --storages memory

What a search's sweep process does for each report a job makes (issue 49): `OptunaSource.report`
(Optuna's `trial.report`, then `trial.should_prune`), and per trial `ask` (TPE, seeded) and
`ended` (the tell). 256 trials of up to 27 reports, 32 running at once, each reporting in turn
(a curve that rises to a limit set by the trial's x); the pruner is the search's default for
`pruner=hyperband` (search/algorithms.py). Process CPU time, not wall time: the machine's load
slows both alike. At 32 jobs reporting about once a second, the sweep needs 32 x (report +
decision) of CPU per second; more than a core's worth is the bottleneck.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import optuna
from hydra.core.utils import JobReturn, JobStatus

from hpsearch_launcher.outcome import Status
from hpsearch_launcher.search.settings import parse_settings
from hpsearch_launcher.search.space import parse_space
from hpsearch_launcher.search.sweeper import open_search
from hpsearch_launcher.stream import JobEnd

STORAGES = {"memory": None, "journal": "journal.log", "sqlite": "sqlite:///{dir}/study.db"}


def drive(storage: str | None, work: Path, trials: int, slots: int, steps: int) -> dict:
    tpe = {"_target_": "optuna.samplers.TPESampler", "seed": 0}
    url = None if storage is None else storage.format(dir=work)
    if url is not None and not url.startswith("sqlite"):
        url = str(work / url)
    settings = parse_settings(
        {"sampler": tpe, "pruner": "hyperband", "n_trials": trials, "storage": url}, "max"
    )
    source = open_search(settings, parse_space(None, ["x=interval(0,1)"]), work, replay=False)
    rng = random.Random(0)
    running: dict[object, tuple[float, int]] = {}
    cpu = {"ask": 0.0, "report": 0.0, "ended": 0.0}
    count = {"ask": 0, "report": 0, "ended": 0}

    def timed(what: str, call: object, *args: object) -> object:
        began = time.process_time()
        result = call(*args)  # type: ignore[operator]
        cpu[what] += time.process_time() - began
        count[what] += 1
        return result

    while running or not source.exhausted():
        while len(running) < slots and (ask := timed("ask", source.ask)) is not None:
            running[ask.key] = (float(ask.overrides[0].split("=")[1]), 0)  # type: ignore[attr-defined]
        for key, (x, step) in list(running.items()):
            value = x * (1 - 0.6 ** (step + 1)) + rng.gauss(0, 0.01)
            pruned = timed("report", source.report, key, step, value)
            if pruned or step == steps - 1:
                status = Status.PRUNED if pruned else Status.COMPLETED
                ret = JobReturn(status=JobStatus.COMPLETED, _return_value=value)
                timed("ended", source.ended, key, JobEnd(ret, status, step, value, 0))
                del running[key]
            else:
                running[key] = (x, step + 1)
    return {k: 1000 * cpu[k] / max(1, count[k]) for k in cpu} | {"reports": count["report"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--storages", nargs="*", default=list(STORAGES))
    parser.add_argument("--trials", type=int, default=256)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the sweep sets it
    print("| storage | reports | ms CPU per report + decision | per ask | per tell |")
    print("|---|---|---|---|---|")
    for name in args.storages:
        with tempfile.TemporaryDirectory(prefix="hps-decide-") as tmp:
            r = drive(STORAGES[name], Path(tmp), args.trials, 32, 27)
        print(
            f"| {name} | {r['reports']} | {r['report']:.2f} | {r['ask']:.1f} | {r['ended']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
