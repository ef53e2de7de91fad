"""The bench's workload with TensorFlow imported at the top of the script, as many apps do:
the sweep process imports it too, and so does every job's process when it unpickles the task
(its module's globals). Run with mode=tf."""

from __future__ import annotations

import time

import hydra
import tensorflow as tf
from omegaconf import DictConfig
from workload import build_model, hold_and_record


def workload_tf_top(cfg: DictConfig) -> float:
    started = time.time()
    build_model(tf)
    return hold_and_record(cfg, started)


main = hydra.main(version_base="1.3", config_path="conf", config_name="workload")(workload_tf_top)

if __name__ == "__main__":
    main()
