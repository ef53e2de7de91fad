"""The SLURM backend's one watcher of all the sweep's jobs: a thread that asks squeue for
every live job at once each poll, and sacct (once it is known to answer) or scontrol for a job
squeue no longer lists. A cluster without accounting (no slurmdbd) is found out once and said
nowhere: submitit's own watcher warns "Bypassing sacct error" on every poll there."""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Sequence
from functools import partial

from .handle import SlurmHandle
from .states import base_state, is_final

log = logging.getLogger("hpsearch.launcher")

POLL_S = 0.5  # between two squeue calls (one call for all the sweep's jobs)
COMMAND_TIMEOUT_S = 30.0  # a slurmctld that does not answer: try again next poll


def run(command: Sequence[str]) -> tuple[int, str]:
    """A SLURM command's exit status and output (stderr after stdout); 1 if it hangs."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return 1, str(err)
    return done.returncode, done.stdout + done.stderr


def squeue_states(ids: Sequence[str]) -> dict[str, tuple[str, int]] | None:
    """Job id -> (state, times SLURM requeued it), for those of `ids` SLURM still holds (ended
    ones too, for a while: MinJobAge); None when squeue did not answer."""
    fields = "JobID:|,State:|,RestartCnt:|"
    code, out = run(["squeue", "-h", "--states=all", "-O", fields, "-j", ",".join(ids)])
    if code != 0:
        return {} if "Invalid job id" in out else None
    found = {}
    for line in out.splitlines():
        job_id, state, restarts, *_ = [*line.strip().split("|"), "", "", ""]
        found[job_id] = (state, int(restarts) if restarts.isdigit() else 0)
    return found


def still_queued(ids: Sequence[str]) -> list[str]:
    """Those of `ids` SLURM holds pending or running (ended ones it still lists: not)."""
    found = squeue_states(ids) or {}
    return [i for i, (state, _) in found.items() if not is_final(state)]


class Watcher:
    """Polls SLURM for the live jobs, hands each what it read (`SlurmHandle.seen`)."""

    def __init__(self) -> None:
        self.jobs: dict[str, SlurmHandle] = {}
        self.accounting: bool | None = None  # whether sacct answers here (None: not asked)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="hpsearch-slurm", daemon=True)
        self._thread.start()

    def add(self, handle: SlurmHandle) -> None:
        with self._lock:
            self.jobs[handle.job_id] = handle

    def poll_now(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=COMMAND_TIMEOUT_S)

    def _loop(self) -> None:
        while not self._closed:
            try:
                self.poll()
            except Exception:  # the sweep must keep its watcher: say it, poll again
                log.exception("hpsearch: reading SLURM's job states failed")
            self._wake.wait(POLL_S)
            self._wake.clear()

    def poll(self) -> None:
        with self._lock:
            live = {i: h for i, h in self.jobs.items() if not h.outcome.done()}
            self.jobs = live
        if not live:
            return
        found = squeue_states(list(live))
        if found is None:
            return  # slurmctld busy or away: the next poll asks again
        for job_id, handle in live.items():
            state, restarts = found.get(job_id) or (self.accounted_state(job_id), 0)
            handle.seen(state, restarts, partial(self.exit_code, job_id))

    def accounted_state(self, job_id: str) -> str:
        """A job squeue no longer lists, as sacct has it ("" without accounting)."""
        if self.accounting is False:
            return ""
        code, out = run(["sacct", "-n", "-P", "-X", "-o", "State", "-j", job_id])
        self.accounting = code == 0 and "disabled" not in out
        if not self.accounting:
            log.debug("hpsearch: sacct does not answer here (%s): squeue alone", out.strip())
            return ""
        return base_state(out.splitlines()[0]) if out.strip() else ""

    def known(self, ids: list[str]) -> set[str]:
        """Those of `ids` SLURM knows: it lists them (pending, running, or ended a short
        while ago: MinJobAge), or sacct has them where it answers. All of them while squeue
        does not answer: none can be told gone."""
        found = squeue_states(ids)
        if found is None:
            return set(ids)
        return set(found) | {i for i in ids if i not in found and self.accounted_state(i)}

    def exit_code(self, job_id: str) -> str:
        """The job's exit code as SLURM has it ("2:0": status:signal; "" if unknown)."""
        code, out = run(["scontrol", "show", "job", "-o", job_id])
        for word in out.split() if code == 0 else ():
            if word.startswith("ExitCode="):
                return word.split("=", 1)[1]
        return ""
