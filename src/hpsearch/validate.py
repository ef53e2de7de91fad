"""Checks of the composed train config, run before any data is loaded or model is built.

No TensorFlow, and no file reads beyond `os.path` checks and a data=npz file's headers and
labels (cached), so the launcher can run the same checks in the parent for every job of a sweep
before the first process starts.
"""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hpsearch.errors import ConfigError
from hpsearch.npz_check import check_npz

MODELS = ("mlp", "cnn")
DATASETS = ("digits", "synthetic", "npz")
OPTIMIZERS = ("adam", "sgd")
DEVICES = ("auto", "gpu", "cpu")
METRICS = tuple(
    f"{split}_{name}" for split in ("train", "val", "test") for name in ("loss", "accuracy")
)
MODES = ("max", "min")


def _number(key: str, value: Any, *, example: str, integer: bool = False) -> float:
    kind = "an integer" if integer else "a number"
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        raise ConfigError(f"{key}={value!r}: must be {kind} (e.g. {example})")
    return float(value)


def _positive(key: str, value: Any, *, example: str, integer: bool = False) -> None:
    if _number(key, value, example=example, integer=integer) <= 0:
        raise ConfigError(f"{key}={value!r}: must be > 0 (e.g. {example})")


def _fraction(key: str, value: Any, *, example: str) -> None:
    if not 0 <= _number(key, value, example=example) < 1:
        raise ConfigError(f"{key}={value!r}: must be in [0, 1) (e.g. {example})")


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(
            f"{key}={value!r}: must be one of {', '.join(allowed)} (e.g. {key}={allowed[0]})"
        )


def validate_config(cfg: DictConfig) -> None:
    """Raise ConfigError for the first bad value in `cfg`."""
    _positive("lr", cfg.lr, example="lr=1e-3")
    _positive("batch", cfg.batch, example="batch=32", integer=True)
    _positive("epochs", cfg.epochs, example="epochs=10", integer=True)
    _number("seed", cfg.seed, example="seed=0", integer=True)
    _positive("eval_batch", cfg.eval_batch, example="eval_batch=1024", integer=True)
    _fraction("split.val", cfg.split.val, example="split.val=0.15")
    _fraction("split.test", cfg.split.test, example="split.test=0.2")
    if cfg.split.val + cfg.split.test >= 1:
        raise ConfigError(
            f"split.val + split.test = {cfg.split.val + cfg.split.test}: must be < 1 "
            "(e.g. split.val=0.15 split.test=0.2)"
        )
    _choice("objective.metric", cfg.objective.metric, METRICS)
    _choice("objective.mode", cfg.objective.mode, MODES)
    _choice("device.type", cfg.device.type, DEVICES)
    for key in ("deterministic", "save_model", "tensorboard", "log_every_epoch"):
        if not isinstance(cfg[key], bool):
            raise ConfigError(f"{key}={cfg[key]!r}: must be true or false (e.g. {key}=false)")
    _validate_model(cfg.model)
    _validate_optimizer(cfg.optimizer)
    _validate_data(cfg.data, cfg.model.name)


def _validate_model(model: DictConfig) -> None:
    _choice("model.name", model.name, MODELS)
    _fraction("model.dropout", model.dropout, example="model.dropout=0.1")
    layers = model.hidden if model.name == "mlp" else model.filters
    key = "model.hidden" if model.name == "mlp" else "model.filters"
    if len(layers) == 0:
        raise ConfigError(f"{key}=[]: needs at least one layer (e.g. {key}=[128,64])")
    for units in layers:
        _positive(key, units, example=f"{key}=[128,64]", integer=True)


def _validate_optimizer(opt: DictConfig) -> None:
    _choice("optimizer.name", opt.name, OPTIMIZERS)
    rate = _number("optimizer.decay_rate", opt.decay_rate, example="optimizer.decay_rate=0.95")
    if not 0 < rate <= 1:
        raise ConfigError(
            f"optimizer.decay_rate={opt.decay_rate!r}: must be in (0, 1] "
            "(1 = no decay; e.g. optimizer.decay_rate=0.95)"
        )
    _positive("optimizer.decay_epochs", opt.decay_epochs, example="optimizer.decay_epochs=1")
    if opt.name == "sgd":
        _fraction("optimizer.momentum", opt.momentum, example="optimizer.momentum=0.9")


def _validate_data(data: DictConfig, model_name: str) -> None:
    _choice("data.name", data.name, DATASETS)
    if data.name == "synthetic":
        _positive("data.n", data.n, example="data.n=60000", integer=True)
        _positive("data.classes", data.classes, example="data.classes=10", integer=True)
        if data.n < 2 * data.classes:
            raise ConfigError(
                f"data.n={data.n}: needs at least 2 samples per class "
                f"(data.classes={data.classes}; e.g. data.n=5000)"
            )
        if len(data.shape) not in (1, 2) or any(
            not isinstance(s, int) or s < 1 for s in data.shape
        ):
            raise ConfigError(
                f"data.shape={list(data.shape)}: must be 1 or 2 positive integers "
                "(e.g. data.shape=[28,28])"
            )
    if data.name == "npz":
        if OmegaConf.is_missing(data, "path"):
            raise ConfigError(
                "data.path is not set: data=npz needs the file (e.g. data.path=/data/mnist.npz)"
            )
        path = os.path.expanduser(str(data.path))
        if not os.path.isfile(path):
            raise ConfigError(
                f"data.path={data.path!r}: no such file (give an .npz with x_train, y_train, "
                "x_test, y_test, e.g. data.path=/data/mnist.npz)"
            )
        sample = check_npz(path)
        if model_name == "cnn" and len(sample) == 1:
            raise ConfigError(
                f"data.path={data.path!r} holds samples of shape {sample}: model=cnn needs "
                "images, (n, height, width[, channels]); use model=mlp or reshape x"
            )
