"""Keras models and optimizers built from the config. Imported only inside a job."""

from __future__ import annotations

import math
from typing import Any

import keras
from omegaconf import DictConfig


def build_model(model_cfg: DictConfig, input_shape: tuple[int, ...], n_classes: int) -> Any:
    """`mlp` or `cnn`, ending in `n_classes` logits."""
    inputs = keras.Input(shape=input_shape)
    if model_cfg.name == "mlp":
        x = keras.layers.Flatten()(inputs)
        for units in model_cfg.hidden:
            x = keras.layers.Dense(int(units), activation=model_cfg.activation)(x)
            if model_cfg.dropout:
                x = keras.layers.Dropout(float(model_cfg.dropout))(x)
    else:
        x = _conv_blocks(model_cfg, inputs, input_shape)
    outputs = keras.layers.Dense(n_classes)(x)
    return keras.Model(inputs, outputs, name=str(model_cfg.name))


def _conv_blocks(model_cfg: DictConfig, inputs: Any, input_shape: tuple[int, ...]) -> Any:
    # Grey images come as (h, w): give them their channel axis.
    x = keras.layers.Reshape((*input_shape, 1))(inputs) if len(input_shape) == 2 else inputs
    size = min(int(s) for s in input_shape[:2])
    for filters in model_cfg.filters:
        x = keras.layers.Conv2D(
            int(filters), int(model_cfg.kernel), padding="same", activation=model_cfg.activation
        )(x)
        if size >= 8:  # pool while it leaves at least a 4x4 map
            x = keras.layers.MaxPooling2D(2)(x)
            size //= 2
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(int(model_cfg.dense), activation=model_cfg.activation)(x)
    if model_cfg.dropout:
        x = keras.layers.Dropout(float(model_cfg.dropout))(x)
    return x


def build_optimizer(opt_cfg: DictConfig, lr: float, steps_per_epoch: int) -> Any:
    """Adam or SGD with momentum, the learning rate decaying by `decay_rate` per period."""
    decay_steps = max(1, round(float(opt_cfg.decay_epochs) * steps_per_epoch))
    schedule = keras.optimizers.schedules.ExponentialDecay(
        initial_learning_rate=float(lr),
        decay_steps=decay_steps,
        decay_rate=float(opt_cfg.decay_rate),
    )
    if opt_cfg.name == "sgd":
        return keras.optimizers.SGD(
            learning_rate=schedule,
            momentum=float(opt_cfg.momentum),
            nesterov=bool(opt_cfg.nesterov),
        )
    return keras.optimizers.Adam(learning_rate=schedule)


def compile_model(model: Any, cfg: DictConfig, n_train: int) -> Any:
    """Compile `model` for `cfg`: its optimizer and schedule, sparse cross-entropy, accuracy."""
    steps_per_epoch = math.ceil(n_train / int(cfg.batch))
    model.compile(
        optimizer=build_optimizer(cfg.optimizer, float(cfg.lr), steps_per_epoch),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model
