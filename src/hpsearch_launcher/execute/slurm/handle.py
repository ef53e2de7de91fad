"""The SLURM backend's handle on one job: its SLURM job id, when the job began (its start file
on the sweep dir), and its end as the sweep's `Outcome`: the result its process handed back
through submitit, or, where it handed none back, what SLURM's state says (states.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ...outcome import Ending, Outcome, TaskResult, outcome_of
from ..backend import JobSpec
from ..remote_handle import RemoteHandle
from . import states

# A job SLURM says is done whose result file is not there yet (a shared filesystem's lag):
# how long it may stay missing before the job counts as having handed back none.
RESULT_LAG_S = 5.0


class SlurmHandle(RemoteHandle):
    """One submitted SLURM job; `outcome` resolves once SLURM is done with it."""

    def __init__(self, job_id: str, result: Path, spec: JobSpec, started_file: Path) -> None:
        super().__init__(spec, started_file)
        self.job_id = job_id
        self.result = result  # submitit's result pickle
        self.cancelled = False  # the sweep cancelled it (stop, end)
        self._final_since: float | None = None

    def seen(self, state: str, restarts: int, exit_code: Callable[[], str]) -> None:
        """What the watcher read of the job: its SLURM state ("" once SLURM no longer knows
        it) and how often SLURM requeued it; resolves `outcome` once the job is done.
        `exit_code` asks SLURM for it."""
        if self.outcome.done():
            return
        returned = self._returned()
        if returned is not None:
            self.outcome.set_result(returned)
        elif self.cancelled and (not state or states.is_final(state)):
            self.outcome.set_result(Outcome(Ending.INTERRUPTED, detail="cancelled by the sweep"))
        elif restarts or state in states.REQUEUED:
            self.outcome.set_result(states.requeued())  # the backend cancels it
        elif not state or states.is_final(state):
            now = time.monotonic()
            self._final_since = self._final_since or now
            if now - self._final_since >= RESULT_LAG_S or state not in ("COMPLETED", ""):
                error = self.last_error()
                self.outcome.set_result(
                    states.outcome_of_state(state, exit_code(), error, self.placement())
                )

    def _returned(self) -> Outcome | None:
        """The job's own result, once submitit has written it; None before."""
        try:
            data = self.result.read_bytes()
        except OSError:
            return None
        import cloudpickle

        try:
            kind, value = cloudpickle.loads(data)
            if kind != "success":  # submitit's ("error", its traceback as text)
                lines = str(value).strip().splitlines() or ["(no traceback)"]
                return Outcome(Ending.CRASHED, detail=f"submitit: {lines[-1]}")
            where, result = value
            return outcome_of(TaskResult.from_bytes(result), self.last_error, placement=where)
        except Exception as err:  # never leave the sweep waiting on a future that won't resolve
            return Outcome(Ending.CRASHED, detail=f"unreadable result {self.result}: {err!r}")
