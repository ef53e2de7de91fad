"""What the README and the docs/ pages promise a new user, checked against what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from hpsearch_launcher.execute.job.remote import MARK

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def sentence_with(text: str, where: str) -> str:
    (found,) = [s for s in re.split(r"(?<=[.;])\s", " ".join(where.split())) if text in s]
    return found


def test_the_ray_mark_file_is_said_to_exist_only_while_the_sweep_runs() -> None:
    """The Ray backend removes its mark at close (tests/test_ray.py checks it): a user who
    looks for it after the sweep must not be told it is there."""
    said = sentence_with(f"(`{MARK}`)", page("ray.md"))
    assert "while the sweep runs" in said.lower() and "removed when the sweep ends" in said


def test_the_test_commands_say_how_long_they_take() -> None:
    """A new user who runs `pytest` and waits minutes must have been told."""
    assert re.search(r"whole suite takes several minutes \(about \d+.\d+ on \d cores", README)
    for command in ('pytest -m "not slow"', "pytest   "):
        (line,) = [ln for ln in README.splitlines() if command in ln and ln.startswith(".venv")]
        assert "minutes" in line, line


def section(title: str, where: str) -> str:
    """A page's section under a heading of any level, up to the next heading or the end."""
    pattern = rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)"
    (found,) = re.findall(pattern, where, flags=re.S | re.M)
    return found


def test_an_app_of_ones_own_is_told_where_its_leaderboard_comes_from() -> None:
    """Without the callback an app gets no leaderboard: the launcher's section says so."""
    text = " ".join(section("The launcher (`hydra.launcher.*`)", page("launcher.md")).split())
    assert "no end-of-sweep leaderboard" in text
    assert "hydra.callbacks.summary._target_: hpsearch_launcher.callbacks.SweepSummary" in text


def test_how_to_look_at_a_search_is_said() -> None:
    """optuna-dashboard with its install and run lines; an in-memory study has nothing to
    look at; Ctrl-C prints the leaderboard so far."""
    text = " ".join(section("Searching: `hydra/sweeper=hpsearch`", page("search.md")).split())
    assert "`pip install optuna-dashboard`" in text
    assert "`optuna-dashboard sqlite:///study.db`" in text
    assert "A study in memory (no `storage`) lives in the sweep's process alone" in text
    assert "Ctrl-C prints the leaderboard of what has finished" in text
