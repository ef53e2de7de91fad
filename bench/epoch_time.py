"""Seconds per epoch: hpsearch's trainer (as in a sweep's job: epoch log, TensorBoard scalars,
op determinism) beside a plain Keras `model.fit` of the same model and data, on CPU. Each
measurement runs in its own fresh process, alternating ours/plain, so both see the same machine
load; the figure is the median epoch after the first (graph tracing).

    .venv/bin/python bench/epoch_time.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = {
    "digits (default config)": ["device=cpu", "epochs=20"],
    "synthetic 60000x784": [
        "device=cpu",
        "data=synthetic",
        "data.n=60000",
        "data.shape=[784]",
        "epochs=4",
    ],
}


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from hpsearch.app import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


def worker(kind: str, overrides: list[str]) -> list[float]:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cfg = compose(overrides)
    if kind == "ours":
        import tempfile
        from pathlib import Path

        from hpsearch.train import run

        # As in a sweep's job: metrics.json and TensorBoard logs written into a run dir.
        with tempfile.TemporaryDirectory() as run_dir:
            return [row["seconds"] for row in run(cfg, output_dir=Path(run_dir))["history"]]
    import keras

    from hpsearch.data import load_datasets
    from hpsearch.model import build_model, compile_model

    data = load_datasets(cfg)
    keras.utils.set_random_seed(int(cfg.seed))
    model = compile_model(
        build_model(cfg.model, data.input_shape, data.n_classes), cfg, len(data.x_train)
    )
    times: list[float] = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: object = None) -> None:
            times.append(time.perf_counter() - self.start)

    model.fit(
        data.x_train,
        data.y_train,
        batch_size=int(cfg.batch),
        epochs=int(cfg.epochs),
        validation_data=(data.x_val, data.y_val),
        callbacks=[Clock()],
        verbose=0,
    )
    return times


def measure(kind: str, overrides: list[str]) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--", *overrides],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    epochs = json.loads(out.strip().splitlines()[-1])
    return statistics.median(epochs[1:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--worker", choices=["ours", "plain"])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.overrides)))
        return
    print(f"{'workload':<26}{'hpsearch s/epoch':>18}{'plain fit s/epoch':>19}{'ratio':>8}")
    for name, overrides in WORKLOADS.items():
        ours, plain = [], []
        for _ in range(args.repeats):
            ours.append(measure("ours", overrides))
            plain.append(measure("plain", overrides))
        a, b = statistics.median(ours), statistics.median(plain)
        print(f"{name:<26}{a:>18.4f}{b:>19.4f}{a / b:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
