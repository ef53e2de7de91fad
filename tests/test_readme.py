"""What the README promises a new user, checked against what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from hpsearch_launcher.execute.ray import MARK

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def sentence_with(text: str) -> str:
    (found,) = [s for s in re.split(r"(?<=[.;])\s", " ".join(README.split())) if text in s]
    return found


def test_the_ray_mark_file_is_said_to_exist_only_while_the_sweep_runs() -> None:
    """The Ray backend removes its mark at close (tests/test_ray.py checks it): a user who
    looks for it after the sweep must not be told it is there."""
    said = sentence_with(f"(`{MARK}`)")
    assert "while the sweep runs" in said.lower() and "removed when the sweep ends" in said


def test_the_test_commands_say_how_long_they_take() -> None:
    """A new user who runs `pytest` and waits minutes must have been told."""
    assert re.search(r"whole suite takes several minutes \(about \d+.\d+ on \d cores", README)
    for command in ('pytest -m "not slow"', "pytest   "):
        (line,) = [ln for ln in README.splitlines() if command in ln and ln.startswith(".venv")]
        assert "minutes" in line, line
