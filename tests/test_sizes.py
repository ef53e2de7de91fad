"""The size check (tools/sizes.py): modules over 300 lines and functions over 50 are named.

Only on synthetic files: the repository's own sizes are CI's check, not a test's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import sizes


def function(name: str, lines: int, indent: str = "") -> str:
    """A function `lines` long, its `def` line included."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}() -> None:\n{body}{indent}    return None\n"


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "offence"),
    [
        ("x = 1\n" * 300, ""),
        ("x = 1\n" * 301, ": 301 lines (limit 300)"),
        ("import os\n\n\n" + function("step", 50), ""),
        ("import os\n\n\n" + function("step", 51), ":4 step(): 51 lines (limit 50)"),
    ],
    ids=["module-at", "module-over", "function-at", "function-over"],
)
def test_one_over_a_limit_is_named_and_one_at_it_is_not(
    tmp_path: Path, text: str, offence: str
) -> None:
    path = write(tmp_path, "m.py", text)
    assert sizes.file_problems(path) == ([f"{path}{offence}"] if offence else [])


def test_methods_and_nested_functions_count_alone_and_within_the_one_around_them(
    tmp_path: Path,
) -> None:
    inner = function("inner", 51, indent="    ")  # over alone, and makes outer over too
    short = function("short", 30, indent="    ")
    text = (
        "def outer() -> None:\n"
        + inner
        + "    return None\n"
        + "class C:\n"
        + function("method", 51, indent="    ").replace("()", "(self)")
        + "def wrapper() -> None:\n"
        + short
        + short.replace("short", "other")  # two nested, each under, together over
        + "async def waits() -> None:\n"
        + "    return None\n" * 50
    )
    path = write(tmp_path, "m.py", text)
    assert sizes.file_problems(path) == [
        f"{path}:1 outer(): 53 lines (limit 50)",
        f"{path}:2 inner(): 51 lines (limit 50)",
        f"{path}:55 method(): 51 lines (limit 50)",
        f"{path}:106 wrapper(): 61 lines (limit 50)",
        f"{path}:167 waits(): 51 lines (limit 50)",
    ]


def test_main_lists_every_offender_under_every_dir_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = write(tmp_path / "src", "pkg/big.py", "x = 1\n" * 301)
    long = write(tmp_path / "plugins", "long.py", function("long", 51))
    write(tmp_path / "src", "pkg/fine.py", function("fine", 50))
    assert sizes.main([str(tmp_path / "src"), str(tmp_path / "plugins")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{big}: 301 lines (limit 300)",
        f"{long}:1 long(): 51 lines (limit 50)",
    ]


def test_main_passes_with_a_one_line_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "a.py", "x = 1\n" * 300)
    write(tmp_path, "sub/b.py", function("b", 50))
    assert sizes.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        f"{tmp_path}: 2 modules, none over 300 lines, no function over 50\n"
    )


def test_a_directory_that_is_not_there_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sizes.main([str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().out == f"no such directory: {tmp_path / 'nope'}\n"
