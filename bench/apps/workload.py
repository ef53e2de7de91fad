"""The bench's workload: a Hydra app whose jobs are trivial, sleep, or import TensorFlow (inside
the task, lazily) and hold a "GPU"; each records when its task began and ended."""

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
