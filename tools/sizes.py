"""Check sizes: no module over 300 lines, no function or method over 50.

    python tools/sizes.py [DIR ...]     (default: src hydra_plugins)

A module that long holds more than one job, a function that long does more than one step
(GUIDE.md's conventions). A module counts its lines; a function counts from its `def` to its
last line (end_lineno - lineno + 1), a nested function in its own right and within the one
around it. Prints each offender; exit status 1 if any, 2 for a directory that is not there.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LIMIT = 300
FUNCTION_LIMIT = 50
DEFAULT_DIRS = ("src", "hydra_plugins")


def file_problems(path: Path) -> list[str]:
    """The module's size, if over its limit, then each function over its own, in line order."""
    text = path.read_text()
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LIMIT:
        found.append(f"{path}: {lines} lines (limit {MODULE_LIMIT})")
    functions = [
        node
        for node in ast.walk(ast.parse(text, str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for node in sorted(functions, key=lambda n: n.lineno):
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > FUNCTION_LIMIT:
            found.append(
                f"{path}:{node.lineno} {node.name}(): {length} lines (limit {FUNCTION_LIMIT})"
            )
    return found


def problems(dirs: list[Path]) -> tuple[int, list[str]]:
    """How many modules the directories hold, and every offender among them, dir by dir."""
    paths = [path for d in dirs for path in sorted(d.rglob("*.py"))]
    return len(paths), [line for path in paths for line in file_problems(path)]


def main(argv: list[str]) -> int:
    dirs = [Path(d) for d in (argv or DEFAULT_DIRS)]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:  # a mistyped directory would otherwise pass, holding no module
        print(f"no such directory: {', '.join(missing)}")
        return 2
    count, found = problems(dirs)
    for line in found:
        print(line)
    if not found:
        where = ", ".join(str(d) for d in dirs)
        print(
            f"{where}: {count} modules, none over {MODULE_LIMIT} lines,"
            f" no function over {FUNCTION_LIMIT}"
        )
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
