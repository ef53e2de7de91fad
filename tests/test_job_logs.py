"""A job's logs: one copy of its log (not hpsearch.log and stdout.log byte for byte alike), and
no TensorFlow start-up banner in a warm spare's stderr.log when tf_log_level says quiet."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import VERSION_BASE, Runner
from hydra import compose, initialize_config_dir

from hpsearch.app import CONFIG_DIR
from hpsearch.run_log import RunLogFile

TF_NOISE = ("oneDNN", "absl::InitializeLog", "cuda_", "E0000", "I0000")


def log_once(handler: logging.Handler) -> None:
    logger = logging.getLogger(f"test_job_logs.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("epoch 1/1")
    finally:
        logger.removeHandler(handler)
        handler.close()


def test_no_log_file_when_the_console_already_goes_to_the_run_dir(tmp_path: Path) -> None:
    """The hpsearch launcher keeps each job's console as its run dir's stdout.log."""
    with (tmp_path / "stdout.log").open("w") as console:
        log_once(RunLogFile(str(tmp_path / "hpsearch.log"), console=console))
    assert not (tmp_path / "hpsearch.log").exists()


@pytest.mark.parametrize("console", ["file elsewhere", "no file"])
def test_the_log_file_is_written_when_the_console_is_elsewhere(
    tmp_path: Path, console: str
) -> None:
    """A single run: the console is a terminal, a pipe, or a file outside the run dir."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with (tmp_path / "elsewhere.log").open("w") as elsewhere:
        stream = elsewhere if console == "file elsewhere" else io.StringIO()
        log_once(RunLogFile(str(run_dir / "hpsearch.log"), console=stream))
    assert "epoch 1/1" in (run_dir / "hpsearch.log").read_text()


def test_hpsearch_jobs_log_through_it() -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, **VERSION_BASE):
        cfg = compose("config", return_hydra_config=True)
    handlers = cfg.hydra.job_logging.handlers
    assert handlers.file["class"] == "hpsearch.run_log.RunLogFile"
    assert list(cfg.hydra.job_logging.root.handlers) == ["console", "file"]


def test_what_a_spare_imports_ahead_prints_nowhere(tmp_path: Path) -> None:
    """A module imported ahead of a job (TensorFlow prints absl's start-up lines whatever
    TF_CPP_MIN_LOG_LEVEL says) writes nothing into the job's logs: it is not the job's output."""
    (tmp_path / "noisy.py").write_text(
        "import os, sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n"
        "os.write(2, b'from C, to fd 2\\n')\n"
    )
    code = (
        "import sys\n"
        "from hpsearch_launcher.execute.job.child_status import StatusPipe, preload_modules\n"
        "preload_modules(['noisy'], StatusPipe(-1))\n"
        "print('noisy' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"  # imported ahead, and nothing else printed
    assert done.stderr == ""


@pytest.mark.slow
def test_a_sweep_job_has_one_log_and_a_quiet_stderr(runner: Runner, tmp_path: Path) -> None:
    """One job at a time: job 1 runs in the spare made while job 0 ran."""
    result = runner.run(
        [
            "-m",
            "hpsearch",
            "--multirun",
            "lr=1e-3,1e-2",
            "device=cpu",
            "epochs=1",
            "hydra.launcher.n_jobs=1",
            "hydra.sweep.dir=sweep",
        ]
    )
    assert result.returncode == 0, result.stdout
    run_dirs = sorted(p for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        assert "epoch 1/1" in (run_dir / "stdout.log").read_text()
        assert not (run_dir / "hpsearch.log").exists()  # stdout.log is the job's log
        stderr = (run_dir / "stderr.log").read_text()
        assert not [n for n in TF_NOISE if n in stderr], (run_dir.name, stderr)
