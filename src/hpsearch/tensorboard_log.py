"""TensorBoard logs of one training run, in its run dir's tb/: each epoch's metrics, the final
metrics and the run's hyperparameters (HParams plugin), so that `tensorboard --logdir SWEEP_DIR`
compares a whole sweep in the Scalars and HParams dashboards. Imports TensorFlow and
TensorBoard: load only inside a job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
from omegaconf import DictConfig, OmegaConf
from tensorboard.plugins.hparams import api as hp

HParamValue = bool | int | float | str

TB_DIR = "tb"
# What a sweep varies: the HParams dashboard's columns. The rest (device, split, ...) is set-up.
HPARAM_KEYS = ("lr", "batch", "epochs", "seed")
HPARAM_SECTIONS = ("model", "optimizer", "data")


def open_tensorboard_log(cfg: DictConfig, output_dir: Path | None) -> TensorBoardLog | None:
    """The run's TensorBoard callback, its hparams already written; None when off or no dir."""
    if output_dir is None or not cfg.tensorboard:
        return None
    # The run dir's full path: unique, so each run is its own trial even across sweeps.
    return TensorBoardLog(output_dir / TB_DIR, run_hparams(cfg), str(output_dir.resolve()))


class TensorBoardLog(keras.callbacks.Callback):  # type: ignore[misc]
    """Writes each epoch's metrics (`epoch/<name>`, step = epoch from 1); `finish` closes it."""

    def __init__(self, log_dir: Path, hparams: dict[str, HParamValue], trial_id: str) -> None:
        super().__init__()
        self._writer = tf.summary.create_file_writer(str(log_dir))
        self._epochs = 0
        with self._writer.as_default():
            hp.hparams(hparams, trial_id=trial_id)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._epochs = epoch + 1
        self._scalars("epoch", {k: float(v) for k, v in (logs or {}).items()})
        # A sweep's curves are live in TensorBoard, and a killed job loses no finished epoch.
        self._writer.flush()

    def finish(self, final: dict[str, float] | None = None) -> None:
        """Write the final metrics (`final/<name>`, step = last epoch), if any; close the file."""
        if final is not None:
            self._scalars("final", final)
        self._writer.close()

    def _scalars(self, prefix: str, values: dict[str, float]) -> None:
        with self._writer.as_default():
            for name, value in values.items():
                tf.summary.scalar(f"{prefix}/{name}", value, step=self._epochs)


def run_hparams(cfg: DictConfig) -> dict[str, HParamValue]:
    """The swept part of `cfg`, flat (`model.hidden`), lists as typed on the command line."""
    params = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(params, dict)
    flat = {key: params[key] for key in HPARAM_KEYS}
    for section in HPARAM_SECTIONS:
        flat |= {f"{section}.{key}": value for key, value in params[section].items()}
    return {key: _hparam_value(value) for key, value in flat.items() if value is not None}


def _hparam_value(value: Any) -> HParamValue:
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, separators=(",", ":"))
