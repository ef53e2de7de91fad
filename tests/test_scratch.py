"""The local backend's scratch directory: a sweep killed with SIGKILL cannot remove its own, so
the next sweep removes every one whose sweep is gone, and never one whose sweep lives."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hpsearch_launcher.execute.local.scratch import LOCK, Scratch

# A process that makes a scratch dir, prints its path, and lives until killed.
HOLDER = (
    "import sys, time; from hpsearch_launcher.execute.local.scratch import Scratch; "
    "print(Scratch().path, flush=True); time.sleep(600)"
)


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory of this test's own, for this process and its children."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    return tmp_path


def holder(env_tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        env={"TMPDIR": str(env_tmp), "PATH": "/usr/bin:/bin"},
    )
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert path.parent == env_tmp and (path / LOCK).exists()
    return proc, path


def test_a_killed_sweeps_scratch_dir_goes_and_a_live_ones_stays(own_tmp: Path) -> None:
    killed, killed_dir = holder(own_tmp)
    live, live_dir = holder(own_tmp)
    (killed_dir / "task.pkl").write_bytes(b"x" * 1000)
    unlocked = own_tmp / "hpsearch-older"  # an older version's (no lock file), or one being made
    unlocked.mkdir()
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        scratch = Scratch()
        try:
            assert not killed_dir.exists()
            assert live_dir.exists() and unlocked.exists()
        finally:
            scratch.remove()
        assert not scratch.path.exists()
    finally:
        live.kill()
        live.wait()
    Scratch().remove()
    assert not live_dir.exists()  # now that its sweep is gone
