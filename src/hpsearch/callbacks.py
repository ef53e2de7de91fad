"""Keras callbacks of a training run. Imports Keras: load only inside a job."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import keras
from omegaconf import DictConfig

from hpsearch.errors import TrainingDiverged
from hpsearch_launcher import report

log = logging.getLogger("hpsearch.train")

LOGGED = ("loss", "accuracy", "val_loss", "val_accuracy")
# The objective's name in Keras' epoch logs (test_* is measured only after training).
OBJECTIVE_LOGS = {
    "train_loss": "loss",
    "train_accuracy": "accuracy",
    "val_loss": "val_loss",
    "val_accuracy": "val_accuracy",
}


class EpochLog(keras.callbacks.Callback):  # type: ignore[misc]
    """Records and logs each epoch's metrics and time; reports the objective to the sweep
    (its pruner may stop the run); stops a run whose loss is not finite."""

    def __init__(self, cfg: DictConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.history: list[dict[str, float]] = []
        self._start = 0.0

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        row = {"epoch": epoch + 1, "seconds": time.perf_counter() - self._start}
        row |= {k: float(v) for k, v in (logs or {}).items() if k != "learning_rate"}
        self.history.append(row)
        if self.cfg.log_every_epoch:
            shown = "  ".join(f"{k}={row[k]:.4f}" for k in LOGGED if k in row)
            log.info("epoch %d/%d  %s  (%.2fs)", epoch + 1, self.cfg.epochs, shown, row["seconds"])
        metric = OBJECTIVE_LOGS.get(self.cfg.objective.metric)
        if metric in row and report(row[metric], step=epoch):
            log.info("epoch %d/%d: pruned by the sweep, training stops", epoch + 1, self.cfg.epochs)
            self.model.stop_training = True
        if not math.isfinite(row.get("loss", 0.0)):
            raise TrainingDiverged(
                f"loss is {row['loss']} after epoch {epoch + 1} (lr={self.cfg.lr}, "
                f"batch={self.cfg.batch}): the run diverged; try a smaller lr"
            )
