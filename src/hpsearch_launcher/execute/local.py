"""The local backend: each job in a fresh process on this machine, created with its
environment fixed (the only moment CUDA, TensorFlow, JAX and PyTorch read it), used once.

Warm start: a *spare* is such a process made ahead of need, for one environment (one slot's:
its GPU, memory cap, threads), that has already imported Python, Hydra, the task's module and
the `preload` modules, and waits, touching no GPU, for its one job. A job whose environment
matches a spare's is handed to it and starts at once; any other job (an out-of-memory retry
with the whole GPU) gets a cold process. A spare that dies while waiting is dropped, never
handed a job. Spares nobody needs are killed: they hold no work.

The process is owned here through `subprocess`: its pid and exit status are public, which
loky's executor does not give. Files, not pipes, carry the job in and the result out: a large
config can never block the sweep on a full pipe, and a result is read only once complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import psutil

from ..outcome import Ending, Outcome, outcome_of
from .backend import EnvKey, JobHandle, JobSpec, env_key, last_error_line, sweep_sys_path
from .child import BOOT

KILL_WAIT_S = 5.0  # after SIGKILL, how long to wait for a process tree to be gone
MAX_SPARE_DEATHS = 3  # spares of one environment that died waiting: then no more are made
log = logging.getLogger("hpsearch.launcher")


@dataclass
class Spare:
    proc: subprocess.Popen[bytes]
    log: Path  # what it printed while it prepared: goes first into its job's stderr.log
    ready_fd: int  # the spare writes a byte here once its imports are done
    is_ready: bool = False

    def ready(self) -> bool:
        """Whether its imports are done (it said so on its pipe); never blocks."""
        if not self.is_ready and self.ready_fd >= 0:
            readable, _, _ = select.select([self.ready_fd], [], [], 0)
            if readable:
                self.is_ready = os.read(self.ready_fd, 1) == b"r"  # b"": it died
                self.close()
        return self.is_ready

    def close(self) -> None:
        if self.ready_fd >= 0:
            os.close(self.ready_fd)
            self.ready_fd = -1


class LocalHandle:
    """One job's process: started at once, watched by a thread that resolves `outcome`."""

    def __init__(self, proc: subprocess.Popen[bytes], spec: JobSpec, result_path: Path) -> None:
        self.proc = proc
        self.spec = spec
        self.result_path = result_path
        self.outcome: Future[Outcome] = Future()
        self._started = time.monotonic()  # its process exists: it runs
        threading.Thread(target=self._watch, name=f"hpsearch-job-{spec.num}", daemon=True).start()

    def pids(self) -> list[int]:
        """The job's process and its descendants (a data loader's workers hold GPU memory too)."""
        return [self.proc.pid, *(p.pid for p in self.descendants())]

    def started_at(self) -> float:
        return self._started

    def placement(self) -> str:
        return ""  # the sweep chose its device

    def _watch(self) -> None:
        code = self.proc.wait()
        try:
            outcome = self._read_outcome(code)
        except Exception as err:  # never leave the sweep waiting on a future that won't resolve
            outcome = Outcome(Ending.EXITED, code=code, detail=f"unreadable result: {err!r}")
        self.outcome.set_result(outcome)

    def _read_outcome(self, code: int) -> Outcome:
        if self.result_path.exists():
            result = cloudpickle.loads(self.result_path.read_bytes())
            self.result_path.unlink()
            return outcome_of(result, self._err)
        if code < 0:
            return Outcome(Ending.KILLED, code=-code, last_error=self._err())
        return Outcome(Ending.EXITED, code=code, last_error=self._err())

    def _err(self) -> str:
        return last_error_line(self.log_tail())

    def log_tail(self, max_bytes: int = 64 * 1024) -> str:
        return file_tail(Path(self.spec.stderr_path), max_bytes)

    def descendants(self) -> list[psutil.Process]:
        try:
            return list(psutil.Process(self.proc.pid).children(recursive=True))
        except psutil.Error:
            return []


class LocalBackend:
    """A fresh process per job: `python -c BOOT`, its environment set at creation; with
    `prepare`, spares made ahead for the environments the next jobs will have."""

    def __init__(
        self, task_payload: bytes, preload: Sequence[str] = (), max_preparing: int = 1
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="hpsearch-"))
        self.task_file = self.dir / "task.pkl"
        self.task_file.write_bytes(task_payload)
        self.sys_path = json.dumps(sweep_sys_path())
        self.preload = json.dumps(list(preload))
        # Spares importing at once: more would slow the jobs that are still importing (the
        # first round, on a box with few cores) more than it gains.
        self.max_preparing = max_preparing
        self.spares: dict[EnvKey, list[Spare]] = {}
        self._made = 0  # spares made so far: names their logs
        self._deaths: dict[EnvKey, int] = {}  # spares that died waiting, per environment

    def start(self, spec: JobSpec, env: Mapping[str, str]) -> LocalHandle:
        stem = self.dir / f"job-{spec.num}-{spec.attempt}"
        result = stem.with_suffix(".out")
        job_file = stem.with_suffix(".pkl")
        job_file.write_bytes(
            cloudpickle.dumps(
                {
                    "config": spec.payload,  # pickled once, by the sweep: unpickled by the job
                    "stdout": spec.stdout_path,
                    "stderr": spec.stderr_path,
                    "result": str(result),
                    "subdir": spec.subdir,
                }
            )
        )
        message = f"{job_file}\n".encode()
        spare = self._take_spare(env)
        if spare is not None:
            spare.close()
            try:
                return self._hand_over(spare.proc, message, spec, result)
            except OSError:  # it died between the check and the hand-over: a cold one instead
                self._kill(spare)
        proc = self._spawn(env, spec.stderr_path, preload="[]")
        return self._hand_over(proc, message, spec, result)

    def _hand_over(
        self, proc: subprocess.Popen[bytes], message: bytes, spec: JobSpec, result: Path
    ) -> LocalHandle:
        assert proc.stdin is not None
        proc.stdin.write(message)
        proc.stdin.close()
        return LocalHandle(proc, spec, result)

    def prepare(self, wanted: Mapping[EnvKey, tuple[Mapping[str, str], int]]) -> None:
        """Keep `count` waiting spares for each environment in `wanted`, none for others:
        dead spares are dropped (and so replaced), surplus ones killed, missing ones made."""
        for key in list(self.spares):
            alive = [s for s in self.spares[key] if self._alive(s, key)]
            count = wanted[key][1] if key in wanted else 0
            for spare in alive[count:]:
                self._kill(spare)
            self.spares[key] = alive[:count]
        budget = self.max_preparing - sum(
            not s.ready() for spares in self.spares.values() for s in spares
        )
        for key, (env, count) in wanted.items():
            have = self.spares.setdefault(key, [])
            if self._deaths.get(key, 0) >= MAX_SPARE_DEATHS:
                continue  # they die at start: that slot's jobs start cold, and meet the error
            while len(have) < count and budget > 0:
                budget -= 1
                self._made += 1
                path = self.dir / f"spare-{self._made}.log"
                read_end, write_end = os.pipe()
                proc = self._spawn(env, str(path), self.preload, write_end)
                os.close(write_end)
                have.append(Spare(proc, path, read_end))

    def _take_spare(self, env: Mapping[str, str]) -> Spare | None:
        key = env_key(env)
        spares = self.spares.get(key, [])
        while spares:
            spare = spares.pop(0)
            if self._alive(spare, key):
                return spare
        return None

    def _alive(self, spare: Spare, key: EnvKey) -> bool:
        code = spare.proc.poll()
        if code is None:
            return True
        self._deaths[key] = self._deaths.get(key, 0) + 1
        log.warning(
            "hpsearch: a spare process (pid %d) died while waiting for a job (%s); "
            "it is replaced, and no job was given to it: see %s",
            spare.proc.pid,
            f"exit status {code}" if code >= 0 else f"signal {-code}",
            spare.log,
        )
        return False

    def _kill(self, spare: Spare) -> None:
        """A spare has no job to lose: killed at once, its whole group."""
        spare.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(spare.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spare.proc.wait(timeout=KILL_WAIT_S)
        if spare.proc.stdin is not None:
            spare.proc.stdin.close()

    def _spawn(
        self, env: Mapping[str, str], early_log: str, preload: str, ready_fd: int = -1
    ) -> subprocess.Popen[bytes]:
        args = [self.sys_path, str(self.task_file), early_log, preload, str(ready_fd)]
        return subprocess.Popen(
            [sys.executable, "-c", BOOT, *args],
            pass_fds=(ready_fd,) if ready_fd >= 0 else (),
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: ended as a tree, Ctrl-C spared
            close_fds=True,
        )

    def stop(self, handle: JobHandle, force: bool) -> None:
        if isinstance(handle, LocalHandle):
            sig = signal.SIGKILL if force else signal.SIGTERM
            _signal_tree(handle.proc.pid, handle.descendants(), sig)

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        end_trees([h for h in handles if isinstance(h, LocalHandle)], grace)

    def close(self) -> None:
        """Kill the spares nobody used; remove the backend's files."""
        for spares in self.spares.values():
            for spare in spares:
                self._kill(spare)
        self.spares.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def end_trees(handles: Sequence[LocalHandle], grace: float) -> None:
    """SIGTERM each job's process tree, wait up to `grace` s, then SIGKILL what is left.

    Jobs run in their own process group: signalling the group reaches descendants that psutil
    no longer sees as children (daemonised ones), and psutil's snapshot reaches those that left
    the group. The job's own process is waited for through Popen, which keeps its exit status.
    """
    trees = [(h, h.descendants()) for h in handles]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else KILL_WAIT_S)
        for handle, descendants in trees:
            _signal_tree(handle.proc.pid, descendants, sig)
        for handle, descendants in trees:
            with contextlib.suppress(subprocess.TimeoutExpired):
                handle.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            psutil.wait_procs(descendants, timeout=max(0.0, deadline - time.monotonic()))
        trees = [
            (h, [p for p in d if p.is_running()])
            for h, d in trees
            if h.proc.poll() is None or any(p.is_running() for p in d)
        ]
        if not trees:
            return


def _signal_tree(pid: int, descendants: Sequence[psutil.Process], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # its group (start_new_session made it the leader)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    for proc in descendants:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def file_tail(path: Path, max_bytes: int) -> str:
    """The last `max_bytes` of a file as text; "" if it cannot be read."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - max_bytes))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
