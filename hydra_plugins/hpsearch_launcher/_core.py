"""launch(): plan the sweep, run each job in its own process on its slot, collect JobReturns.

Data flows one way: settings -> plan (devices, slots, names, environments) -> processes ->
JobReturns in input order. Every job's config is composed here, in the parent, before the
first process starts, so a bad override fails the sweep before any GPU time is spent.
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hpsearch import gpu_env

from ._child import ChildFailure
from ._naming import (
    HYDRA_DEFAULT_SUBDIR,
    claim_run_dir,
    run_dir_name,
    split_override,
    varying_keys,
)
from ._plan import CPU, SlotPool, default_cpu_count, job_env, slots_per_device, sweep_devices
from ._process import Backend, JobHandle, JobSpec, LokyBackend, pack_job
from ._settings import LauncherSettings, parse_settings

log = logging.getLogger("hpsearch.launcher")

INTERRUPT_GRACE_S = 5.0  # SIGTERM -> SIGKILL for running jobs when the sweep is interrupted
POLL_S = 0.5


class JobFailed(CompactHydraException):
    """A job that did not return: its process died or timed out."""


class JobConfigError(CompactHydraException):
    """A job's config failed the task's preflight check: raised before any job starts."""


class SweepInterrupted(BaseException):
    """SIGINT or SIGTERM reached the sweep process."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Job:
    index: int  # position in this launch() call's input
    num: int  # hydra.job.num
    overrides: list[str]
    config: DictConfig  # the composed sweep config: hydra node included
    label: str  # the run's name, shown on the console
    device: str = ""
    handle: JobHandle | None = None
    started: float = 0.0
    deadline: float | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return Path(self.config.hydra.sweep.dir) / str(self.config.hydra.sweep.subdir)


def launch(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[JobReturn]:
    setup_globals()
    config: DictConfig = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    settings = parse_settings(launcher.params)
    devices = sweep_devices(settings, os.environ, gpu_env.nvml_gpu_ids)
    slots = slots_per_device(settings, devices)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    jobs = _compose_jobs(launcher, job_overrides, initial_job_idx, sweep_dir)
    where = "CPU" if devices == (CPU,) else f"GPU {','.join(devices)}"
    log.info(
        "hpsearch: %d jobs on %s, %d at a time per %s; sweep dir %s",
        len(jobs),
        where,
        slots,
        "CPU" if devices == (CPU,) else "GPU",
        sweep_dir,
    )
    sweep = _Sweep(
        jobs,
        settings,
        devices,
        slots,
        LokyBackend(),
        singleton_state=Singleton.get_state(),
        launcher=launcher,
    )
    return sweep.run()


def _compose_jobs(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, sweep_dir: Path
) -> list[Job]:
    config: DictConfig = launcher.config
    name_runs = _subdir_is_default(config)
    keys = varying_keys(job_overrides, _swept_keys(config)) if name_runs else set()
    jobs = []
    for index, overrides in enumerate(job_overrides):
        num = initial_job_idx + index
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(
            config, list(overrides)
        )
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{num}"
            sweep_config.hydra.job.num = num
        if name_runs:
            name = claim_run_dir(sweep_dir, run_dir_name(overrides, keys, num))
            with read_write(sweep_config.hydra):
                sweep_config.hydra.sweep.subdir = name
        HydraConfig.instance().set_config(sweep_config)  # lets hydra.* interpolations resolve
        label = str(sweep_config.hydra.sweep.subdir)
        _preflight(launcher.task_function, sweep_config, f"job {num} ({label})")
        jobs.append(Job(index, num, list(overrides), sweep_config, label))
    return jobs


def _preflight(task_function: Any, sweep_config: DictConfig, job: str) -> None:
    """The task's own checks (a `preflight` attribute of the task function), run here so a
    bad value anywhere in the sweep stops it before the first job starts."""
    check = getattr(task_function, "preflight", None)
    if check is None:
        return
    try:
        check(sweep_config)
    except ValueError as err:
        raise JobConfigError(f"{job}: {err}") from None


def _subdir_is_default(config: DictConfig) -> bool:
    """Name runs from their overrides unless the user chose hydra.sweep.subdir."""
    on_command_line = any(
        split_override(o)[0] == "hydra.sweep.subdir"
        for o in _raw_list(config.hydra.overrides.hydra)
    )
    raw = OmegaConf.to_container(config.hydra.sweep, resolve=False)
    return (
        not on_command_line and isinstance(raw, dict) and raw.get("subdir") == HYDRA_DEFAULT_SUBDIR
    )


def _raw_list(node: Any) -> list[str]:
    """A list of override strings as typed: iterating the ListConfig would resolve `${...}`."""
    items = OmegaConf.to_container(node, resolve=False)
    assert isinstance(items, list)
    return [str(item) for item in items]


def _swept_keys(config: DictConfig) -> list[str]:
    """Keys the sweep varies: sweep syntax on the command line, or the sweeper's params."""
    parsed = OverridesParser.create().parse_overrides(_raw_list(config.hydra.overrides.task))
    keys = [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]
    params = OmegaConf.select(config, "hydra.sweeper.params")
    return keys + ([str(k) for k in params] if isinstance(params, DictConfig) else [])


class _Sweep:
    """The scheduling loop: start jobs on free slots, watch them, collect their returns."""

    def __init__(
        self,
        jobs: list[Job],
        settings: LauncherSettings,
        devices: Sequence[str],
        slots: int,
        backend: Backend,
        singleton_state: Any,
        launcher: Any,
    ) -> None:
        self.queue = deque(jobs)
        self.running: dict[Future_, Job] = {}
        self.returns: list[JobReturn | None] = [None] * len(jobs)
        self.settings = settings
        self.pool = SlotPool(devices, slots)
        self.backend = backend
        self.singleton_state = singleton_state
        self.launcher = launcher
        self.memory_total = {d: gpu_env.nvml_total_mb(d) for d in devices if d != CPU}
        self.cpu_count = default_cpu_count()

    def run(self) -> list[JobReturn]:
        try:
            with _signals_raise_interrupt():
                while self.queue or self.running:
                    while self.queue and self.pool.has_free():
                        self._start(self.queue.popleft())
                    self._wait()
        except SweepInterrupted as interrupt:
            self._stop(interrupt)
        returns = [r for r in self.returns if r is not None]
        assert len(returns) == len(self.returns)
        return returns

    def _start(self, job: Job) -> None:
        job.device = self.pool.acquire()
        job.env = job_env(
            job.device,
            self.settings,
            self.pool.slots,
            os.getpid(),
            self.memory_total.get(job.device),
            self.cpu_count,
        )
        job.run_dir.mkdir(parents=True, exist_ok=True)
        payload = pack_job(
            self.launcher.hydra_context,
            job.config,
            self.launcher.task_function,
            self.singleton_state,
        )
        spec = JobSpec(payload, str(job.run_dir / "stdout.log"), str(job.run_dir / "stderr.log"))
        job.started = time.monotonic()
        job.deadline = (
            None if self.settings.timeout is None else (job.started + self.settings.timeout)
        )
        job.handle = self.backend.start(spec, job.env)
        self.running[job.handle.future] = job
        log.info("job %d start  %s  %s", job.num, _device_label(job.device), job.label)

    def _wait(self) -> None:
        now = time.monotonic()
        deadlines = [j.deadline for j in self.running.values() if j.deadline is not None]
        timeout = min([POLL_S, *(max(0.0, d - now) for d in deadlines)])
        done, _ = concurrent.futures.wait(
            list(self.running), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        # In start order: jobs that end in the same poll free their slots in round-robin order.
        for future in sorted(done, key=lambda f: self.running[f].index):
            self._finish(self.running.pop(future))
        now = time.monotonic()
        for future, job in list(self.running.items()):
            if job.deadline is not None and now >= job.deadline:
                del self.running[future]
                assert job.handle is not None
                self.backend.end([job.handle], grace=INTERRUPT_GRACE_S)
                self._finish(
                    job,
                    failure=f"timed out after {self.settings.timeout:g}s "
                    "(hydra.launcher.timeout); its process tree was killed",
                )

    def _finish(self, job: Job, failure: str | None = None) -> None:
        assert job.handle is not None
        if failure is None:
            failure, ret = _outcome(job)
        else:
            ret = None
        job.handle.close()
        self.pool.release(job.device)
        seconds = time.monotonic() - job.started
        if ret is None:
            ret = _failed_return(
                job,
                f"job {job.num} ({job.label}) on "
                f"{_device_label(job.device)}: {failure}; logs in {job.run_dir}",
            )
        self.returns[job.index] = ret
        if ret.status == JobStatus.COMPLETED:
            log.info(
                "job %d done   %s  %s  %.1fs  -> %s",
                job.num,
                _device_label(job.device),
                job.label,
                seconds,
                _short(ret._return_value),
            )
        else:
            log.error(
                "job %d FAILED %s  %s  %.1fs: %s",
                job.num,
                _device_label(job.device),
                job.label,
                seconds,
                failure or _short(ret._return_value),
            )

    def _stop(self, interrupt: SweepInterrupted) -> None:
        """No new job starts; running jobs' process trees end; then the sweep exits."""
        log.error(
            "hpsearch: %s: stopping %d running jobs, %d never started",
            interrupt,
            len(self.running),
            len(self.queue),
        )
        handles = [job.handle for job in self.running.values() if job.handle is not None]
        self.backend.end(handles, grace=INTERRUPT_GRACE_S)
        for job in self.running.values():
            assert job.handle is not None
            job.handle.close()
        raise SystemExit(128 + interrupt.signum)


Future_ = concurrent.futures.Future


def _outcome(job: Job) -> tuple[str | None, JobReturn | None]:
    """The job's JobReturn if its process returned one, else why it failed."""
    assert job.handle is not None
    try:
        result = job.handle.future.result()
    except Exception as err:  # the process died (loky: TerminatedWorkerError) or could not start
        return f"{job.handle.exit_reason()} ({type(err).__name__})", None
    if isinstance(result, ChildFailure):
        return result.reason, None
    return None, result


def _failed_return(job: Job, message: str) -> JobReturn:
    task_cfg = copy.deepcopy(job.config)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]
    ret = JobReturn(
        overrides=job.overrides,
        cfg=task_cfg,
        hydra_cfg=OmegaConf.create({"hydra": job.config.hydra}),
        working_dir=str(job.run_dir),
        task_name=str(job.config.hydra.job.name),
        status=JobStatus.FAILED,
    )
    ret._return_value = JobFailed(message)
    return ret


def _device_label(device: str) -> str:
    return "cpu" if device == CPU else f"gpu {device}"


def _short(value: Any) -> str:
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


@contextmanager
def _signals_raise_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM become SweepInterrupted in the scheduling loop (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SweepInterrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
