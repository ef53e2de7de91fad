"""The launcher's import structure (tools/import_layers.py): no circle, no import back up."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import import_layers


def test_the_launcher_has_no_import_circle_and_keeps_its_layers() -> None:
    assert import_layers.problems(REPO / "src" / "hpsearch_launcher") == []


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "hpsearch_launcher"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_a_circle_and_an_import_back_up_are_found(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "plan/__init__.py": "",
            "plan/settings.py": "from ..execute.backend import Execution\n",
            "execute/__init__.py": "",
            "execute/backend.py": "def f():\n    from ..plan import settings\n",
            "record/__init__.py": "",
            "record/table.py": "import hpsearch_launcher.execute.backend\n",
            "outcome.py": "from hpsearch_launcher.record import table\n",
        },
    )
    assert import_layers.problems(package) == [
        "import circle: execute.backend -> plan.settings",
        "outcome imports record.table: outcome must not import it",
        "plan.settings imports execute.backend: plan must not import it",
        "record.table imports execute.backend: record must not import it",
    ]
    assert import_layers.main([str(package)]) == 1


def test_the_search_and_the_launchers_inside_stay_apart(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "search/__init__.py": "",
            "search/sweeper.py": "from ..execute import sweep\n",
            "execute/__init__.py": "",
            "execute/sweep.py": "",
            "execute/local/__init__.py": "",
            "execute/local/backend.py": "def f():\n    from ...search import space\n",
            "search/space.py": "",
        },
    )
    assert import_layers.problems(package) == [
        "execute.local.backend imports search.space: execute must not import it",
        "search.sweeper imports execute.sweep: search must not import it",
    ]


def test_execute_keeps_the_job_side_and_each_backend_apart(tmp_path: Path) -> None:
    """execute/job imports nothing else of execute; a backend's folder (any but job, a new one
    too) imports no other backend's; the loop imports no backend. Both import the seam and the
    job's side."""
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "execute/__init__.py": "",
            "execute/backend.py": "from .job import wire\n",
            "execute/sweep.py": "def f():\n    from .local import machine\n",
            "execute/job/__init__.py": "",
            "execute/job/wire.py": "",
            "execute/job/child.py": "from ..backend import JobSpec\nfrom . import wire\n",
            "execute/local/__init__.py": "",
            "execute/local/machine.py": "from ..backend import Execution\nfrom ..job import wire\n",
            "execute/ray/__init__.py": "",
            "execute/ray/handle.py": "from ..local.machine import x\n",
            "execute/slurm/__init__.py": "",
            "execute/slurm/driver.py": "import hpsearch_launcher.execute.ray.handle\n",
        },
    )
    assert import_layers.problems(package) == [
        "execute.job.child imports execute.backend: execute/job imports nothing else of execute",
        "execute.ray.handle imports execute.local.machine: "
        "execute/ray does not import another backend (execute/local)",
        "execute.slurm.driver imports execute.ray.handle: "
        "execute/slurm does not import another backend (execute/ray)",
        "execute.sweep imports execute.local.machine: "
        "the loop (execute's own modules) does not import a backend (execute/local)",
    ]


def test_a_heavy_package_is_imported_only_by_its_backend(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "config.py": "def f():\n    import submitit\n",
            "execute/__init__.py": "",
            "execute/slurm/__init__.py": "",
            "execute/slurm/sbatch.py": "import submitit.core\n",
            "execute/ray/__init__.py": "",
            "execute/ray/driver.py": "from submitit import SlurmExecutor\nimport ray\n",
            "plan/__init__.py": "",
            "plan/env.py": "import tensorflow as tf\n",
        },
    )
    assert import_layers.problems(package) == [
        "config imports submitit: only execute/slurm may",
        "execute.ray.driver imports submitit: only execute/slurm may",
        "plan.env imports tensorflow: no launcher module may",
    ]


# What the app may import of the launcher: the job-side API, the app's surface, the results.
PUBLIC = {"hpsearch_launcher", "hpsearch_launcher.api", "hpsearch_launcher.results"}


def test_the_app_uses_only_the_launchers_public_surface() -> None:
    package = REPO / "src" / "hpsearch_launcher"
    modules = {f"hpsearch_launcher.{name}".rstrip(".") for name in import_layers.modules(package)}
    under = []
    for path in sorted((REPO / "src" / "hpsearch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            under += [f"{path.name}: {n}" for n in names if n in modules and n not in PUBLIC]
    assert under == []
