"""Check the launcher's imports: no circle between its modules, and none that runs back up.

    python tools/import_layers.py [PACKAGE_DIR]     (default: src/hpsearch_launcher)

Layers, lowest first: the neutral modules (config, contract, nvml, atomic, outcome, hydra_line,
...) import none
of the others; plan imports neither execute nor record; record does not import execute; the
sweeper's search imports neither execute nor launch, and plan, record, execute do not import it.
Inside execute: execute/job (what runs in a job's process, on any backend) imports nothing else
of execute; each backend's folder (execute/local, execute/ray, any other but job) imports no
other backend's; the loop (execute's own modules) imports no backend's folder. A heavy package
(HEAVY: ray, submitit) is imported only in its backend's folder, TensorFlow nowhere.
Every import counts, a lazy one inside a function too. Prints each problem; exit status 1 if any.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

NEUTRAL = {
    "config",
    "contract",
    "nvml",
    "atomic",
    "outcome",
    "stream",
    "channel",
    "hydra_line",
    "finite",
    "notices",
    "text",
    "one_line",
    "disk_errors",
    "setting_checks",
}
# What each part must not import (by the first name under the package).
FORBIDDEN = {
    **{name: {"plan", "execute", "record", "launch", "callbacks", "results"} for name in NEUTRAL},
    "plan": {"execute", "record", "launch", "callbacks", "results", "search"},
    "record": {"execute", "launch", "search"},
    # The sweeper's search drives the launcher only through its stream() or launch(), and the
    # launcher needs none of the search (nor Optuna).
    "search": {"execute", "launch"},
    "execute": {"search"},
}


# Heavy packages and the one execute folder that may import them (None: no module of the
# launcher): the plugin scan, the loop and the other backends never pay for them.
HEAVY: dict[str, str | None] = {"ray": "ray", "submitit": "slurm", "tensorflow": None}

# execute's folder that runs inside a job's process, whatever the backend; every other folder
# under execute is a backend's.
JOB_FOLDER = "job"


def execute_folder(name: str, packages: set[str]) -> str | None:
    """The folder under execute that module `name` is in ("" for execute's own modules, the
    loop); None outside execute."""
    parts = name.split(".")
    if parts[0] != "execute":
        return None
    inside = parts[1:] if name in packages else parts[1:-1]
    return inside[0] if inside else ""


def execute_problem(name: str, target: str, packages: set[str]) -> str | None:
    """Why `name` must not import `target` by execute's inner rules; None if it may."""
    here, there = execute_folder(name, packages), execute_folder(target, packages)
    if here is None or there is None or here == there:
        return None
    if here == JOB_FOLDER:
        return "execute/job imports nothing else of execute"
    if there in ("", JOB_FOLDER):
        return None  # a backend uses the seam and the job's side
    if here == "":
        return f"the loop (execute's own modules) does not import a backend (execute/{there})"
    return f"execute/{here} does not import another backend (execute/{there})"


def modules(package: Path) -> dict[str, Path]:
    """Dotted names (relative to the package, "" for its __init__) of its modules."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, package: str, known: set[str]) -> Iterator[str]:
    """The package's modules that module `name` imports."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if name else []
    base = here if is_package else here[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                start = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                prefix = ".".join([*start, *(node.module.split(".") if node.module else [])])
            elif node.module and (node.module + ".").startswith(package + "."):
                prefix = node.module[len(package) + 1 :]
            else:
                continue
            # `from . import x` names a module; `from .x import y` names x (y: a name in it).
            subs = [f"{prefix}.{a.name}".strip(".") for a in node.names]
            targets = [f"{package}.{s}" for s in subs if s in known] or [f"{package}.{prefix}"]
        else:
            continue
        for target in targets:
            if (target + ".").startswith(package + "."):
                inner = target[len(package) + 1 :]
                if inner in known and inner != name:
                    yield inner


def heavy_imports(path: Path) -> set[str]:
    """The HEAVY packages a module imports (lazily too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found & set(HEAVY)


def heavy_problems(package: Path) -> list[str]:
    """Modules importing a heavy package outside the execute folder that may."""
    found = modules(package)
    packages = {name for name, path in found.items() if path.name == "__init__.py"}
    problems = []
    for name, path in sorted(found.items()):
        for heavy in sorted(heavy_imports(path)):
            allowed = HEAVY[heavy]
            if allowed is None or execute_folder(name, packages) != allowed:
                where = f"only execute/{allowed} may" if allowed else "no launcher module may"
                problems.append(f"{name} imports {heavy}: {where}")
    return problems


def graph(package: Path) -> dict[str, set[str]]:
    found = modules(package)
    return {
        name: set(imports(name, path, package.name, set(found))) for name, path in found.items()
    }


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def problems(package: Path) -> list[str]:
    edges = graph(package)
    packages = {name for name, path in modules(package).items() if path.name == "__init__.py"}
    found = [f"import circle: {' -> '.join(group)}" for group in circles(edges)]
    for name, targets in sorted(edges.items()):
        part = name.split(".")[0]
        for target in sorted(targets):
            if target.split(".")[0] in FORBIDDEN.get(part, set()):
                found.append(f"{name} imports {target}: {part} must not import it")
            inner = execute_problem(name, target, packages)
            if inner is not None:
                found.append(f"{name} imports {target}: {inner}")
    return found + heavy_problems(package)


def main(argv: list[str]) -> int:
    package = Path(argv[0] if argv else "src/hpsearch_launcher")
    found = problems(package)
    for line in found:
        print(f"{package}: {line}")
    if not found:
        print(f"{package}: {len(graph(package))} modules, no import circle, layers kept")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
