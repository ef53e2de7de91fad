"""Every way a job can die becomes a FAILED JobReturn with its reason; the other jobs go on;
interrupting or killing the sweep ends every job's process tree."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from apps.probe import probe
from conftest import PROBE, Runner, processes_tagged
from hydra._internal.callbacks import Callbacks
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import HydraContext, RunMode

pytestmark = pytest.mark.slow


@pytest.fixture
def launch(runner: Runner, marks: Path, tmp_path: Path, hydra_restore_singletons: None) -> Iterator:
    """Run our launcher in this process, as a sweeper would, and hand back its JobReturns."""

    def run(jobs: list[list[str]], *overrides: str) -> list[JobReturn]:
        """Each job's own overrides are what a sweeper hands over: every task override."""
        GlobalHydra.instance().clear()
        hydra = Hydra.create_main_hydra2(
            task_name="probe",
            config_search_path=create_config_search_path(str(PROBE.parent / "conf")),
        )
        cfg = hydra.compose_config(
            "probe",
            overrides=[
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                f"+hydra.launcher.env.HPSEARCH_TEST_TAG={runner.tag}",
                *overrides,
            ],
            run_mode=RunMode.MULTIRUN,
        )
        HydraConfig.instance().set_config(cfg)
        launcher = Plugins.instance().instantiate_launcher(
            hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=Callbacks(cfg)),
            task_function=probe,
            config=cfg,
        )
        return list(launcher.launch([[*job, f"marks={marks}"] for job in jobs], initial_job_idx=0))

    yield run
    GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("raise", "probe asked to raise"),
        ("exit", "exited with status 3"),
        ("hard_exit", "process exited with status 7"),
        ("segfault", "process killed by SIGSEGV (segmentation fault)"),
        ("sigkill", "process killed by SIGKILL (killed: the OOM killer, a timeout or a user)"),
        ("hang", "timed out after 3s (hydra.launcher.timeout); its process tree was killed"),
    ],
)
def test_a_failing_job_is_isolated(launch, mode: str, reason: str, tmp_path: Path) -> None:
    jobs = [["x=1"], [f"mode={mode}", "x=2"], ["x=3"]]
    started = time.monotonic()
    returns = launch(jobs, "hydra.launcher.timeout=3", "hydra.launcher.n_jobs=3")
    assert [r.overrides[:-1] for r in returns] == jobs  # one per job, in input order
    assert [r.status for r in returns] == [
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.COMPLETED,
    ]
    assert returns[0].return_value == 1.0 and returns[2].return_value == 3.0
    with pytest.raises(Exception, match=reason.replace("(", r"\(").replace(")", r"\)")):
        _ = returns[1].return_value
    run_dir = tmp_path / "sweep" / f"mode={mode},x=2"
    assert (run_dir / "stderr.log").exists()
    if mode == "raise":  # the traceback is kept in the job's own log
        stderr = (run_dir / "stderr.log").read_text()
        assert "Traceback" in stderr and "ValueError: probe asked to raise" in stderr
    if mode == "hang":
        assert time.monotonic() - started < 30


def wait_for(paths: list[Path], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"never appeared: {paths}"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("sig", "exit_code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)],
)
def test_stopping_the_sweep_ends_every_job_tree(
    runner: Runner, marks: Path, sig: signal.Signals, exit_code: int
) -> None:
    args = runner.probe_sweep(marks, "x=0,1,2,3", "mode=hang", "hydra.launcher.n_jobs=2")
    sweep = runner.popen(args)
    wait_for([marks / "start-0", marks / "start-1"])
    time.sleep(0.5)  # the jobs' grandchildren have started too
    tree = processes_tagged(runner.tag)
    assert len(tree) >= 5, "expected the sweep, 2 jobs and their 2 grandchildren"
    sweep.send_signal(sig)
    out, _ = sweep.communicate(timeout=30)
    assert sweep.returncode == exit_code, out
    deadline = time.monotonic() + 10
    while processes_tagged(runner.tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_tagged(runner.tag) == []  # within 10 s, nothing is orphaned
    assert not (marks / "start-2").exists(), "no new job may start after the signal"
    if sig != signal.SIGKILL:
        assert "stopping 2 running jobs, 2 never started" in out
