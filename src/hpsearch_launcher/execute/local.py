"""The local backend: each job in a fresh process on this machine, created with its
environment fixed (the only moment CUDA, TensorFlow, JAX and PyTorch read it), used once.

Warm start: a *spare* is such a process made ahead of need, for one environment (one slot's:
its GPU, memory cap, threads), that has already imported Python, Hydra, the task's module and
the `preload` modules (`auto`: those the jobs were seen to import, execute.spare), and waits,
touching no GPU, for its one job. A job whose environment matches a spare's is handed to it and
starts at once; any other job (an out-of-memory retry with the whole GPU) gets a cold process.
A spare that dies while waiting is dropped, never handed a job; one still importing a module
no spare has yet imported in time is not handed one either (the job starts cold), and one
stuck in an import past the bound is killed and replaced. Spares nobody needs are killed: they
hold no work.

The process is owned here through `subprocess`: its pid and exit status are public, which
loky's executor does not give. Files, not pipes, carry the job in and the result out: a large
config can never block the sweep on a full pipe, and a result is read only once complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

import cloudpickle
import psutil

from ..outcome import Ending, Outcome, outcome_of
from .backend import EnvKey, JobHandle, JobSpec, env_key, last_error_line, sweep_sys_path
from .child import BOOT, MORE
from .spare import Preloads, Spare, StatusReader

KILL_WAIT_S = 5.0  # after SIGKILL, how long to wait for a process tree to be gone
MAX_SPARE_DEATHS = 3  # spares of one environment that died waiting: then no more are made
# A spare importing one module ahead longer than this (s) is killed, and the module dropped.
PRELOAD_BOUND_S = float(os.environ.get("HPSEARCH_PRELOAD_TIMEOUT", "120"))
STATUS_POLL_S = 1.0  # a job's watcher wakes so often to see whether its process has ended
log = logging.getLogger("hpsearch.launcher")


class LocalHandle:
    """One job's process: started at once, watched by a thread that resolves `outcome`."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        spec: JobSpec,
        result_path: Path,
        status: StatusReader,
        preloads: Preloads,
    ) -> None:
        self.proc = proc
        self.spec = spec
        self.result_path = result_path
        self.status = status
        self.preloads = preloads
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
        self._listen()
        code = self.proc.wait()
        try:
            outcome = self._read_outcome(code)
        except Exception as err:  # never leave the sweep waiting on a future that won't resolve
            outcome = Outcome(Ending.EXITED, code=code, detail=f"unreadable result: {err!r}")
        self.outcome.set_result(outcome)

    def _listen(self) -> None:
        """Hear what the job says it imports until its pipe closes or its process has ended
        (a forked child of the job may hold the pipe open past it)."""
        try:
            while (lines := self.status.lines(STATUS_POLL_S)) is not None:
                for line in lines:
                    self.preloads.heard(line)
                if not lines and self.proc.poll() is not None:
                    break
        except Exception as err:  # what it imported is a hint: never lose the job's outcome
            log.debug("hpsearch: job %d's status pipe: %r", self.spec.num, err)
        finally:
            self.status.close()

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
        self, task_payload: bytes, preload: Sequence[str] | None = (), max_preparing: int = 1
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="hpsearch-"))
        self.task_file = self.dir / "task.pkl"
        self.task_file.write_bytes(task_payload)
        self.sys_path = json.dumps(sweep_sys_path())
        # None: `preload: auto`.
        self.preloads = Preloads(None if preload is None else tuple(preload))
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
            try:
                return self._hand_over(spare.proc, spare.status, message, spec, result)
            except OSError:  # it died between the check and the hand-over: a cold one instead
                self._kill(spare)
        proc, status = self._spawn(env, spec.stderr_path, [])
        return self._hand_over(proc, status, message, spec, result)

    def _hand_over(
        self,
        proc: subprocess.Popen[bytes],
        status: StatusReader,
        message: bytes,
        spec: JobSpec,
        result: Path,
    ) -> LocalHandle:
        assert proc.stdin is not None
        proc.stdin.write(message)
        proc.stdin.close()
        return LocalHandle(proc, spec, result, status, self.preloads)

    def prepare(self, wanted: Mapping[EnvKey, tuple[Mapping[str, str], int]]) -> None:
        """Keep `count` waiting spares for each environment in `wanted`, none for others:
        dead or stuck spares are dropped (and so replaced), surplus ones killed, missing ones
        made, waiting ones asked for the modules learned since they were made."""
        ready: dict[int, bool] = {}
        for key in list(self.spares):
            alive = [s for s in self.spares[key] if self._alive(s, key) and not self._stuck(s)]
            count = wanted[key][1] if key in wanted else 0
            for spare in alive[count:]:
                self._kill(spare)
            self.spares[key] = alive[:count]
            ready.update((id(s), self.preloads.read(s)) for s in self.spares[key])
        budget = self.max_preparing - sum(not r for r in ready.values())
        modules = self.preloads.modules()
        for spares in self.spares.values():
            for spare in spares:
                missing = [m for m in modules if m not in spare.has]
                if missing and (budget > 0 or not ready[id(spare)]):
                    budget -= ready[id(spare)]
                    self._ask_more(spare, missing)
        for key, (env, count) in wanted.items():
            have = self.spares.setdefault(key, [])
            if self._deaths.get(key, 0) >= MAX_SPARE_DEATHS:
                continue  # they die at start: that slot's jobs start cold, and meet the error
            while len(have) < count and budget > 0:
                budget -= 1
                self._made += 1
                path = self.dir / f"spare-{self._made}.log"
                proc, status = self._spawn(env, str(path), modules)
                have.append(Spare(proc, path, status, list(modules)))

    def _ask_more(self, spare: Spare, modules: list[str]) -> None:
        """Have a waiting spare import `modules` too (learned since it was made)."""
        assert spare.proc.stdin is not None
        try:
            spare.proc.stdin.write(f"{MORE}{json.dumps(modules)}\n".encode())
            spare.proc.stdin.flush()
        except OSError:  # it died: the next prepare drops it
            return
        spare.asked.extend(modules)
        spare.has.update(modules)
        spare.batches += 1

    def _take_spare(self, env: Mapping[str, str]) -> Spare | None:
        """A live spare for `env` that is ready, or still importing only modules some spare
        has imported in time before (not one that may hang there)."""
        key = env_key(env)
        spares = self.spares.get(key, [])
        for spare in list(spares):
            if not self._alive(spare, key):
                spares.remove(spare)
            elif self.preloads.read(spare) or not self.preloads.unproven(spare.asked):
                spares.remove(spare)
                return spare
        return None

    def _alive(self, spare: Spare, key: EnvKey) -> bool:
        code = spare.proc.poll()
        if code is None:
            return True
        self._deaths[key] = self._deaths.get(key, 0) + 1
        how = f"exit status {code}" if code >= 0 else f"signal {-code}"
        if spare.importing is not None:  # it died importing a module ahead: that one goes
            self.preloads.drop(spare.importing[0], f"a waiting process died importing it ({how})")
        log.warning(
            "hpsearch: a spare process (pid %d) died while waiting for a job (%s); "
            "it is replaced, and no job was given to it: see %s",
            spare.proc.pid,
            how,
            spare.log,
        )
        spare.status.close()
        return False

    def _stuck(self, spare: Spare) -> bool:
        """Whether it has been importing one module ahead past the bound: then it is killed,
        and the module dropped (its jobs start without it)."""
        if spare.importing is None or time.monotonic() - spare.importing[1] < PRELOAD_BOUND_S:
            return False
        self.preloads.drop(
            spare.importing[0],
            f"a waiting process was still importing it after {PRELOAD_BOUND_S:g} s "
            "(HPSEARCH_PRELOAD_TIMEOUT), and was killed",
        )
        self._kill(spare)
        return True

    def _kill(self, spare: Spare) -> None:
        """A spare has no job to lose: killed at once, its whole group."""
        spare.status.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(spare.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spare.proc.wait(timeout=KILL_WAIT_S)
        if spare.proc.stdin is not None:
            spare.proc.stdin.close()

    def _spawn(
        self, env: Mapping[str, str], early_log: str, preload: list[str]
    ) -> tuple[subprocess.Popen[bytes], StatusReader]:
        read_end, write_end = os.pipe()
        args = [self.sys_path, str(self.task_file), early_log, json.dumps(preload), str(write_end)]
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", BOOT, *args],
                pass_fds=(write_end,),
                env={**os.environ, **env},
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: ended as a tree, Ctrl-C spared
                close_fds=True,
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return proc, StatusReader(read_end)

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
