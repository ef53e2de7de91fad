"""The scheduling loop of one launch(): start jobs on free slots, watch them, retry what the
policy allows, record every end in results.csv, and return one JobReturn per job."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from omegaconf import OmegaConf

from hpsearch import gpu_env
from hpsearch.leaderboard import objective
from hpsearch.results_table import ResultsTable

from ._child import ChildFailure
from ._failures import is_out_of_memory, retry_kind, stderr_tail
from ._jobs import Job
from ._plan import CPU, SlotPool, default_cpu_count, device_label, job_env
from ._process import Backend, JobSpec, pack_job
from ._progress import SweepState, make_progress
from ._record import as_objective, job_row, task_config
from ._settings import WHOLE_GPU_FRACTION, LauncherSettings
from ._signals import StopRequest, stop_on_signals

log = logging.getLogger("hpsearch.launcher")

INTERRUPT_GRACE_S = 5.0  # SIGTERM -> SIGKILL for running jobs when the sweep is interrupted
POLL_S = 0.5


class JobFailed(CompactHydraException):
    """A job that did not return: its process died or timed out."""


class Sweep:
    """The scheduling loop: start jobs on free slots, watch them, collect their returns."""

    def __init__(
        self,
        jobs: list[Job],
        settings: LauncherSettings,
        devices: Sequence[str],
        slots: int,
        backend: Backend,
        table: ResultsTable,
        launcher: Any,
    ) -> None:
        self.jobs = jobs
        self.queue = deque(job for job in jobs if job.previous is None)
        self.whole_queue: list[Job] = []  # retries waiting for their device to be free
        self.running: dict[concurrent.futures.Future[Any], Job] = {}
        self.returns: list[JobReturn | None] = [None] * len(jobs)
        self.settings = settings
        self.pool = SlotPool(devices, slots)
        self.backend = backend
        self.table = table
        self.launcher = launcher
        self.singleton_state = Singleton.get_state()
        self.memory_total = {d: gpu_env.nvml_total_mb(d) for d in devices if d != CPU}
        self.cpu_count = default_cpu_count()
        self.stop = StopRequest()
        self._state = SweepState(total=len(jobs), slots=len(devices) * slots)

    def run(self) -> list[JobReturn]:
        for job in self.jobs:
            if job.previous is not None:
                self._resume(job)
        progress = make_progress(self.pool.devices)
        with stop_on_signals() as self.stop:
            while (self.queue or self.whole_queue or self.running) and not self.stop.signum:
                self._start_ready()
                self._wait()
                progress.update(self.state, event=False)
            progress.close()
            if self.stop.signum:
                self._stop()
        log.info("hpsearch: %s; results in %s", self.state.summary(), self.table.path)
        returns = [r for r in self.returns if r is not None]
        assert len(returns) == len(self.jobs)
        return returns

    @property
    def state(self) -> SweepState:
        """The counts kept as jobs end, with the queue and the running jobs read as they are."""
        self._state.queued = len(self.queue) + len(self.whole_queue)
        self._state.running = {}
        for job in self.running.values():
            self._state.running.setdefault(job.device, []).append(job.label)
        return self._state

    def _resume(self, job: Job) -> None:
        """A job that finished in an earlier run: its recorded objective, no new process."""
        assert job.previous is not None
        row = dict(job.previous, status="resumed")
        self.table.put(row, job.params)
        value = objective(row)
        self.returns[job.index] = _job_return(job, JobStatus.COMPLETED, value, row["run_dir"])
        self._state.resumed += 1
        log.info(
            "job %s resumed  %s  -> %s (finished in an earlier run)",
            row.get("job"),
            job.label,
            _short(value),
        )

    def _start_ready(self) -> None:
        """Retries that need a whole device first (its other jobs drain meanwhile), then the
        queue on the free slots."""
        for job in list(self.whole_queue):
            if not self.stop.signum and self.pool.acquire_whole(job.device):
                self.whole_queue.remove(job)
                self._start(job, job.device)
        while self.queue and self.pool.has_free() and not self.stop.signum:
            self._start(self.queue.popleft(), self.pool.acquire())

    def _start(self, job: Job, device: str) -> None:
        job.device = device
        job.attempts += 1
        job.env = job_env(
            device,
            self.settings,
            1 if job.whole else self.pool.slots,
            os.getpid(),
            self.memory_total.get(device),
            self.cpu_count,
            fraction=WHOLE_GPU_FRACTION if job.whole else None,
        )
        job.run_dir.mkdir(parents=True, exist_ok=True)
        payload = pack_job(
            self.launcher.hydra_context,
            job.config,
            self.launcher.task_function,
            self.singleton_state,
        )
        spec = JobSpec(payload, str(job.run_dir / "stdout.log"), str(job.run_dir / "stderr.log"))
        job.started, job.started_wall = time.monotonic(), time.time()
        if self.settings.timeout is not None:
            job.deadline = job.started + self.settings.timeout
        try:
            job.handle = self.backend.start(spec, job.env)
        except Exception as err:  # out of processes or file descriptors: this job fails, not all
            job.handle = None
            self._finish(job, "failed", f"could not start its process: {type(err).__name__}: {err}")
            return
        self.running[job.handle.future] = job
        alone = (
            f"  (attempt {job.attempts}, alone)"
            if job.whole
            else (f"  (attempt {job.attempts})" if job.attempts > 1 else "")
        )
        log.info("job %d start  %s  %s%s", job.num, device_label(job.device), job.label, alone)

    def _wait(self) -> None:
        now = time.monotonic()
        deadlines = [j.deadline for j in self.running.values() if j.deadline is not None]
        timeout = min([POLL_S, *(max(0.0, d - now) for d in deadlines)])
        done, _ = concurrent.futures.wait(
            list(self.running), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        self._collect(done)
        now = time.monotonic()
        for future, job in list(self.running.items()):
            if job.deadline is not None and now >= job.deadline:
                del self.running[future]
                assert job.handle is not None
                self.backend.end([job.handle], grace=INTERRUPT_GRACE_S)
                self._finish(
                    job,
                    "timeout",
                    f"timed out after {self.settings.timeout:g}s "
                    "(hydra.launcher.timeout); its process tree was killed",
                )

    def _collect(self, done: Iterable[concurrent.futures.Future[Any]]) -> None:
        """Record the jobs whose futures are done, in start order: jobs that end in the same
        poll free their slots in round-robin order."""
        for future in sorted(done, key=lambda f: self.running[f].index):
            job = self.running.pop(future)
            failure, ret = _outcome(job)
            self._finish(job, "failed" if failure else "completed", failure, ret)

    def _finish(
        self, job: Job, status: str, failure: str | None, ret: JobReturn | None = None
    ) -> None:
        if job.handle is not None:
            job.handle.close()  # the process has exited (or was ended) before its slot is reused
        self.pool.release(job.device, whole=job.whole)
        seconds = time.monotonic() - job.started
        if ret is not None and ret.status != JobStatus.COMPLETED:
            status, failure = "failed", f"{type(ret._return_value).__name__}: {ret._return_value}"
        if failure is not None and self._retry(job, status, failure):
            return
        if ret is None:
            ret = _failed_return(
                job,
                f"job {job.num} ({job.label}) on "
                f"{device_label(job.device)}: {failure}; logs in {job.run_dir}",
            )
        self.returns[job.index] = ret
        value = as_objective(ret._return_value) if status == "completed" else None
        error = "; ".join([*job.errors, *([failure] if failure else [])])
        self.table.put(
            job_row(
                num=job.num,
                status=status,
                objective=value,
                device=job.device,
                started=job.started_wall,
                ended=time.time(),
                attempts=job.attempts,
                run_dir=job.run_dir,
                config_hash=job.config_hash,
                error=error,
            ),
            job.params,
        )
        if status == "completed":
            self._state.done += 1
            self._state.durations.append(seconds)
            log.info(
                "job %d done   %s  %s  %.1fs  -> %s",
                job.num,
                device_label(job.device),
                job.label,
                seconds,
                _short(ret._return_value),
            )
        else:
            self._state.failed += 1
            log.error(
                "job %d %s %s  %s  %.1fs: %s",
                job.num,
                status.upper(),
                device_label(job.device),
                job.label,
                seconds,
                failure,
            )

    def _retry(self, job: Job, status: str, failure: str) -> bool:
        """Queue a failed job again if the policy allows: alone on its device after running
        out of memory, else as before."""
        oom = status == "failed" and is_out_of_memory(failure, stderr_tail(job.run_dir))
        job.oom_attempts += oom
        kind = retry_kind(status, oom, job.attempts, job.oom_attempts, self.settings)
        if kind is None:
            return False
        job.errors.append(f"attempt {job.attempts}: {'out of memory: ' if oom else ''}{failure}")
        job.whole = kind == "oom"
        if job.whole:
            self.whole_queue.append(job)
            log.warning(
                "job %d ran out of memory on %s: retrying alone on it with the whole memory (%s)",
                job.num,
                device_label(job.device),
                failure,
            )
        else:
            self.queue.appendleft(job)
            log.warning("job %d %s: retrying (%s)", job.num, status, failure)
        return True

    def _stop(self) -> None:
        """No new job starts; running jobs' process trees end and are recorded; then exit."""
        self._collect([f for f in self.running if f.done()])  # ended meanwhile: as usual
        log.error(
            "hpsearch: %s: stopping %d running jobs, %d never started",
            self.stop.name,
            len(self.running),
            len(self.queue) + len(self.whole_queue),
        )
        handles = [job.handle for job in self.running.values() if job.handle is not None]
        self.backend.end(handles, grace=INTERRUPT_GRACE_S)
        for job in self.running.values():
            self._finish(job, "interrupted", f"interrupted by {self.stop.name}")
        log.error("hpsearch: %s; results in %s", self.state.summary(), self.table.path)
        raise SystemExit(128 + (self.stop.signum or 0))


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


def _job_return(job: Job, status: JobStatus, value: Any, working_dir: str) -> JobReturn:
    """A JobReturn made here, for a job whose process returned none (resumed or failed)."""
    ret = JobReturn(
        overrides=job.overrides,
        cfg=task_config(job.config),
        hydra_cfg=OmegaConf.create({"hydra": job.config.hydra}),
        working_dir=working_dir,
        task_name=str(job.config.hydra.job.name),
        status=status,
    )
    ret._return_value = value
    return ret


def _failed_return(job: Job, message: str) -> JobReturn:
    # working_dir as Hydra's run_job sets it: the job's working directory.
    cwd = str(job.run_dir) if job.config.hydra.job.chdir else os.getcwd()
    return _job_return(job, JobStatus.FAILED, JobFailed(message), cwd)


def _short(value: Any) -> str:
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."
