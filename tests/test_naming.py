"""Run directory names: from the swept overrides, safe on any filesystem, distinct."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hpsearch_launcher.plan.naming import (
    MAX_COMPONENT_BYTES,
    claim_run_dir,
    run_dir_name,
    setting_text,
    varying_keys,
)

GRID = [
    ["lr=0.001", "batch=32", "device=cpu"],
    ["lr=0.01", "batch=32", "device=cpu"],
    ["lr=0.001", "batch=128", "device=cpu"],
    ["lr=0.01", "batch=128", "device=cpu"],
]


def test_only_varying_keys_sorted() -> None:
    keys = varying_keys(GRID)
    assert keys == {"lr", "batch"}
    assert [run_dir_name(o, keys, i) for i, o in enumerate(GRID)] == [
        "batch=32,lr=0.001",
        "batch=32,lr=0.01",
        "batch=128,lr=0.001",
        "batch=128,lr=0.01",
    ]


def test_swept_keys_count_even_in_a_batch_of_one() -> None:
    # Optuna hands batches of 1 or 2: the sweeper's params decide, not the batch alone.
    keys = varying_keys([["lr=0.003", "seed=1"]], swept=["lr"])
    assert run_dir_name(["lr=0.003", "seed=1"], keys, 0) == "lr=0.003"


def test_a_key_some_jobs_lack_varies() -> None:
    keys = varying_keys([["+a=1"], ["+a=1", "+b=2"]])
    assert keys == {"b"}


def test_nothing_varies_uses_all_overrides_then_job_number() -> None:
    assert run_dir_name(["lr=0.1", "batch=8"], set(), 0) == "batch=8,lr=0.1"
    assert run_dir_name([], set(), 7) == "job7"


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("0.0001265262767107385", "lr=0.000126526"),  # what Optuna's float sampler gives
        ("0.012345678", "lr=0.0123457"),
        ("1.2345678901e-05", "lr=1.23457e-05"),
        ("0.001", "lr=0.001"),  # as typed: left alone
        ("1e-3", "lr=1e-3"),
        ("0.123456", "lr=0.123456"),  # 6 digits: whole
        ("123456789", "lr=123456789"),  # an integer is no float
        ("abc.1234567", "lr=abc.1234567"),
    ],
)
def test_long_floats_are_shortened_in_names(value: str, name: str) -> None:
    assert run_dir_name([f"lr={value}", "batch=32"], {"lr"}, 0) == name


def test_floats_that_round_alike_still_get_two_dirs(tmp_path: Path) -> None:
    """0.12345671 and 0.12345674 both name lr=0.123457: the second run dir is ~2."""
    names = [run_dir_name([f"lr={v}"], {"lr"}, 0) for v in ("0.12345671", "0.12345674")]
    assert names == ["lr=0.123457"] * 2
    assert [claim_run_dir(tmp_path, n) for n in names] == ["lr=0.123457", "lr=0.123457~2"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x/../../../evil", "k=x%2F..%2F..%2F..%2Fevil"),
        ("..", "k=.."),
        ("a b", "k=a%20b"),
        ('a"=0"', "k=a%22=0%22"),
        ("a'; echo foo", "k=a%27%3B%20echo%20foo"),
        ("tab\there", "k=tab%09here"),
        ("new\nline", "k=new%0Aline"),
        ("100%", "k=100%25"),
        ("C:\\x", "k=C%3A%5Cx"),
        ("naïve", "k=naïve"),
        ("😀", "k=%F0%9F%98%80"),
        ("", "k="),
        ("[1,2]", "k=[1,2]"),
        ("~2", "k=%7E2"),
        ("'a b'", "k=a%20b"),  # Hydra keeps the quotes of a quoted value: they are not part of it
        ('"it\\"s"', "k=it%22s"),
        ("'", "k=%27"),
    ],
)
def test_nasty_values_are_escaped(value: str, expected: str) -> None:
    assert run_dir_name([f"k={value}"], {"k"}, 0) == expected


def test_escaping_keeps_distinct_values_distinct() -> None:
    values = ["a/b", "a_b", "a%2Fb", "a b", "a%20b", "1e-3", "0.001"]
    names = {run_dir_name([f"k={v}"], {"k"}, 0) for v in values}
    assert len(names) == len(values)


def test_a_name_that_just_fits_is_kept_whole() -> None:
    fits = "k=" + "x" * (MAX_COMPONENT_BYTES - 12 - 2)
    assert run_dir_name([fits], {"k"}, 0) == fits
    assert "~" in run_dir_name([fits + "x"], {"k"}, 0)


def test_long_names_are_cut_with_a_hash() -> None:
    a = run_dir_name(["k=" + "x" * 400 + "a"], {"k"}, 0)
    b = run_dir_name(["k=" + "x" * 400 + "b"], {"k"}, 0)
    assert a != b
    assert len(a.encode()) <= MAX_COMPONENT_BYTES - 12
    full = "k=" + "é" * 300
    long_unicode = run_dir_name([full], {"k"}, 0)
    assert len(long_unicode.encode()) <= MAX_COMPONENT_BYTES - 12
    # Cut on a character boundary (é is 2 bytes), then "~" and a hash of the whole name.
    head, _, digest = long_unicode.rpartition("~")
    assert full.startswith(head) and len(head) > 100 and "\ufffd" not in head
    assert digest == hashlib.sha256(full.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    "value", ["a 0", 'a"=0"', "a'; echo foo", "x/../../../evil", "..", "." * 300, "\x01\x7f"]
)
def test_claimed_dirs_stay_inside_the_sweep_dir(tmp_path: Path, value: str) -> None:
    name = claim_run_dir(tmp_path, run_dir_name([f"k={value}"], {"k"}, 0))
    created = (tmp_path / name).resolve()
    assert created.is_dir() and created.parent == tmp_path.resolve()


def test_claim_never_reuses_a_directory(tmp_path: Path) -> None:
    names = [claim_run_dir(tmp_path, "lr=0.1") for _ in range(3)]
    assert names == ["lr=0.1", "lr=0.1~2", "lr=0.1~3"]


def test_claim_takes_the_first_name_made_way_for(tmp_path: Path) -> None:
    """`make_way` sees each name before it is tried: a dir it moves away is taken again."""
    for name in ("lr=0.1", "lr=0.1~2", "lr=0.1~3"):
        (tmp_path / name).mkdir()
    seen: list[str] = []

    def make_way(path: Path) -> None:
        seen.append(path.name)
        if path.name == "lr=0.1~2":  # an earlier, dead attempt: moved aside
            path.rename(tmp_path / "moved")

    assert claim_run_dir(tmp_path, "lr=0.1", make_way) == "lr=0.1~2"
    assert seen == ["lr=0.1", "lr=0.1~2"]


def test_a_runs_values_are_shown_as_its_run_dir_names_them() -> None:
    """Every line that shows a trial's values (the best so far, the best trial, the
    leaderboard's failures) rounds a sampler's float as the run dir's name does."""
    values = {"lr": 0.0023834587189112567, "batch": 32, "model": "cnn"}
    assert setting_text(values) == "lr=0.00238346,batch=32,model=cnn"
    assert setting_text({"lr": "0.001", "x": 1e-05}, ", ") == "lr=0.001, x=1e-05"
