"""tools/planted.py's bugs still fit the code they are planted in: each one's text is in its file
exactly once, and each one's tests exist. An entry that no longer matches plants nothing, and
the audit it stands for silently stops (four fork entries had, after the code moved)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import planted  # noqa: E402 - a tool, found on its own path

ENTRIES = [(name, bug) for name, bugs in planted.SETS.items() for bug in bugs]


@pytest.mark.parametrize(("set_name", "bug"), ENTRIES, ids=[f"{s}: {b.area}" for s, b in ENTRIES])
def test_each_planted_bug_fits_its_file_once_and_names_real_tests(
    set_name: str, bug: planted.Planted
) -> None:
    source = ROOT / planted.PKG / bug.path
    assert source.is_file(), f"--set {set_name}: {bug.area}: no file {bug.path}"
    found = source.read_text().count(bug.old)
    assert found == 1, f"--set {set_name}: {bug.area}: its text is in {bug.path} {found}x"
    for test in bug.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), f"{bug.area}: no test file {path}"
        # A name may be a test's start, run with -k (a parametrized one's).
        assert not name or f"def {name}" in (ROOT / path).read_text(), f"{bug.area}: no {test}"
