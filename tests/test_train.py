"""The trainer on tiny data, on CPU: metrics, metrics.json, determinism, divergence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hpsearch.data import Datasets, load_datasets
from hpsearch.errors import TrainingDiverged
from hpsearch.train import run

METRICS = {"train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy"}


def tiny(shape: tuple[int, ...] = (8, 8), n: int = 120, classes: int = 3) -> Datasets:
    rng = np.random.default_rng(0)
    templates = rng.random((classes, *shape), dtype=np.float32)

    def part(count: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, classes, count)
        x = templates[y] + 0.1 * rng.standard_normal((count, *shape), dtype=np.float32)
        return x.astype(np.float32), y

    return Datasets(*part(n), *part(n // 4), *part(n // 4))


@pytest.mark.parametrize(
    ("overrides", "shape"),
    [
        ([], (8, 8)),
        (["model=cnn"], (8, 8)),
        (["model=cnn"], (28, 28)),
        (["optimizer=sgd", "objective.metric=val_loss", "objective.mode=min"], (16,)),
    ],
)
def test_run_trains_and_writes_metrics(
    train_cfg, tmp_path: Path, overrides: list[str], shape: tuple[int, ...]
) -> None:
    cfg = train_cfg(*overrides)
    record = run(cfg, datasets=tiny(shape), output_dir=tmp_path)
    assert set(record["final"]) == METRICS
    assert record["objective"]["value"] == record["final"][cfg.objective.metric]
    assert record["status"] == "completed"
    assert [h["epoch"] for h in record["history"]] == [1, 2]
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk["final"] == record["final"]
    assert on_disk["params"]["lr"] == cfg.lr and on_disk["seed"] == 0
    assert on_disk["device"]["type"] == "cpu"
    assert on_disk["tensorflow_version"]
    assert not list(tmp_path.glob(".metrics.json.*")), "temporary file left behind"


def test_same_seed_same_metrics_other_seed_other_metrics(train_cfg) -> None:
    data = tiny()
    first = run(train_cfg("seed=1"), datasets=data)
    again = run(train_cfg("seed=1"), datasets=data)
    other = run(train_cfg("seed=2"), datasets=data)
    assert first["final"] == again["final"]
    assert [h["loss"] for h in first["history"]] == [h["loss"] for h in again["history"]]
    assert first["final"] != other["final"]


def test_nan_loss_stops_the_run_with_a_clear_message(train_cfg, tmp_path: Path) -> None:
    data = tiny()
    data = Datasets(data.x_train * 1e30, *list(vars(data).values())[1:])
    with pytest.raises(TrainingDiverged, match=r"loss is nan after epoch 1 \(lr=1000000.0"):
        run(train_cfg("lr=1e6", "optimizer=sgd"), datasets=data, output_dir=tmp_path)
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "diverged" and "loss is nan" in record["error"]


def test_save_model(train_cfg, tmp_path: Path) -> None:
    run(train_cfg("save_model=true", "epochs=1"), datasets=tiny(), output_dir=tmp_path)
    assert (tmp_path / "model.keras").stat().st_size > 0


def test_digits_split_is_deterministic_and_stratified(train_cfg) -> None:
    a, b = load_datasets(train_cfg()), load_datasets(train_cfg("seed=5"))
    assert np.array_equal(a.x_val, b.x_val), "the split must not depend on the training seed"
    sizes = len(a.x_train), len(a.x_val), len(a.x_test)
    assert sum(sizes) == 1797 and sizes[2] == 360
    assert a.input_shape == (8, 8) and a.n_classes == 10
    assert a.x_train.min() >= 0.0 and a.x_train.max() <= 1.0


def test_npz_like_keras_mnist(train_cfg, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / "mnist.npz"
    np.savez(
        path,
        x_train=rng.integers(0, 256, (100, 28, 28), dtype=np.uint8),
        y_train=np.arange(100) % 10,
        x_test=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        y_test=np.arange(20) % 10,
    )
    data = load_datasets(train_cfg("data=npz", f"data.path={path}"))
    assert len(data.x_test) == 20 and len(data.x_train) + len(data.x_val) == 100
    assert data.x_train.dtype == np.float32 and data.x_train.max() <= 1.0


def test_a_gpu_job_without_a_visible_gpu_fails_loudly(train_cfg, monkeypatch) -> None:
    """A GPU box with CPU-only TensorFlow must not quietly train every job on the CPU."""
    from hpsearch.errors import ConfigError

    monkeypatch.setenv("HPSEARCH_GPU", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # what the test is about: no GPU visible
    with pytest.raises(ConfigError, match="the launcher gave this job GPU 3, but TensorFlow sees"):
        run(train_cfg("device=auto"), datasets=tiny())


def test_train_metrics_are_the_trained_model_on_the_training_set(train_cfg, tmp_path: Path) -> None:
    """Not Keras' running average over the last epoch (dropout on, weights still moving),
    which with epochs=1 sits far below val_accuracy: the model evaluated as val and test are."""
    import keras

    data = tiny()
    cfg = train_cfg("epochs=1", "save_model=true", "model.dropout=0.5")
    record = run(cfg, datasets=data, output_dir=tmp_path)
    model = keras.models.load_model(tmp_path / "model.keras")
    train = model.evaluate(data.x_train, data.y_train, verbose=0, return_dict=True)
    assert record["final"]["train_loss"] == pytest.approx(train["loss"], rel=1e-5)
    assert record["final"]["train_accuracy"] == pytest.approx(train["accuracy"], rel=1e-5)
    assert record["history"][-1]["loss"] != pytest.approx(train["loss"], rel=1e-3)


def test_metrics_json_names_its_time_for_what_it_measures(train_cfg, tmp_path: Path) -> None:
    """results.csv's wall_time_s is the job's whole life (process start-up, Hydra, imports);
    metrics.json's own time is the training's alone, and says so."""
    run(train_cfg("epochs=1"), datasets=tiny(), output_dir=tmp_path)
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert "wall_time_s" not in record
    assert 0 < record["train_time_s"] < 300
