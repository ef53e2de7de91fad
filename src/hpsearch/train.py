"""One training run: config -> data -> model -> fit -> metrics.json. The job side of hpsearch.

TensorFlow is imported inside `run`, after the environment that quiets and places it is set:
importing this module costs nothing, so the launcher's parent can reference the task function.
"""

from __future__ import annotations

import logging
import platform
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hpsearch.data import Datasets, load_datasets
from hpsearch.errors import TrainingDiverged
from hpsearch.tf_import import import_tensorflow
from hpsearch.validate import validate_config
from hpsearch_launcher import METRICS_FILE, write_json_atomic

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")


def run(
    cfg: DictConfig, datasets: Datasets | None = None, output_dir: Path | None = None
) -> dict[str, Any]:
    """Train `cfg` and return its metrics; write them to `output_dir/metrics.json` if given.

    `datasets` replaces the configured data (tests pass tiny synthetic arrays).
    """
    validate_config(cfg)
    tf = import_tensorflow(int(cfg.tf_log_level))
    from hpsearch.callbacks import EpochLog
    from hpsearch.devices import report_peak_memory
    from hpsearch.tensorboard_log import open_tensorboard_log

    device, data = _set_up(tf, cfg, datasets)
    model = _model(cfg, data, device)
    epochs = EpochLog(cfg)
    board = open_tensorboard_log(cfg, output_dir)  # None: off, or no run dir
    record = {
        "params": OmegaConf.to_container(cfg, resolve=True),
        "seed": int(cfg.seed),
        "device": device,
        "tensorflow_version": tf.__version__,
        "python_version": platform.python_version(),
        "history": epochs.history,
    }
    started = time.perf_counter()  # train_time_s: fit and final evaluation, nothing before
    try:
        # The board first: it also logs the epoch whose loss makes EpochLog stop the run.
        _fit(model, data, cfg, [epochs] if board is None else [board, epochs])
    except TrainingDiverged as err:
        if board is not None:
            board.finish()
        record |= {"status": "diverged", "error": str(err)}
        _write(record, started, output_dir)
        raise
    final = _final_metrics(model, data, epochs.history[-1], int(cfg.eval_batch))
    device["peak_mb"] = report_peak_memory(tf, device)
    if board is not None:
        board.finish(final)
    record |= {"status": "completed", "final": final, "objective": _objective(cfg, final)}
    log.info("final: %s", "  ".join(f"{k}={v:.4f}" for k, v in sorted(final.items())))
    _write(record, started, output_dir)
    if output_dir is not None and cfg.save_model:
        model.save(output_dir / "model.keras")
    return record


def _set_up(tf: Any, cfg: DictConfig, datasets: Datasets | None) -> tuple[dict[str, Any], Datasets]:
    """The device placed and capped, the data loaded (or `datasets`), the seeds set."""
    import keras

    from hpsearch.devices import configure_devices

    device = configure_devices(tf, cfg.device.type)
    data = datasets if datasets is not None else load_datasets(cfg)
    keras.utils.set_random_seed(int(cfg.seed))
    if cfg.deterministic:
        tf.config.experimental.enable_op_determinism()
    return device, data


def _model(cfg: DictConfig, data: Datasets, device: dict[str, Any]) -> Any:
    """The compiled model, and a line that says what is trained on what."""
    from hpsearch.model import build_model, compile_model

    model = compile_model(
        build_model(cfg.model, data.input_shape, data.n_classes), cfg, len(data.x_train)
    )
    log.info(
        "training %s on %s: %d train / %d val / %d test samples, %d parameters, %s",
        cfg.model.name,
        cfg.data.name,
        len(data.x_train),
        len(data.x_val),
        len(data.x_test),
        model.count_params(),
        device["type"],
    )
    return model


def _fit(model: Any, data: Datasets, cfg: DictConfig, callbacks: list[Any]) -> None:
    model.fit(
        data.x_train,
        data.y_train,
        batch_size=int(cfg.batch),
        epochs=int(cfg.epochs),
        validation_data=(data.x_val, data.y_val),
        validation_batch_size=int(cfg.eval_batch),
        callbacks=callbacks,
        verbose=0,
    )


def _objective(cfg: DictConfig, final: dict[str, float]) -> dict[str, Any]:
    metric = cfg.objective.metric
    return {"metric": metric, "mode": cfg.objective.mode, "value": final[metric]}


def _write(record: dict[str, Any], started: float, output_dir: Path | None) -> None:
    """The run's record, its train time taken now, to `output_dir/metrics.json` if given."""
    record["train_time_s"] = time.perf_counter() - started
    if output_dir is not None:
        write_json_atomic(output_dir / METRICS_FILE, record)


def _final_metrics(
    model: Any, data: Datasets, last_epoch: dict[str, float], eval_batch: int
) -> dict[str, float]:
    """The trained model's metrics on each split, evaluated in batches (dropout off).

    Validation comes from the last epoch (Keras evaluates it with the final weights); the
    epoch's own loss and accuracy are a running average over its batches, with dropout on and
    the weights still moving, so the training split is evaluated again like the test split.
    """
    train, test = (
        model.evaluate(x, y, batch_size=eval_batch, verbose=0, return_dict=True)
        for x, y in ((data.x_train, data.y_train), (data.x_test, data.y_test))
    )
    return {
        "train_loss": float(train["loss"]),
        "train_accuracy": float(train["accuracy"]),
        "val_loss": last_epoch["val_loss"],
        "val_accuracy": last_epoch["val_accuracy"],
        "test_loss": float(test["loss"]),
        "test_accuracy": float(test["accuracy"]),
    }
