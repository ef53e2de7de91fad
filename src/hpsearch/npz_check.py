"""The .npz a `data=npz` run trains on, checked before any job starts: keys, shapes, labels.

Shapes and dtypes come from each member's .npy header, without reading the images; the labels
are read (they are small) to check they are class indices. A sweep checks the same file for
every job: the result is cached by the file's path, size and modification time.
"""

from __future__ import annotations

import functools
import os
import zipfile
from typing import IO

import numpy as np

from hpsearch.errors import ConfigError

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
NPZ_FIX = "save one with np.savez(path, x_train=..., y_train=..., x_test=..., y_test=...)"
NPY_MAGIC = b"\x93NUMPY"


def check_npz(path: str) -> tuple[int, ...]:
    """Raise ConfigError for the first thing wrong with the file; return one sample's shape."""
    stat = os.stat(path)
    return _check(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _check(path: str, size: int, mtime_ns: int) -> tuple[int, ...]:
    """`size` and `mtime_ns` are only the cache key: a rewritten file is checked again."""
    where = f"data.path={path!r}"
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as err:
        with open(path, "rb") as f:
            if f.read(len(NPY_MAGIC)) == NPY_MAGIC:
                raise ConfigError(
                    f"{where}: a single array, not an .npz archive; {NPZ_FIX}"
                ) from None
        raise ConfigError(f"{where}: not a readable .npz ({err}); {NPZ_FIX}") from None
    with archive:
        found = [n.removesuffix(".npy") for n in archive.namelist()]
        missing = [key for key in NPZ_KEYS if key not in found]
        if missing:
            raise ConfigError(
                f"{where}: missing keys {', '.join(missing)} (found "
                f"{', '.join(found) or 'none'}; the file needs {', '.join(NPZ_KEYS)})"
            )
        headers = {key: _header(archive, key, where) for key in NPZ_KEYS}
        for split in ("train", "test"):
            _check_split(where, split, headers[f"x_{split}"], headers[f"y_{split}"])
        train, test = headers["x_train"][0][1:], headers["x_test"][0][1:]
        if train != test:
            raise ConfigError(
                f"{where}: x_test's samples have shape {test} but x_train's {train}: "
                "train and test samples must have the same shape"
            )
        for key in ("y_train", "y_test"):
            with archive.open(f"{key}.npy") as member:
                _check_labels(where, key, np.lib.format.read_array(member, allow_pickle=False))
    return train


def _header(archive: zipfile.ZipFile, key: str, where: str) -> tuple[tuple[int, ...], np.dtype]:
    with archive.open(f"{key}.npy") as member:
        shape, dtype = _read_header(member)
    if dtype.kind not in "biuf":
        raise ConfigError(
            f"{where}: {key} has dtype {dtype}: must hold numbers "
            f"(save it with {key}.astype(np.float32), or integer class labels for y)"
        )
    return shape, dtype


def _read_header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    return tuple(shape), dtype


def _check_split(
    where: str, split: str, x: tuple[tuple[int, ...], np.dtype], y: tuple[tuple[int, ...], np.dtype]
) -> None:
    (x_shape, _), (y_shape, _) = x, y
    if len(x_shape) not in (2, 3, 4):
        raise ConfigError(
            f"{where}: x_{split} has shape {x_shape}: must be (n, features), (n, height, width) "
            "or (n, height, width, channels); reshape it before saving"
        )
    if len(y_shape) != 1:
        raise ConfigError(
            f"{where}: y_{split} has shape {y_shape}: must be 1-D, one class index per sample "
            f"(save y_{split}.reshape(-1), or y_{split}.argmax(axis=1) for one-hot labels)"
        )
    if x_shape[0] != y_shape[0]:
        raise ConfigError(
            f"{where}: x_{split} has {x_shape[0]} samples but y_{split} has {y_shape[0]} "
            "labels: save one label per sample"
        )


def _check_labels(where: str, key: str, y: np.ndarray) -> None:
    if y.dtype.kind == "f" and not np.all(np.isfinite(y) & (y == np.round(y))):
        bad = y[~(np.isfinite(y) & (y == np.round(y)))][0]
        raise ConfigError(
            f"{where}: {key} holds {bad}, not a class index: labels must be integers >= 0 "
            f"(save {key}.astype(np.int64) if they are whole numbers)"
        )
    if y.size and y.min() < 0:
        raise ConfigError(
            f"{where}: {key} holds {y.min()}: labels must be integers >= 0 "
            f"(renumber them, e.g. np.unique({key}, return_inverse=True)[1])"
        )
