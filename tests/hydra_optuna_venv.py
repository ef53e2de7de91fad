"""A second virtual environment for Hydra's own Optuna sweeper (hydra/sweeper=optuna).

hydra-optuna-sweeper 1.2/1.3 pins optuna < 3, which cannot share an environment with the
Optuna 4+ that hydra/sweeper=hpsearch needs. So its tests run in `.venv-hydra-optuna/` at the
repository's root: the `hydra-optuna` extra's pins installed there (from the package registry,
once: the venv is kept for the next run), and this venv's site-packages appended after its own
through a .pth file, for everything else (Hydra, TensorFlow, hpsearch itself).
"""

from __future__ import annotations

import fcntl
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib
from conftest import REPO

from hpsearch_launcher.atomic import write_text_atomic
from hpsearch_launcher.hydra_line import HAS_EXECUTION_WHITELIST

VENV = REPO / ".venv-hydra-optuna"
# Run in the venv: fails unless Hydra's sweeper and the old Optuna win over this venv's.
SMOKE = (
    "import optuna, hydra_plugins.hydra_optuna_sweeper, hpsearch_launcher; "
    "assert int(optuna.__version__.split('.')[0]) < 3, optuna.__version__"
)


def pins() -> list[str]:
    """The `hydra-optuna` extra's requirements, as pyproject.toml gives them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["hydra-optuna"])


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _borrow_this_venv(venv: Path) -> None:
    """This venv's site-packages after the new venv's own, its .pth files run (the editable
    install of hpsearch is one): what the new venv lacks comes from here."""
    site = subprocess.run(
        [_python(venv), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    here = sysconfig.get_paths()["purelib"]
    pth, line = Path(site) / "hpsearch-main-venv.pth", f"import site; site.addsitedir({here!r})\n"
    # Another xdist worker's test may be starting this venv's python right now: the file is
    # rewritten only if it changed, and atomically (a truncated .pth hides Hydra from it).
    if not pth.exists() or pth.read_text() != line:
        write_text_atomic(pth, line)


def _works(venv: Path) -> bool:
    stamp = venv / "hpsearch-pins.txt"
    if not _python(venv).exists() or not stamp.exists() or stamp.read_text() != "\n".join(pins()):
        return False
    return subprocess.run([_python(venv), "-c", SMOKE], capture_output=True).returncode == 0


def make_venv(venv: Path = VENV) -> Path:
    """The venv, made if missing or stale; its python."""
    if venv.exists():
        _borrow_this_venv(venv)  # this venv may have moved since (another checkout)
        if _works(venv):
            return _python(venv)
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    _borrow_this_venv(venv)
    # pip sees this venv's packages through the .pth file: it installs only what they lack or
    # pin otherwise, into the new venv (it never uninstalls outside the venv it installs to).
    install = [sys.executable, "-m", "pip", "--python", _python(venv), "install", "-q", *pins()]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        shutil.rmtree(venv)
        pytest.fail(f"cannot install Hydra's Optuna sweeper into {venv}:\n{done.stderr}")
    (venv / "hpsearch-pins.txt").write_text("\n".join(pins()))
    check = subprocess.run([_python(venv), "-c", SMOKE], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    return _python(venv)


@pytest.fixture(scope="session")
def hydra_optuna_python() -> Path:
    """The python of the venv where hydra/sweeper=optuna runs. pytest-xdist's workers each
    ask for it: the first makes it while the others wait on the lock, then find it made.

    On Hydra 1.4 that is this venv, with hydra-optuna-sweeper 1.4 installed beside `search`
    (optuna>=4.9): the 1.3 sweeper's venv would borrow a Hydra it was not made for."""
    if HAS_EXECUTION_WHITELIST:
        if importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None:
            pytest.skip("Hydra 1.4 without hydra-optuna-sweeper 1.4 here (pip install it)")
        return Path(sys.executable)
    with (REPO / ".venv-hydra-optuna.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return make_venv()
