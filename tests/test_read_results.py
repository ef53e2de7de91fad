"""`read_results`: results.csv as a DataFrame whose column types do not depend on the data
(`pandas.read_csv` makes an all-empty `error` or `return` column float64)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from hpsearch_launcher.record.table import TAIL
from hpsearch_launcher.results import ResultsFileError, ResultsTable, read_results


def write_sweep(sweep_dir: Path, failed: bool) -> Path:
    """Two completed jobs (lr x model), and a failed one when `failed`: then `error` has text,
    `objective` a gap; without it `error` and `attempts`' neighbours are all empty."""
    table = ResultsTable(sweep_dir / "results.csv")
    runs = [("0.001", "mlp", "completed", 0.8), ("0.01", "cnn", "completed", 0.9)]
    if failed:
        runs.append(("0.1", "cnn", "failed", None))
    for job, (lr, model, status, score) in enumerate(runs):
        cells: dict[str, object] = {
            "job": job,
            "status": status,
            "objective": "" if score is None else score,
            "val_accuracy": "" if score is None else score,
            "device": "cpu",
            "start": "2026-12-01T10:00:00",
            "end": "2026-12-01T10:00:12",
            "wall_time_s": 12.5,
            "attempts": 1,
            "run_dir": str(sweep_dir / str(job)),
            "config_hash": f"h{job}",
            "error": "TrainingDiverged: loss is nan" if score is None else "",
            "return": "",  # an empty return: a value JSON could not hold
        }
        table.put(cells, {"lr": lr, "model": model})
    return sweep_dir


TEXT = ["model", "status", "device", "start", "end", "run_dir", "config_hash", "error", "return"]
NUMBERS = ["lr", "objective", "val_accuracy", "wall_time_s"]


@pytest.mark.parametrize("failed", [False, True], ids=["all-completed", "one-failed"])
def test_column_types_do_not_depend_on_the_data(tmp_path: Path, failed: bool) -> None:
    frame = read_results(write_sweep(tmp_path, failed))

    assert list(frame.columns) == [
        "job",
        "lr",
        "model",
        "status",
        "objective",
        "val_accuracy",
        *TAIL,
    ]
    integers = ["job", "attempts", "gpu_peak_mb", "gpu_cap_mb"]
    assert {c: str(frame[c].dtype) for c in integers} == dict.fromkeys(integers, "Int64")
    assert frame["gpu_peak_mb"].isna().all()  # the CPU: nothing measured
    assert all(frame[c].dtype == "float64" for c in NUMBERS)
    assert all(frame[c].dtype == object for c in TEXT), frame.dtypes
    assert all(isinstance(v, str) for c in TEXT for v in frame[c])  # an empty cell is ""
    assert frame["return"].tolist() == [""] * len(frame)
    assert frame["error"].str.contains("loss is nan").sum() == int(failed)
    assert frame["objective"].isna().sum() == int(failed)
    assert frame["lr"].tolist()[:2] == [0.001, 0.01]


def test_read_csv_alone_makes_empty_text_columns_float(tmp_path: Path) -> None:
    """Why read_results exists: this is what a user gets without it."""
    frame = pd.read_csv(write_sweep(tmp_path, failed=False) / "results.csv")
    assert frame["error"].dtype == "float64" and math.isnan(frame["error"][0])


def test_a_missing_or_foreign_file_is_said_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no results\.csv in"):
        read_results(tmp_path)
    (tmp_path / "results.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ResultsFileError, match="has no job, status"):
        read_results(tmp_path)


def test_without_pandas_the_error_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        read_results(write_sweep(tmp_path, failed=False))
