"""hpsearch on both Hydra lines it supports (hydra-core 1.3 and 1.4): the plugin found once,
and the README's main command printing the same lines, none a warning, on each.

The comparison needs a venv on the other line than this one: `.ci/run` makes `.venv-hydra14`
(hydra-core 1.4.0rc3 beside the main venv's 1.3) and runs these tests there; without such a
venv it is skipped, saying how to make it. Marked `hydra_lines`: left out of the default run
(pyproject), as `.ci/run` runs it in the second venv.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import hydra
import pytest
from conftest import REPO, Runner

SECOND_VENV = REPO / ".venv-hydra14"
# Set by .ci/run: once hydra-core 1.4 is final and the main venv gets it, a second venv pinned
# to 1.4 too would compare a line with itself, and must say so rather than skip.
REQUIRE_OTHER_LINE = "HPSEARCH_REQUIRE_OTHER_LINE"
MAKE_SECOND_VENV = (
    "python3 -m venv .venv-hydra14 && .venv-hydra14/bin/pip install -q -e '.[cpu,test]' "
    "hydra-core==1.4.0rc3 omegaconf==2.4.1rc1"
)
README = (REPO / "README.md").read_text()
# The README's main command: the last step of its first command line.
MAIN = re.search(r"&& \.venv/bin/python (-m hpsearch --multirun [^\n]*)", README)


def line_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


THIS_LINE = line_of(hydra.__version__)


@pytest.fixture(scope="module")
def other_line_python() -> Path:
    """The python of a venv of this checkout on the other Hydra line than this one's."""
    for venv in (REPO / ".venv", SECOND_VENV):
        python = venv / "bin" / "python"
        if not python.exists():
            continue
        asked = [python, "-c", "import hydra; print(hydra.__version__)"]
        done = subprocess.run(asked, capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and line_of(done.stdout.strip()) != THIS_LINE:
            return python
    missing = (
        f"no venv on the other Hydra line than this one's ({hydra.__version__}) in .venv or "
        f".venv-hydra14: .ci/run makes it; by hand: {MAKE_SECOND_VENV}"
    )
    if os.environ.get(REQUIRE_OTHER_LINE) == "1":  # CI: a comparison left out is a failure
        pytest.fail(missing)
    pytest.skip(missing)


_TIMES = [
    (re.compile(r"^\[[\d\- :,]+\]\[HYDRA\] "), ""),  # the log line's time stamp
    (re.compile(r"outputs/multirun/[\d-]+/[\d-]+"), "SWEEP"),
    (re.compile(r"\d+(\.\d+)?|ETA \?"), "N"),  # times, metrics, counts
    (re.compile(r"\s+"), " "),  # the leaderboard's columns align to their values
]


def shape(output: str) -> list[str]:
    """The output's lines with what varies from run to run made alike, sorted (jobs end in
    either order); the progress lines, which come with time, left out."""
    lines = []
    for line in output.splitlines():
        for pattern, alike in _TIMES:
            line = pattern.sub(alike, line)
        if not line.startswith("progress: "):
            lines.append(line.strip())
    return sorted(lines)


WARNING = re.compile(r"warning|warn\(|deprecated", re.IGNORECASE)


def warnings_in(output: str) -> list[str]:
    return [line for line in output.splitlines() if WARNING.search(line)]


def run_main_command(runner: Runner, python: Path | str, where: Path) -> str:
    assert MAIN is not None, "the README's first command line no longer ends in the main command"
    where.mkdir()
    runner.python, runner.tmp_path = str(python), where
    result = runner.run(MAIN.group(1).split(), timeout=600)
    assert result.returncode == 0, result.stdout
    logs = "".join(p.read_text() for p in where.glob("outputs/multirun/*/*/*/stderr.log"))
    assert not warnings_in(logs), f"a job's stderr.log holds warnings:\n{logs}"
    return result.stdout


@pytest.mark.slow
@pytest.mark.hydra_lines
def test_the_readme_main_command_prints_the_same_lines_on_both_lines(
    runner: Runner, tmp_path: Path, other_line_python: Path
) -> None:
    here = run_main_command(runner, sys.executable, tmp_path / "this")
    there = run_main_command(runner, other_line_python, tmp_path / "other")
    assert not warnings_in(here), here
    assert not warnings_in(there), there
    assert "Leaderboard (max val_accuracy): 4 finished" in here
    assert shape(here) == shape(there), f"Hydra {THIS_LINE}:\n{here}\nthe other line:\n{there}"


def test_shape_keeps_what_a_warning_adds() -> None:
    """The comparison can fail: a warning's lines survive the normalising."""
    plain = "[2026-12-03 06:57:02,341][HYDRA] job 0 start  cpu  batch=32,lr=0.001\n"
    warned = "app.py:54: UserWarning: register_new_resolver() is deprecated\n" + plain
    assert shape(plain) != shape(warned) and warnings_in(warned) and not warnings_in(plain)
    later = plain.replace("06:57:02,341", "07:01:09,100").replace("job 0", "job 1")
    assert shape(plain) == shape(later)


def test_the_sweep_summary_is_silent_on_the_way_out_of_a_stopped_sweep(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Hydra 1.4 calls on_multirun_end in a `finally`: after a failed job the basic sweeper
    raised, or Ctrl-C, the launcher has shown the leaderboard; a second would double it, and
    its SystemExit(1) would hide the task's own error. At a sweep's plain end it still shows."""
    from omegaconf import OmegaConf

    from hpsearch_launcher.callbacks import SweepSummary
    from hpsearch_launcher.record.table import ResultsTable

    table = ResultsTable(tmp_path / "results.csv")
    row = {"job": 0, "status": "failed", "objective": "", "run_dir": "r", "config_hash": "h0"}
    table.put(row | {"error": "ValueError: boom", "return": ""}, {})
    table.save()
    hydra = {"sweep": {"dir": str(tmp_path)}, "overrides": {"task": [], "hydra": []}}
    config = OmegaConf.create({"hydra": hydra})
    summary = SweepSummary(mode="max")
    with pytest.raises(ValueError, match="boom"):
        try:
            raise ValueError("boom")
        finally:
            summary.on_multirun_end(config)
    assert "did not finish" not in caplog.text
    with pytest.raises(SystemExit):
        summary.on_multirun_end(config)
    assert "did not finish" in caplog.text


def _hydras_optuna_sweeper_beside_search() -> str | None:
    """Why Hydra's Optuna sweeper and the `search` extra do not share this venv (None: they do)."""
    import importlib.util

    if importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None:
        return "hydra-optuna-sweeper is not installed here"
    import optuna

    if int(optuna.__version__.split(".")[0]) < 4:
        return f"optuna {optuna.__version__}: Hydra 1.3's Optuna sweeper, which search cannot join"
    return None


@pytest.mark.skipif(
    _hydras_optuna_sweeper_beside_search() is not None,
    reason=str(_hydras_optuna_sweeper_beside_search()),
)
def test_hydras_optuna_sweeper_and_ours_share_a_venv_on_1_4(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """On Hydra 1.4 (hydra-optuna-sweeper 1.4: optuna>=4.9,<6) both sweepers run in one venv,
    through our launcher, and neither warns at the other's sampler configs."""
    for sweeper in ("optuna", "hpsearch"):
        args = runner.probe_sweep(
            marks,
            f"hydra/sweeper={sweeper}",
            "hydra.sweeper.n_trials=2",
            "hydra.sweeper.direction=maximize",
            "x=range(0,10)",
            f"hydra.sweep.dir={tmp_path / sweeper}",
        )
        result = runner.run(args)
        assert result.returncode == 0, result.stdout
        assert "Hydra15MigrationWarning" not in result.stdout, result.stdout
        assert len(list((tmp_path / sweeper).glob("x=*"))) == 2, result.stdout
