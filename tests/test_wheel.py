"""A plain (non-editable) wheel install runs `hpsearch` from any directory: the configs ship in it.

The wheel goes into a fresh venv that borrows this venv's dependencies through a .pth file, so
the test needs no network and no second TensorFlow install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO, Runner

pytestmark = pytest.mark.slow

# .venv* includes .venv-hydra-optuna (tests/hydra_optuna_venv.py).
BUILD_LEFTOVERS = (
    ".git",
    ".venv*",
    "build",
    "dist",
    "*.egg-info",
    "outputs",
    "multirun",
    ".*cache",
)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only the hpsearch wheel, with this venv's site-packages for its deps."""
    root = tmp_path_factory.mktemp("wheel")
    # A clean copy: setuptools reuses build/ and *.egg-info/SOURCES.txt left in the checkout by
    # earlier builds, which can carry files the current configuration would leave out.
    source = root / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*BUILD_LEFTOVERS))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", root / "dist", source],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = (root / "dist").glob("hpsearch-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel],
        check=True,
        capture_output=True,
        timeout=120,
    )
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Appended after the venv's own site-packages: the wheel's hpsearch wins over the editable one
    # (whose import hook is a .pth file there, which a plain path entry does not run).
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def run_installed(
    runner: Runner, venv: Path, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = runner.env()
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [venv / "bin" / "hpsearch", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_wheel_carries_the_configs(wheel_venv: Path, runner: Runner, tmp_path: Path) -> None:
    empty = tmp_path / "elsewhere"
    empty.mkdir()

    done = run_installed(
        runner, wheel_venv, empty, "--multirun", "lr=1e-3,1e-2", "device=cpu", "epochs=1"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    runs = sorted(p.parent.name for p in empty.glob("outputs/multirun/*/*/*/metrics.json"))
    assert runs == ["lr=0.001", "lr=0.01"]
    where = subprocess.run(
        [wheel_venv / "bin" / "python", "-c", "import hpsearch.app as a; print(a.CONFIG_DIR)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(wheel_venv)  # the wheel's copy, not the checkout's conf/


def test_help_and_config_override_from_the_wheel(
    wheel_venv: Path, runner: Runner, tmp_path: Path
) -> None:
    done = run_installed(runner, wheel_venv, tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "hpsearch-report [SWEEP_DIR]" in done.stdout  # our help, from the wheel's conf/hydra
    assert "  n_trials " in done.stdout  # the settings listed from their declarations

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("lr: 0.5\nfrom_mine: true\n")
    done = run_installed(runner, wheel_venv, tmp_path, "--config-path", str(mine), "--cfg", "job")
    assert done.returncode == 0, done.stderr
    assert "from_mine: true" in done.stdout
