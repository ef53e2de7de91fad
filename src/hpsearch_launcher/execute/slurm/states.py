"""SLURM's job states in the sweep's terms. Pure: a state word in, a verdict or an `Outcome`
out (the watcher reads the words from squeue, scontrol or sacct)."""

from __future__ import annotations

from ...outcome import Ending, Outcome

# Waiting for a place, or about to run: nothing to record yet.
WAITING = frozenset({"PENDING", "CONFIGURING", "RESV_DEL_HOLD", "REQUEUE_FED", "SUSPENDED"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "STOPPED", "RESIZING"})
# Sent back to the queue by SLURM (preemption with PreemptMode=REQUEUE, `scontrol requeue`).
REQUEUED = frozenset({"REQUEUED", "REQUEUE_HOLD", "SPECIAL_EXIT"})

SIGNALED = 128  # an exit status above it: killed by signal (status - 128), as a shell says
_ENDS: dict[str, tuple[Ending, str]] = {
    "TIMEOUT": (Ending.TIME_LIMIT, "SLURM ended it at its time limit (TIMEOUT: timeout_min)"),
    "PREEMPTED": (Ending.PREEMPTED, "SLURM preempted it (PREEMPTED)"),
    "NODE_FAIL": (Ending.LOST, "its node failed (SLURM: NODE_FAIL)"),
    "BOOT_FAIL": (Ending.LOST, "its node did not boot (SLURM: BOOT_FAIL)"),
    "OUT_OF_MEMORY": (
        Ending.CRASHED,
        "SLURM ended it: out of memory (OUT_OF_MEMORY: past its mem_gb, or DefMemPerCPU)",
    ),
    "CANCELLED": (Ending.CRASHED, "cancelled outside the sweep (SLURM: CANCELLED, scancel)"),
    "DEADLINE": (Ending.CRASHED, "SLURM ended it at its deadline (DEADLINE)"),
    "REVOKED": (Ending.CRASHED, "SLURM revoked it (REVOKED)"),
}


def base_state(word: str) -> str:
    """`CANCELLED by 0` (sacct), `CANCELLED+` (truncated): the state's own word."""
    return word.split()[0].rstrip("+") if word.strip() else ""


def is_final(state: str) -> bool:
    """Whether SLURM is done with the job (it will not run again by itself)."""
    return bool(state) and state not in WAITING | RUNNING | REQUEUED


def outcome_of_state(state: str, exit_code: str, last_error: str, placement: str) -> Outcome:
    """The Outcome of a job SLURM ended in `state` without handing back its result (the job's
    process did not return: it was ended, or died). `exit_code` as SLURM gives it, "2:0"
    (status:signal), "" where unknown."""
    if state in _ENDS:
        ending, detail = _ENDS[state]
        return Outcome(ending, detail=detail, last_error=last_error, placement=placement)
    status, _, signum = exit_code.partition(":")
    if not (signum.isdigit() and int(signum)) and status.isdigit() and int(status) > SIGNALED:
        signum = str(int(status) - SIGNALED)  # srun's status for a process a signal killed
    if signum.isdigit() and int(signum):
        return Outcome(Ending.KILLED, code=int(signum), last_error=last_error, placement=placement)
    if status.isdigit() and int(status):
        return Outcome(Ending.EXITED, code=int(status), last_error=last_error, placement=placement)
    return Outcome(
        Ending.CRASHED,
        detail=f"its process ended without a result (SLURM: {state or 'no state'})",
        last_error=last_error,
        placement=placement,
    )


def requeued() -> Outcome:
    """A job SLURM sent back to its queue after it began (preempted, `scontrol requeue`): the
    sweep ends it there and runs it again as a new attempt, within max_num_timeout."""
    return Outcome(Ending.PREEMPTED, detail="SLURM requeued it (preempted, or scontrol requeue)")
