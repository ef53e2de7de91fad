"""How a job's process is started, watched and ended. The plan never looks inside.

The interface is `Backend.start(spec, env) -> JobHandle`: a warm-start backend (a slot's next
process prepared ahead) or a Ray backend implements the same two classes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

import cloudpickle
import psutil

from ._child import run_job_in_child

EXIT_GRACE_S = 10.0  # how long a finished job's process may take to exit before it is killed


@dataclass(frozen=True)
class JobSpec:
    """What a process needs to run one job: the pickled Hydra job and its log files."""

    payload: bytes
    stdout_path: str
    stderr_path: str


class JobHandle(Protocol):
    future: Future[Any]

    def exit_reason(self) -> str: ...

    def close(self) -> None: ...


class Backend(Protocol):
    def start(self, spec: JobSpec, env: dict[str, str]) -> JobHandle: ...

    def end(self, handles: Sequence[JobHandle], grace: float) -> None: ...


def pack_job(
    hydra_context: Any, sweep_config: Any, task_function: Any, singleton_state: Any
) -> bytes:
    # cloudpickle: the task function may be a closure (Hydra's own tests use local functions).
    return cloudpickle.dumps((hydra_context, sweep_config, task_function, singleton_state))


class LokyHandle:
    """One single-use loky executor with one worker: one job, one fresh process."""

    def __init__(self, spec: JobSpec, env: dict[str, str]) -> None:
        import loky

        # The environment is applied when the worker is exec'd, before it imports anything:
        # the only reliable moment for CUDA_VISIBLE_DEVICES and friends. It is per executor,
        # hence an executor per job (loky's reusable executor would reuse a worker).
        self._executor = loky.ProcessPoolExecutor(max_workers=1, env=env)
        self.future = self._executor.submit(
            run_job_in_child, spec.payload, spec.stdout_path, spec.stderr_path, os.getpid()
        )
        # submit() spawned the worker; keep the Process to read its exit code after loky drops it.
        (self.process,) = self._executor._processes.values()

    def descendants(self) -> list[psutil.Process]:
        try:
            return list(psutil.Process(self.process.pid).children(recursive=True))
        except psutil.Error:
            return []

    def exit_reason(self) -> str:
        self.process.join(timeout=EXIT_GRACE_S)
        return describe_exit(self.process.exitcode)

    def close(self) -> None:
        """Let the worker exit (or end it), then release loky's threads and queues."""
        self._executor.shutdown(wait=False)
        self.process.join(timeout=EXIT_GRACE_S)
        if self.process.is_alive():
            LokyBackend().end([self], grace=1.0)
        self._executor.shutdown(wait=True, kill_workers=True)


class LokyBackend:
    def start(self, spec: JobSpec, env: dict[str, str]) -> LokyHandle:
        return LokyHandle(spec, env)

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        """SIGTERM each job's process tree, wait up to `grace` s, then SIGKILL what is left.

        Jobs run in their own process group (see _child): signalling the group reaches
        descendants that psutil no longer sees as children (daemonised ones). The worker itself
        is waited for through its Process object, never psutil: reaping it behind
        multiprocessing's back would lose its exit code.
        """
        loky_handles = [h for h in handles if isinstance(h, LokyHandle)]
        trees = [(h, h.descendants()) for h in loky_handles]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
            for handle, descendants in trees:
                _signal_tree(handle.process.pid, descendants, sig)
            for handle, descendants in trees:
                handle.process.join(timeout=max(0.0, deadline - time.monotonic()))
                psutil.wait_procs(descendants, timeout=max(0.0, deadline - time.monotonic()))
            trees = [
                (h, [p for p in d if p.is_running()])
                for h, d in trees
                if h.process.is_alive() or any(p.is_running() for p in d)
            ]
            if not trees:
                return


def describe_exit(code: int | None) -> str:
    """A process's exit code in words, naming the likely cause of the common signals."""
    if code is None:
        return "process did not exit"
    if code >= 0:
        return f"process exited with status {code}"
    sig = signal.Signals(-code)
    hint = {
        signal.SIGKILL: " (killed: the OOM killer, a timeout or a user)",
        signal.SIGSEGV: " (segmentation fault)",
        signal.SIGABRT: " (aborted)",
        signal.SIGBUS: " (bus error)",
    }.get(sig, "")
    return f"process killed by {sig.name}{hint}"


def _signal_tree(pid: int, descendants: Sequence[psutil.Process], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:  # the job left the sweep's group: its group is its own
            os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    for proc in descendants:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)
