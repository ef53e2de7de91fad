"""Datasets as NumPy arrays, split deterministically into train, validation and test.

No TensorFlow here: the arrays are fed to Keras by the trainer, and tests build `Datasets`
directly from tiny synthetic arrays.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig
from sklearn.model_selection import train_test_split

from hpsearch.npz_check import NPZ_KEYS, check_npz


@dataclass(frozen=True)
class Datasets:
    """Images scaled to [0, 1] as float32 (n, *shape), integer labels (n,)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_val.max(), self.y_test.max())) + 1


def load_datasets(cfg: DictConfig) -> Datasets:
    """Load `cfg.data` and split it with `cfg.split` (seeded by `split.seed`, never `seed`)."""
    name = cfg.data.name
    if name == "npz":
        x_train, y_train, x_test, y_test = _load_npz(os.path.expanduser(str(cfg.data.path)))
        x_train, x_val, y_train, y_val = _split(x_train, y_train, cfg.split.val, cfg.split.seed)
        return Datasets(x_train, y_train, x_val, y_val, x_test, y_test)
    x, y = _load_digits() if name == "digits" else _make_synthetic(cfg.data, cfg.split.seed)
    x_rest, x_test, y_rest, y_test = _split(x, y, cfg.split.test, cfg.split.seed)
    # The validation fraction is of the whole set, so rescale it to the part that remains.
    val_of_rest = cfg.split.val / (1.0 - cfg.split.test)
    x_train, x_val, y_train, y_val = _split(x_rest, y_rest, val_of_rest, cfg.split.seed)
    return Datasets(x_train, y_train, x_val, y_val, x_test, y_test)


def _split(
    x: np.ndarray, y: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    parts = train_test_split(x, y, test_size=fraction, random_state=seed, stratify=y)
    return parts[0], parts[1], parts[2], parts[3]


def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)  # pixel values are 0..16
    return x, digits.target.astype(np.int64)


def _make_synthetic(data: DictConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each class is a random template plus Gaussian noise: learnable, but not trivially."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in data.shape)
    templates = rng.random((int(data.classes), *shape), dtype=np.float32)
    y = rng.integers(0, int(data.classes), size=int(data.n))
    noise = rng.standard_normal((int(data.n), *shape), dtype=np.float32) * float(data.noise)
    x = np.clip(templates[y] + noise * 0.25, 0.0, 1.0).astype(np.float32)
    return x, y.astype(np.int64)


def _load_npz(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    check_npz(path)  # the same checks as before the sweep: a file changed since fails here
    with np.load(path, allow_pickle=False) as npz:
        x_train, y_train, x_test, y_test = (npz[key] for key in NPZ_KEYS)
    return _scale(x_train), y_train.astype(np.int64), _scale(x_test), y_test.astype(np.int64)


def _scale(x: np.ndarray) -> np.ndarray:
    """uint8 images (0..255) to [0, 1]; float images are taken as they are."""
    if np.issubdtype(x.dtype, np.integer):
        return (x / 255.0).astype(np.float32)
    return x.astype(np.float32)
