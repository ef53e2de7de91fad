"""results.csv cells from what a task returned and the metrics.json it wrote: any shape in,
never a crash, one warning per kind per sweep."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from hpsearch_launcher.notices import once_per_sweep
from hpsearch_launcher.record.rows import (
    MAX_RETURN_CHARS,
    final_metrics,
    finite,
    loaded_return,
    return_columns,
    stored_return,
)


@pytest.mark.parametrize(
    ("value", "columns"),
    [
        (0.5, {"objective": 0.5}),
        (3, {"objective": 3.0}),
        (math.nan, {"objective": math.nan}),
        (True, {}),  # a bool is not a number here
        ([1, 2.5], {"objective_0": 1.0, "objective_1": 2.5}),
        ((1,), {"objective_0": 1.0}),
        ([1, "a"], {}),
        ([], {}),
        ({"acc": 0.9, "loss": 1}, {"acc": 0.9, "loss": 1.0}),
        ({"acc": 0.9, "name": "x"}, {"acc": 0.9}),
        ({"status": 1.0, "error": 2}, {"return_status": 1.0, "return_error": 2.0}),  # no clash
        ("text", {}),
        (None, {}),
        (object(), {}),
    ],
)
def test_return_columns(value: object, columns: dict) -> None:
    got = return_columns(value, 0, once_per_sweep(logging.getLogger("hpsearch.launcher")))
    assert got.keys() == columns.keys()
    for key, number in columns.items():
        assert got[key] == number or (math.isnan(got[key]) and math.isnan(number))


@pytest.mark.parametrize(
    ("content", "metrics"),
    [
        (
            {"final": {"val_accuracy": 0.9, "epochs": 3, "note": "x"}},
            {"val_accuracy": 0.9, "epochs": 3.0},
        ),
        # The task's own timing beside final, without the process's start-up.
        (
            {"final": {"val_accuracy": 0.9}, "train_time_s": 9.87654},
            {"val_accuracy": 0.9, "train_time_s": 9.877},
        ),
        ({"final": {"a": 1}, "train_time_s": "9"}, {"a": 1.0}),  # not a number: left out
        ({"final": {"a": 1}, "train_time_s": float("nan")}, {"a": 1.0}),
        ({"final": [1, 2]}, {}),
        ({"final": "text"}, {}),
        ({"other": 1}, {}),
        ([1, 2], {}),
        ("{broken", {}),
        (None, {}),  # no file at all
    ],
)
def test_final_metrics(tmp_path: Path, content: object, metrics: dict) -> None:
    if isinstance(content, str):
        (tmp_path / "metrics.json").write_text(content)
    elif content is not None:
        (tmp_path / "metrics.json").write_text(json.dumps(content))
    assert (
        final_metrics(tmp_path, 0, once_per_sweep(logging.getLogger("hpsearch.launcher")))
        == metrics
    )


def test_each_kind_of_notice_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    notices = once_per_sweep(logging.getLogger("hpsearch.launcher"))
    with caplog.at_level(logging.WARNING, logger="hpsearch.launcher"):
        for num in range(5):
            return_columns("text", num, notices)
            return_columns({"a": "b"}, num, notices)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all("said once per sweep" in m for m in messages)
    assert "job 0 returned a str" in messages[0]


@pytest.mark.parametrize(
    "value", [0.25, math.nan, [1, 2], {"a": 1.5, "b": [1, 2]}, "text", None, True, 7]
)
def test_stored_returns_come_back_the_same(value: object) -> None:
    text = stored_return(value, 0, once_per_sweep(logging.getLogger("hpsearch.launcher")))
    back = loaded_return({"return": text})
    assert back == value or (isinstance(value, float) and math.isnan(back))
    assert type(back) is type(value)


@pytest.mark.parametrize("value", [object(), {1, 2}, "x" * (MAX_RETURN_CHARS + 1)])
def test_what_json_cannot_hold_is_not_stored(value: object) -> None:
    assert stored_return(value, 0, once_per_sweep(logging.getLogger("hpsearch.launcher"))) == ""


@pytest.mark.parametrize(
    ("value", "number"),
    [("0.5", 0.5), (2, 2.0), ("nan", None), ("inf", None), ("", None), ("abc", None), (True, None)],
)
def test_finite(value: object, number: float | None) -> None:
    assert finite(value) == number


def test_a_return_of_exactly_the_limit_is_stored() -> None:
    limit = 100_000  # written out: a test must not take the limit from the code it checks
    value = "x" * (limit - 2)  # JSON adds the two quotes
    assert (
        stored_return(value, 0, once_per_sweep(logging.getLogger("hpsearch.launcher")))
        == f'"{value}"'
    )
    assert (
        stored_return(value + "x", 0, once_per_sweep(logging.getLogger("hpsearch.launcher"))) == ""
    )


def test_an_all_numeric_mapping_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hpsearch.launcher"):
        return_columns(
            {"a": 1, "b": 2.0}, 0, once_per_sweep(logging.getLogger("hpsearch.launcher"))
        )
    assert caplog.records == []
