"""Shared helpers: run hpsearch or the probe app in a subprocess, and prove nothing is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig

from hpsearch.app import CONFIG_DIR
from hpsearch_launcher.execute.job import child
from hpsearch_launcher.execute.local import fork_server
from hpsearch_launcher.hydra_line import HAS_EXECUTION_WHITELIST

# Hydra's plugin scan, before any test snapshots Hydra's global state (hydra_restore_singletons):
# on Hydra 1.4 the scan is what stores the basic sweeper's and launcher's configs, once per
# process, and a snapshot taken before it would drop them for every later test.
Plugins.instance()

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "tests" / "apps" / "probe.py"
FAKE_NVML = REPO / "tests" / "fake_nvml"
SIMULATED_GPUS = [str(i) for i in range(8)]
# initialize_config_dir's version base as hpsearch's app has it: 1.3 on Hydra 1.3; none on 1.4,
# which deprecates the parameter.
VERSION_BASE = {} if HAS_EXECUTION_WHITELIST else {"version_base": "1.3"}


def simulated_gpus_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` for a sweep process on simulated GPUs: a stand-in NVML (tests/fake_nvml) that
    answers with 8 GPUs, first on its path. Without an NVIDIA driver the launcher refuses
    hydra.launcher.gpus=[0,1]."""
    env = dict(env or {})
    path = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_NVML), path) if p)
    return env


@pytest.fixture
def simulated_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process, NVML answers with 8 GPUs (and no figures for them): sweeps on
    simulated GPUs, e.g. hydra.launcher.gpus=[0,1], on a machine without an NVIDIA driver."""
    from hpsearch_launcher import nvml

    monkeypatch.setattr(nvml, "nvml_gpu_ids", lambda: list(SIMULATED_GPUS))


def measure_cold_start_s() -> float:
    """What a fresh job process costs on this machine now, before its task's first line: a
    new interpreter importing what a job's process imports (best of 2)."""
    imports = "import hydra, omegaconf, psutil, cloudpickle, hpsearch_launcher.execute.job.child"
    times = []
    for _ in range(2):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", imports], check=True)
        times.append(time.monotonic() - began)
    return min(times)


# cold_start_s on a quiet 2-core machine, rounded up (measured: 0.35 s).
QUIET_COLD_START_S = 0.5
COLD_START = pytest.StashKey[float]()
# stretch_for this worker's cold start, measured as the tests were collected (1.0 before).
STRETCH = 1.0


def stretch_for(cold_start_s: float) -> float:
    """How much slower than a quiet machine this one starts a process (>= 1)."""
    return max(1.0, cold_start_s / QUIET_COLD_START_S)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test's hang bound (pytest-timeout's: the ini's, or the test's own mark) times how
    much slower than a quiet machine this one starts a process now: a loaded machine stretches
    the bound with the work, a quiet one keeps it as written. Measured once per worker."""
    global STRETCH
    cold = config.stash[COLD_START] = measure_cold_start_s()
    factor = STRETCH = stretch_for(cold)
    if factor == 1.0:
        return
    default = float(config.getini("timeout") or 0)
    for item in items:
        mark = item.get_closest_marker("timeout")
        bound = float(mark.args[0]) if mark and mark.args else default
        if bound > 0:  # 0: no bound, as pytest-timeout reads it
            item.add_marker(pytest.mark.timeout(round(bound * factor)), append=False)


@pytest.fixture(scope="session")
def cold_start_s(pytestconfig: pytest.Config) -> float:
    """What a fresh job process costs on this machine now (measured as the tests were
    collected). A test's time limit for a job is a multiple of it, so that a loaded machine
    stretches the limit with it."""
    return pytestconfig.stash[COLD_START]


@pytest.fixture
def stretch(cold_start_s: float) -> float:
    """stretch_for(cold_start_s): a test's waits for jobs to start and end are its quiet waits
    times this, so load lengthens them."""
    return stretch_for(cold_start_s)


def processes_tagged(tag: str) -> list[psutil.Process]:
    """Processes whose environment carries `tag`: a sweep's jobs, their children, loky's helpers."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("HPS_TEST_TAG") == tag and proc.status() != "zombie":
                found.append(proc)
        except psutil.Error:
            continue
    return found


def role(proc: psutil.Process) -> str | None:
    """What `proc` is: "job" (a job's process), "spare" (a warm spare, still so named once
    handed a job; or a process the fork server forked ahead, waiting), "server" (the fork
    server), "grandchild" (the probe's `hang` child), or None (the sweep, any other)."""
    try:
        cmdline = " ".join(proc.cmdline())
    except psutil.Error:
        return None
    if "time.sleep(600)" in cmdline:
        return "grandchild"
    if child.__name__ in cmdline:  # the module its BOOT line imports
        return "spare" if "/spare-" in cmdline else "job"
    if fork_server.__name__ in cmdline:  # the fork server, or a process it forked
        try:
            forked = fork_server.__name__ in " ".join(proc.parent().cmdline())
            own_session = os.getsid(proc.pid) == proc.pid
        except (psutil.Error, AttributeError, OSError):
            forked = own_session = False
        if not forked:
            return "server"
        return "job" if own_session else "spare"  # forked ahead: waiting in the server's group
    return None


def roles(procs: list[psutil.Process]) -> dict[str, int]:
    """How many of `procs` are job processes, waiting warm spares, and the probe's `hang`
    grandchildren (the sweep process itself is none of these)."""
    counts = {"job": 0, "spare": 0, "grandchild": 0, "server": 0}
    for proc in procs:
        if (kind := role(proc)) is not None:
            counts[kind] += 1
    return counts


def wait_until(done: Callable[[], object], within: float, what: str) -> None:
    """Wait until `done()` holds, or fail naming `what`. `within` is the wait on a quiet
    machine: a loaded one stretches it (STRETCH)."""
    deadline = time.monotonic() + within * STRETCH
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {within * STRETCH:.0f} s for {what}")
        time.sleep(0.05)


def wait_for(*paths: Path, within: float = 60) -> None:
    """Wait until every one of `paths` exists (a job's mark), as wait_until waits."""
    wait_until(lambda: all(p.exists() for p in paths), within, f"{[str(p) for p in paths]}")


def wait_for_roles(tag: str, wanted: dict[str, int], within: float = 30) -> dict[str, int]:
    """Wait until the tagged processes have these roles: at least as many as `wanted` says,
    and none of a role it gives 0 (a process on its way out, such as one the fork server
    forked ahead and dismissed, is waited for); return the counts seen. `within` is stretched
    as wait_until's is."""
    deadline = time.monotonic() + within * STRETCH
    while True:
        seen = roles(processes_tagged(tag))
        if all(seen[k] >= v if v else seen[k] == 0 for k, v in wanted.items()):
            return seen
        if time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def wait_no_tagged(tag: str, within: float) -> list[psutil.Process]:
    """Wait until no tagged process is left (stretched as wait_until's); return those left."""
    deadline = time.monotonic() + within * STRETCH
    while (left := processes_tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


class Runner:
    """Starts commands with a unique tag in their environment; checks none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tag = uuid.uuid4().hex
        self.tmp_path = tmp_path
        self.python = sys.executable  # another venv's, for a sweeper this one cannot hold

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ, HPS_TEST_TAG=self.tag, PYTHONUNBUFFERED="1")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        return env | (extra or {})

    def popen(
        self, args: Sequence[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        # Default signal handlers: a shell's background job would inherit SIGINT as ignored.
        return subprocess.Popen(
            [self.python, *args],
            cwd=self.tmp_path,
            env=self.env(env),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def probe_sweep(self, marks: Path, *args: str) -> list[str]:
        """The command line of a probe app sweep."""
        return [str(PROBE), "--multirun", f"marks={marks}", *args]

    def run(
        self, args: Sequence[str], env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        proc = self.popen(args, env)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            pytest.fail(f"{args} timed out after {timeout}s:\n{out}")
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def read_records(marks: Path) -> list[dict]:
    """What each probe job recorded, by job number."""
    lines = (marks / "records.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["num"])


@pytest.fixture
def app_launcher(
    runner: Runner, tmp_path: Path, hydra_restore_singletons: None
) -> Iterator[Callable[..., Any]]:
    """Our launcher in this process, set up for an app as a sweeper would have it (sweep dir
    tmp_path/sweep, the runner's tag in every job's environment)."""

    def make(conf_dir: Path, config_name: str, task: Callable, *overrides: str) -> Any:
        GlobalHydra.instance().clear()
        hydra = Hydra.create_main_hydra2(
            task_name=config_name, config_search_path=create_config_search_path(str(conf_dir))
        )
        cfg = hydra.compose_config(
            config_name,
            overrides=[
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                f"+hydra.launcher.env.HPS_TEST_TAG={runner.tag}",
                *overrides,
            ],
            run_mode=RunMode.MULTIRUN,
        )
        HydraConfig.instance().set_config(cfg)
        return Plugins.instance().instantiate_launcher(
            hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=Callbacks(cfg)),
            task_function=task,
            config=cfg,
        )

    yield make
    GlobalHydra.instance().clear()


@pytest.fixture
def launch_app(app_launcher: Callable[..., Any], marks: Path) -> Callable[..., list[JobReturn]]:
    """Run our launcher in this process on an app's jobs, as a sweeper would; hand back the
    JobReturns. Each job's overrides are what a sweeper hands over; `marks=` is added."""

    def launch(
        conf_dir: Path, config_name: str, task: Callable, jobs: list[list[str]], *overrides: str
    ) -> list[JobReturn]:
        launcher = app_launcher(conf_dir, config_name, task, *overrides)
        batch = [[*job, f"marks={marks}"] for job in jobs]
        return list(launcher.launch(batch, initial_job_idx=0))

    return launch


@pytest.fixture
def make_cfg(hydra_restore_singletons: None) -> Callable[..., DictConfig]:
    """Compose hpsearch's config (conf/) with overrides, as `python -m hpsearch` would."""

    def make(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=CONFIG_DIR, **VERSION_BASE):
            return compose("config", overrides=list(overrides))

    return make


@pytest.fixture
def train_cfg(make_cfg: Callable[..., DictConfig]) -> Callable[..., DictConfig]:
    """A config for quick training tests: CPU, two epochs, then the given overrides."""
    return lambda *overrides: make_cfg("device=cpu", "epochs=2", *overrides)


def assert_one_pruning_story(rows: Any, console: str, cwd: Path) -> None:
    """Each pruned row (a results.csv DataFrame's) tells what the console and the job's
    reports file tell: the step the decision was made on (`pruned_step`, the console's
    `pruned at step P`), the step it stopped at (`last_step`, the last line of its
    reports.jsonl, the end of its curve), and its stop request is gone from its run dir."""
    pruned = rows[rows["status"] == "pruned"]
    assert len(pruned), rows
    for row in pruned.to_dict("records"):
        run_dir = cwd / row["run_dir"]
        curve = [json.loads(line) for line in (run_dir / "reports.jsonl").read_text().splitlines()]
        step, stopped = int(row["pruned_step"]), int(row["last_step"])
        assert stopped == curve[-1]["step"] and row["last_value"] == curve[-1]["value"], row
        assert step in [c["step"] for c in curve] and step <= stopped, row
        said = f"pruned at step {step} (reported "
        assert row["error"].startswith(said), row
        assert row["error"].endswith(f", stopped at step {stopped}" if stopped > step else ")")
        decided = [ln for ln in console.splitlines() if f"job {row['job']} pruned" in ln]
        assert len(decided) == 1 and said in decided[0], decided
        assert f"job {row['job']} ended" in console and row["error"] in console
        assert not (run_dir / ".hpsearch-stop").exists()


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """The probe's directory for start/end marks and records."""
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    r = Runner(tmp_path)
    yield r
    # Processes end as their sweep does, but a loaded machine lets them linger seconds (Ray's
    # idle workers most): a bound for a leak, not a speed; it costs nothing when none is left.
    left = wait_no_tagged(r.tag, within=30)
    described = [describe(p) for p in left]  # before the kill: a zombie has no command line
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {described}"


def describe(proc: psutil.Process) -> str:
    try:
        return f"{proc.pid}: {' '.join(proc.cmdline())}"
    except psutil.Error as err:
        return f"{proc.pid}: {type(err).__name__}"
