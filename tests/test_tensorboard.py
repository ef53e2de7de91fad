"""TensorBoard logs of a run, read back from the event files: per-epoch scalars, the final
metrics, and the hparams that TensorBoard's HParams dashboard shows for each run of a sweep."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from tensorboard.plugins.hparams import metadata
from test_train import tiny

from hpsearch.data import Datasets
from hpsearch.errors import TrainingDiverged
from hpsearch.train import run

FINAL = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy")


def events(run_dir: Path) -> list[Any]:
    """Every event of the run's TensorBoard files, in file order."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    files = sorted((run_dir / "tb").glob("events.out.tfevents.*"))
    assert files, f"no event file in {run_dir / 'tb'}"
    return [
        event_pb2.Event.FromString(record.numpy())
        for path in files
        for record in tf.data.TFRecordDataset(str(path))
    ]


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of the scalars plugin's summaries."""
    import tensorflow as tf

    found: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for event in events(run_dir):
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name == "scalars":
                found[value.tag].append((event.step, tf.make_ndarray(value.tensor).item()))
    return dict(found)


def session_start(run_dir: Path) -> Any:
    """The run's SessionStartInfo: its trial id (group_name) and hparams."""
    infos = [
        metadata.parse_session_start_info_plugin_data(value.metadata.plugin_data.content)
        for event in events(run_dir)
        for value in event.summary.value
        if value.tag == metadata.SESSION_START_INFO_TAG
        and value.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME
    ]
    assert len(infos) == 1
    return infos[0]


def hparams(info: Any) -> dict[str, Any]:
    """A SessionStartInfo's hparams as Python values."""
    return {name: getattr(v, v.WhichOneof("kind")) for name, v in info.hparams.items()}


def test_run_logs_epochs_final_metrics_and_hparams(train_cfg, tmp_path: Path) -> None:
    record = run(train_cfg("epochs=3", "lr=0.01", "batch=32"), datasets=tiny(), output_dir=tmp_path)
    logged = scalars(tmp_path)
    for name in ("loss", "accuracy", "val_loss", "val_accuracy"):
        steps, values = zip(*logged[f"epoch/{name}"], strict=True)
        assert steps == (1, 2, 3), "one value per epoch, step = epoch"
        assert values == pytest.approx([h[name] for h in record["history"]], rel=1e-6)
    on_disk = json.loads((tmp_path / "metrics.json").read_text())["final"]
    for name in FINAL:
        assert logged[f"final/{name}"] == [(3, pytest.approx(on_disk[name], rel=1e-6))]
    info = session_start(tmp_path)
    assert info.group_name == str(tmp_path.resolve())
    assert hparams(info) == {
        "lr": 0.01,
        "batch": 32,
        "epochs": 3,
        "seed": 0,
        "model.name": "mlp",
        "model.hidden": "[256,128]",
        "model.activation": "relu",
        "model.dropout": 0.1,
        "optimizer.name": "adam",
        "optimizer.decay_rate": 0.95,
        "optimizer.decay_epochs": 1.0,
        "data.name": "digits",
    }


def test_runs_of_a_sweep_are_trials_of_one_experiment(train_cfg, tmp_path: Path) -> None:
    """`tensorboard --logdir SWEEP_DIR`: each run dir's tb/ is a session, its own trial."""
    for name, lr in (("lr=0.01", 0.01), ("lr=0.001", 0.001)):
        run(train_cfg(f"lr={lr}", "model=cnn"), datasets=tiny(), output_dir=tmp_path / name)
    runs = {p.parent.relative_to(tmp_path) for p in tmp_path.rglob("events.out.tfevents.*")}
    assert runs == {Path("lr=0.01/tb"), Path("lr=0.001/tb")}
    infos = {str(run_name.parent): session_start(tmp_path / run_name.parent) for run_name in runs}
    assert {name: hparams(i)["lr"] for name, i in infos.items()} == {
        "lr=0.01": 0.01,
        "lr=0.001": 0.001,
    }
    assert {hparams(i)["model.filters"] for i in infos.values()} == {"[32,64]"}
    assert len({i.group_name for i in infos.values()}) == 2
    for name in infos:
        final = json.loads((tmp_path / name / "metrics.json").read_text())["final"]
        logged = scalars(tmp_path / name)["final/val_accuracy"]
        assert logged == [(2, pytest.approx(final["val_accuracy"], rel=1e-6))]


def test_diverged_run_logs_its_nan_epoch_and_closes_its_file(train_cfg, tmp_path: Path) -> None:
    data = tiny()
    data = Datasets(data.x_train * 1e30, *list(vars(data).values())[1:])
    with pytest.raises(TrainingDiverged):
        run(train_cfg("lr=1e6", "optimizer=sgd"), datasets=data, output_dir=tmp_path)
    logged = scalars(tmp_path)
    [(step, loss)] = logged["epoch/loss"]
    assert step == 1 and math.isnan(loss)
    assert not [tag for tag in logged if tag.startswith("final/")]
    assert hparams(session_start(tmp_path))["lr"] == 1e6


def test_nothing_written_without_a_run_dir_or_when_off(
    train_cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run(train_cfg("epochs=1"), datasets=tiny())
    assert not list(tmp_path.iterdir())
    run(train_cfg("epochs=1", "tensorboard=false"), datasets=tiny(), output_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_the_tensorboard_package_reads_the_logs(train_cfg, tmp_path: Path) -> None:
    """TensorBoard's own reader, as `tensorboard --logdir` uses it, agrees."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    record = run(train_cfg(), datasets=tiny(), output_dir=tmp_path)
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Tensors("epoch/val_accuracy")] == [1, 2]
    import tensorflow as tf

    final = tf.make_ndarray(acc.Tensors("final/val_accuracy")[0].tensor_proto).item()
    assert final == pytest.approx(record["final"]["val_accuracy"], rel=1e-6)
    content = acc.SummaryMetadata(metadata.SESSION_START_INFO_TAG).plugin_data.content
    info = metadata.parse_session_start_info_plugin_data(content)
    assert info.hparams["model.name"].string_value == "mlp"
    assert info.hparams["lr"].number_value == 1e-3
