"""The local backend: each job in a fresh process on this machine, created with its
environment fixed (the only moment CUDA, TensorFlow, JAX and PyTorch read it), used once.

Warm start: a *spare* is such a process made ahead of need, for one environment (one slot's:
its GPU, memory cap, threads), that has already imported Python, Hydra, the task's module and
the `preload` modules (`auto`: those the jobs were seen to import, execute.local.spare), and waits,
touching no GPU, for its one job. A job whose environment matches a spare's is handed to it and
starts at once; any other job (an out-of-memory retry with the whole GPU) gets a cold process.
A spare that dies while waiting is dropped, never handed a job; one stuck importing a module
ahead past a bound is killed and replaced, and if it had been handed its job already, the job
gets a cold process instead (as it does when an import ahead kills its spare). A module whose
import killed a spare is dropped. Spares nobody needs are killed: they hold no work.

The process is owned here through `subprocess`: its pid and exit status are public, which
loky's executor does not give. Files, not pipes, carry the job in and the result out: a large
config can never block the sweep on a full pipe, and a result is read only once complete.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from ..backend import Ahead, JobHandle, JobSpec
from ..job.child import BOOT, LocalTicket
from ..job.wire import job_line
from ..payload import sweep_sys_path
from .fork_policy import Forking
from .fork_server import BOOT as SERVER_BOOT
from .job_process import Listeners, LocalHandle, WarmPath, end_trees, hand_over, signal_tree
from .leftovers import Leftovers
from .scratch import Scratch
from .spare import Preloads, StatusReader
from .spare_pool import SparePool, env_key, spares_for


class LocalBackend:
    """A fresh process per job: `python -c BOOT`, its environment set at creation; with
    `prepare`, spares made ahead for the environments the next jobs will have."""

    def __init__(
        self,
        task_payload: bytes,
        preload: Sequence[str] | None = (),
        max_preparing: int = 1,
        fork: bool = False,
        holds_gpu: Callable[[int], bool] = lambda pid: False,
        keep_daemons: bool = False,
    ) -> None:
        # The sweep adopts what jobs leave behind, to end it (execute.local.leftovers).
        self.leftovers = Leftovers(keep=keep_daemons)
        self.scratch = Scratch()  # removes the scratch dirs of sweeps that were killed
        self.dir = self.scratch.path
        self.task_file = self.dir / "task.pkl"
        self.task_file.write_bytes(task_payload)
        self.sys_path = json.dumps(sweep_sys_path())
        # None: `preload: auto`.
        self.preloads = Preloads(None if preload is None else tuple(preload))
        self.spares = SparePool(self.dir, self.preloads, max_preparing, self._spawn)
        self.listeners = Listeners(self.preloads, self.leftovers)
        self.forking = Forking(self.dir, self.listeners, self._spawn, fork, holds_gpu)

    def start(self, spec: JobSpec, env: Mapping[str, str]) -> LocalHandle:
        stem = self.dir / f"job-{spec.num}-{spec.attempt}"
        result = stem.with_suffix(".out")
        job_file = stem.with_suffix(".pkl")
        job_file.write_bytes(spec.ticket(LocalTicket, result=str(result)).to_bytes())
        message = job_line(str(job_file))

        def cold() -> tuple[subprocess.Popen[bytes], StatusReader]:
            proc, status = self._spawn(env, spec.stderr_path, [])
            hand_over(proc, message)
            return proc, status

        forked = self.forking.fork(spec, job_file, result, env, cold)
        if forked is not None:
            return forked
        spare = self.spares.take(env_key(env))
        if spare is not None:
            try:
                hand_over(spare.proc, message)
                warm = WarmPath(cold, spare=spare)
                return LocalHandle(spare.proc, spec, result, spare.status, self.listeners, warm)
            except OSError:  # it died between the check and the hand-over: a cold one instead
                self.spares.kill(spare)
        proc, status = cold()
        return LocalHandle(proc, spec, result, status, self.listeners)

    def warming(self, env: Mapping[str, str]) -> bool:
        """Forking: whether the fork server (made now, with `env`, if need be) still imports,
        so the next job should wait for it rather than start cold."""
        return self.forking.coming(env)

    def prepare(self, ahead: Ahead) -> None:
        """Keep a waiting spare for each busy slot, for the jobs still to start, with its
        group's next environment, none for others: dead or stuck spares are dropped (and so
        replaced), surplus ones killed, missing ones made, waiting ones asked for the modules
        learned since they were made. Forking: the server (made at the first job, `warming`)
        asked for those modules instead, while jobs are still to start."""
        self.forking.check()
        spares = spares_for(ahead)
        if self.forking.active:
            self.forking.prepare(any(count for _, count in spares.values()))
            return
        self.spares.refill(spares)

    def _spawn(
        self,
        env: Mapping[str, str],
        early_log: str,
        preload: list[str],
        control: socket.socket | None = None,
    ) -> tuple[subprocess.Popen[bytes], StatusReader]:
        """A fresh process: a job's (or a spare's), or with `control` (the server's end of its
        socket) the fork server."""
        read_end, write_end = os.pipe()
        args = [self.sys_path, str(self.task_file), early_log, json.dumps(preload), str(write_end)]
        fds = [write_end]
        if control is not None:
            args.append(str(control.fileno()))
            fds.append(control.fileno())
        try:
            proc = self.leftovers.spawn(
                lambda: subprocess.Popen(
                    [sys.executable, "-c", BOOT if control is None else SERVER_BOOT, *args],
                    pass_fds=fds,
                    env={**os.environ, **env},
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: ended as a tree, Ctrl-C spared
                    close_fds=True,
                )
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return proc, StatusReader(read_end)

    def stop(self, handle: JobHandle, force: bool) -> None:
        if isinstance(handle, LocalHandle):
            handle.ending()
            sig = signal.SIGKILL if force else signal.SIGTERM
            signal_tree(handle.proc.pid, handle.descendants(), sig)

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        ours = [h for h in handles if isinstance(h, LocalHandle)]
        for handle in ours:
            handle.ending()
        end_trees(ours, grace)

    def close(self) -> None:
        """Kill the spares nobody used, and the fork server; remove the backend's files."""
        self.forking.close()
        self.spares.close()
        self.leftovers.close()
        self.scratch.remove()
