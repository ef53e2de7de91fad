"""The bench's workload: a Hydra app whose jobs are trivial, sleep, or import TensorFlow and
hold a "GPU"; each records when its task began and ended."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig


def workload(cfg: DictConfig) -> float:
    started = time.time()
    if cfg.mode == "tf":
        import tensorflow as tf

        model = tf.keras.Sequential(
            [tf.keras.Input((64,)), tf.keras.layers.Dense(32), tf.keras.layers.Dense(10)]
        )
        model.compile("adam", "mse")
    if cfg.mode in ("tf", "sleep"):
        time.sleep(cfg.hold)
    record = {"x": cfg.x, "pid": os.getpid(), "start": started, "end": time.time()}
    with open(Path(cfg.marks) / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    return float(cfg.x)


main = hydra.main(version_base="1.3", config_path="conf", config_name="workload")(workload)

if __name__ == "__main__":
    main()
