"""The launcher serves any Hydra app: it imports nothing from hpsearch, reads nothing from the
app's config, records whatever a job returns, and survives its own bugs without leaving jobs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from apps.foreign.app import experiment
from conftest import REPO, Runner, read_records, simulated_gpus_env

FOREIGN = REPO / "tests" / "apps" / "foreign"
UNIMPORTABLE = REPO / "tests" / "apps" / "unimportable"
FAULTY = REPO / "tests" / "apps" / "faulty.py"


def test_the_launcher_imports_nothing_from_hpsearch() -> None:
    """Every module of the launcher, imported in a clean interpreter where `import hpsearch`
    fails; Hydra's plugin scan finds the launcher there too."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import hpsearch_launcher as pkg\n"
        "for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "from hydra.core.plugins import Plugins\n"
        "from hydra.plugins.launcher import Launcher\n"
        "names = [p.__name__ for p in Plugins.instance().discover(Launcher)]\n"
        "assert 'HpsearchLauncher' in names, names\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'hpsearch']\n"
        "print('ok', len([m for m in sys.modules if m.startswith(pkg.__name__)]))\n"
    )
    env = {"PYTHONPATH": str(UNIMPORTABLE), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ") and int(out.stdout.split()[1]) >= 20


HEAVY = {"tensorflow", "keras", "torch", "ray", "submitit", "loky", "jax", "psutil"}


def test_hydras_plugin_scan_imports_nothing_heavy() -> None:
    """Every Hydra process of every app scans the plugins: the launcher's scanned modules
    import cleanly (no warning) and no TensorFlow, PyTorch, Ray or loky (those come in
    launch(), or in the job)."""
    code = (
        "import sys\n"
        "from hydra.core.plugins import Plugins\n"
        "from hydra.plugins.launcher import Launcher\n"
        "assert 'HpsearchLauncher' in [p.__name__ for p in Plugins.instance().discover(Launcher)]\n"
        f"print(sorted({HEAVY!r} & {{m.split('.')[0] for m in sys.modules}}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]" and out.stderr == ""


def test_the_job_side_api_is_light_to_import() -> None:
    """What a task imports (`from hpsearch_launcher import cap_torch_memory`) brings in no
    Hydra, TensorFlow, PyTorch, Ray or loky."""
    code = (
        "import sys\n"
        "from hpsearch_launcher import cap_torch_memory, job_memory_limit_mb, write_json_atomic\n"
        f"print(sorted(({HEAVY!r} | {{'hydra', 'omegaconf'}}) & "
        "{m.split('.')[0] for m in sys.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def foreign_sweep(runner: Runner, marks: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [
        str(FOREIGN / "app.py"),
        "--multirun",
        "alpha=0.1,0.2,0.3,0.4",
        "hydra.launcher.gpus=[0,1]",
        "hydra.launcher.jobs_per_gpu=2",  # all four start at once: round-robin order is exact
        f"marks={marks}",
        *extra,
    ]
    return runner.run(args, env=simulated_gpus_env({"PYTHONPATH": str(UNIMPORTABLE)}))


@pytest.mark.slow
def test_a_foreign_app_runs_through_the_launcher(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    result = foreign_sweep(runner, marks)
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    # Its own device.gpus: 2 is not a GPU id: the jobs alternate the launcher's GPUs 0 and 1.
    assert [r["cuda"] for r in records] == ["0", "1", "0", "1"]
    assert len({r["pid"] for r in records}) == 4
    assert all(r["hpsearch_modules"] == [] for r in records)
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
    assert frame["job"].tolist() == [0, 1, 2, 3]
    assert set(frame["status"]) == {"completed"}
    by_alpha = frame.set_index("alpha")
    assert float(by_alpha.loc[0.1, "score"]) == pytest.approx(1.0)
    assert float(by_alpha.loc[0.2, "loss"]) == pytest.approx(0.8)
    assert float(by_alpha.loc[0.4, "objective_1"]) == pytest.approx(0.8)
    assert by_alpha.loc[0.1, "objective_1"] == ""  # a dict job has no list columns
    assert json.loads(by_alpha.loc[0.1, "return"]) == {
        "score": 1.0,
        "loss": 0.9,
        "tag": "kept as JSON",
    }
    assert json.loads(by_alpha.loc[0.4, "return"]) == [0.4, 0.8]
    # Odd shapes are warned about once per sweep, never a crash.
    assert result.stdout.count("has no `final` mapping (got list)") == 1
    assert result.stdout.count("returned a mapping with entries that are not numbers") == 1

    again = foreign_sweep(runner, marks)
    assert again.returncode == 0, again.stdout
    assert len(read_records(marks)) == 4, "a resumed sweep runs nothing again"
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert frame["job"].tolist() == [0, 1, 2, 3] and set(frame["status"]) == {"completed"}


@pytest.mark.slow
@pytest.mark.parametrize("metrics", ["list", "string", "broken", "mapping"])
def test_resume_hands_the_sweeper_what_the_job_returned(
    launch_app, marks: Path, tmp_path: Path, metrics: str
) -> None:
    jobs = [["alpha=0.1", f"metrics={metrics}"], ["alpha=0.4", f"metrics={metrics}"]]
    options = ("hydra.launcher.gpus=[]", "hydra.launcher.n_jobs=2")
    first = launch_app(FOREIGN / "conf", "foreign", experiment, jobs, *options)
    again = launch_app(FOREIGN / "conf", "foreign", experiment, jobs, *options)
    assert [r.return_value for r in first] == [
        {"score": 1.0, "loss": 0.9, "tag": "kept as JSON"},
        [0.4, 0.8],
    ]
    assert [r.return_value for r in again] == [r.return_value for r in first]
    assert len(read_records(marks)) == 2
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv")
    if metrics == "mapping":  # metrics.json's numbers are columns, whatever their names
        assert frame["acc"].tolist() == pytest.approx([0.05, 0.2])
    else:
        assert "acc" not in frame.columns


@pytest.mark.slow
def test_the_same_config_twice_is_two_jobs(runner: Runner, marks: Path, tmp_path: Path) -> None:
    result = runner.run(runner.probe_sweep(marks, "+y=1,1,2", "hydra.launcher.n_jobs=3"))
    assert result.returncode == 0, result.stdout
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert frame["job"].tolist() == [0, 1, 2] and frame["y"].tolist() == [1, 1, 2]
    names = sorted(Path(d).name for d in frame["run_dir"])
    assert names == ["y=1", "y=1~2", "y=2"]
    assert all((tmp_path / d / "stdout.log").exists() for d in frame["run_dir"])
    again = runner.run(runner.probe_sweep(marks, "+y=1,1,2", "hydra.launcher.n_jobs=3"))
    assert again.returncode == 0, again.stdout
    assert len(read_records(marks)) == 3, "resume skips all three"
    assert set(pd.read_csv(tmp_path / "sweep" / "results.csv")["status"]) == {"completed"}
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == names


@pytest.mark.slow
def test_an_exception_in_recording_ends_every_job(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Job 1's recording raises while job 2 runs: job 2's tree is ended (the runner fixture
    checks nothing is left), job 0's row is kept, and the error surfaces once, non-zero."""
    (marks / "hold").touch()
    args = [
        str(FAULTY),
        "--multirun",
        f"marks={marks}",
        "x=0,1,2,3",
        "hold_from=2",
        "chain=true",
        "sleep=0.5",
        "hydra.launcher.n_jobs=2",
    ]
    started = time.monotonic()
    result = runner.run(args, env={"FAULTY_RECORD_JOB": "1"}, timeout=60)
    assert result.returncode != 0, result.stdout
    assert time.monotonic() - started < 30
    frame = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("job")
    assert frame.loc[0, "status"] == "completed"
    assert frame.loc[2, "status"] == "interrupted"
    assert "injected fault while recording job 1" in frame.loc[2, "error"]
    assert 1 not in frame.index and 3 not in frame.index  # 3 never started
    assert result.stdout.count("Traceback") <= 1
    assert "RuntimeError: injected fault while recording job 1" in result.stdout
