"""The bench's workload: a Hydra app whose jobs are trivial, sleep, or import TensorFlow (inside
the task, lazily) and hold a "GPU"; each records when its task began and ended. `seeded` jobs
(bench/fork_soak.py) draw from unseeded streams, then from TensorFlow and NumPy seeded with x."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig


def workload(cfg: DictConfig) -> float:
    started = time.time()
    if cfg.mode == "seeded":
        return seeded_draws(cfg, started)
    if cfg.mode == "tf":
        import tensorflow as tf

        build_model(tf)
    return hold_and_record(cfg, started)


def build_model(tf: Any) -> None:
    """A small Keras model, compiled: what a job does with TensorFlow before it trains."""
    model = tf.keras.Sequential(
        [tf.keras.Input((64,)), tf.keras.layers.Dense(32), tf.keras.layers.Dense(10)]
    )
    model.compile("adam", "mse")


def seeded_draws(cfg: DictConfig, started: float) -> float:
    """What a fresh process draws unseeded (each job's own) and what the seed x makes TensorFlow
    and NumPy draw (the same in any process), recorded; the seeded value returned."""
    import random

    import numpy as np
    import tensorflow as tf

    fresh = [random.random(), float(np.random.rand())]
    tf.random.set_seed(cfg.x)
    np.random.seed(cfg.x)
    value = float(tf.reduce_sum(tf.random.normal([16])).numpy()) + float(np.random.rand())
    record = {"x": cfg.x, "pid": os.getpid(), "fresh": fresh, "value": value, "start": started}
    with open(Path(cfg.marks) / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    return value


def hold_and_record(cfg: DictConfig, started: float) -> float:
    """Hold the "GPU" (`hold` s), then append the job's start and end to marks/records.jsonl."""
    if cfg.mode in ("tf", "sleep"):
        time.sleep(cfg.hold)
    record = {"x": cfg.x, "pid": os.getpid(), "start": started, "end": time.time()}
    with open(Path(cfg.marks) / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    return float(cfg.x)


main = hydra.main(version_base="1.3", config_path="conf", config_name="workload")(workload)

if __name__ == "__main__":
    main()
