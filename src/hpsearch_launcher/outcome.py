"""How a job ended, in types every part of the launcher shares: what the job's process hands
back (`TaskResult`), how an attempt ended (`Outcome`), and the status words results.csv uses.

Neutral ground: it imports nothing from plan, execute or record, and they all import it. The
reason text is derived from an outcome, never parsed back out of it.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hydra.core.utils import JobReturn


class TaskEnd(enum.Enum):
    """What the job's own process saw of its task: its word, carried across the process line
    in a `TaskResult`. `Ending` is the sweep's, which alone knows the ends a job's process
    cannot tell (timed out, pruned, interrupted, lost, out of memory); kept apart, a job's
    process can only ever claim the four below, and `outcome_of` maps them."""

    RETURNED = "returned"  # run_job returned: the JobReturn holds the value
    RAISED = "raised"  # the task raised: the JobReturn holds a picklable error
    EXITED = "exited"  # the task called sys.exit: `code`, and its message if any
    UNREACHABLE = "unreachable"  # the job's node cannot reach the sweep dir (Ray): not run


@dataclass(frozen=True)
class TaskResult:
    """What the job's process writes back for the sweep (pickled)."""

    end: TaskEnd
    job_return: Any = None  # hydra's JobReturn, for RETURNED and RAISED
    code: int | None = None  # EXITED: the exit status
    detail: str = ""  # RAISED: "Type: message"; EXITED: sys.exit's text; RETURNED: a note

    @classmethod
    def from_bytes(cls, data: bytes) -> TaskResult:
        """A result as execute.job.child's `result_bytes` pickled it; TypeError for anything
        else."""
        import cloudpickle  # not at import: the plugin scan imports this module

        result = cloudpickle.loads(data)
        if not isinstance(result, cls):
            raise TypeError(f"a job's result should be a TaskResult, not {type(result).__name__}")
        return result


def _kept_pickled(name: str) -> property:
    """A JobReturn field that stays pickled until it is first read."""

    def read(ret: JobReturn) -> Any:
        value = ret.__dict__.get(name)
        if isinstance(value, _Pickled):
            import cloudpickle

            value = ret.__dict__[name] = cloudpickle.loads(value.data)
        return value

    def write(ret: JobReturn, value: Any) -> None:
        ret.__dict__[name] = value

    return property(read, write)


@dataclass(frozen=True)
class _Pickled:
    data: bytes


class PackedJobReturn(JobReturn):
    """Hydra's JobReturn as a job's process sends it back: its two configs, most of it and a
    third of the sweep's CPU per job to unpickle (~4 ms), stay pickled until read (the
    sweepers read the return value; Hydra's launcher tests and callbacks may read them)."""

    cfg = _kept_pickled("cfg")
    hydra_cfg = _kept_pickled("hydra_cfg")

    @classmethod
    def pack(cls, ret: JobReturn) -> PackedJobReturn:
        import cloudpickle

        packed = cls.__new__(cls)
        packed.__dict__.update(vars(ret))
        for name in ("cfg", "hydra_cfg"):
            packed.__dict__[name] = _Pickled(cloudpickle.dumps(getattr(ret, name)))
        return packed


class Ending(enum.Enum):
    RETURNED = "returned"  # the task returned (JobReturn COMPLETED)
    RAISED = "raised"  # the task raised (JobReturn FAILED)
    EXITED = "exited"  # the process exited with a status (sys.exit, os._exit) and no return
    KILLED = "killed"  # the process was killed by a signal nobody in the sweep sent
    TIMED_OUT = "timed out"  # past hydra.launcher.timeout: the sweep ended its process tree
    INTERRUPTED = "interrupted"  # the sweep was stopped (Ctrl-C, SIGTERM) and ended it
    PRUNED = "pruned"  # its reported curve was hopeless: the sweep ended it, freeing its slot
    NOT_STARTED = "not started"  # its process could not be created
    CRASHED = "crashed"  # its process died and nobody knows how (Ray does not say)
    LOST = "node lost"  # the machine it ran on left the cluster: not the job's doing
    # The cluster's scheduler (SLURM) ended it at its own time limit, or took its place back
    # (preempted, requeued): run again up to the backend's requeue limit (max_num_timeout).
    TIME_LIMIT = "time limit"
    PREEMPTED = "preempted"


@dataclass(frozen=True)
class Outcome:
    """How one attempt of a job ended."""

    ending: Ending
    job_return: Any = None  # hydra's JobReturn, for RETURNED and RAISED
    code: int | None = None  # the exit status (EXITED) or the signal number (KILLED)
    detail: str = ""  # RAISED: "Type: message"; EXITED: sys.exit's message; else the cause
    last_error: str = ""  # the last error line the job printed, when it returned nothing
    placement: str = ""  # where it ran, when the backend chose (Ray: "0@10.0.0.5/3f2a9c1b")
    # The processes it left running when its process ended, each as a log line names it: they
    # were ended with it (execute.local.leftovers). None: its backend does not look (Ray).
    leftovers: tuple[str, ...] | None = None
    # KILLED by SIGKILL: whether the kernel's OOM killer killed a process meanwhile (its
    # oom_kill count rose while the job ran); None: it cannot say.
    oom_killer: bool | None = None

    @property
    def ok(self) -> bool:
        return self.ending is Ending.RETURNED

    @property
    def finished(self) -> bool:
        """It ended as the sweep wanted (returned, or pruned): not a failure."""
        return self.ending in (Ending.RETURNED, Ending.PRUNED)

    @property
    def reason(self) -> str:
        """The outcome in words, as the console and results.csv show it ("" when ok)."""
        if self.ending is Ending.RETURNED:
            return ""
        if self.ending is Ending.RAISED:
            return self.detail
        if self.ending is Ending.EXITED:
            text = f"exited with status {self.code}"
        elif self.ending is Ending.KILLED:
            text = f"killed by {_signal_name(self.code)}{self._hint()}"
        else:
            text = self.detail
        if self.ending is Ending.EXITED and self.detail:
            text += f": {self.detail}"
        elif self.last_error and self.ending in (Ending.EXITED, Ending.KILLED, Ending.CRASHED):
            text += f": {self.last_error}"
        return text

    def _hint(self) -> str:
        if self.code == signal.SIGKILL and self.oom_killer is not None:
            return _KILLERS[self.oom_killer]
        return _SIGNAL_HINTS.get(self.code or 0, "")


_KILLERS = {  # a SIGKILL's sender, by whether the kernel's OOM killer struck meanwhile
    True: " (the OOM killer)",
    False: " (not the OOM killer, which killed nothing meanwhile: a user or a program)",
}
_SIGNAL_HINTS: dict[int, str] = {
    signal.SIGKILL: " (the OOM killer, or a user)",
    signal.SIGSEGV: " (segmentation fault)",
    signal.SIGABRT: " (aborted)",
    signal.SIGBUS: " (bus error)",
}


def _signal_name(signum: int | None) -> str:
    try:
        return signal.Signals(signum or 0).name
    except ValueError:
        return f"signal {signum}"


def outcome_of(result: TaskResult, last_error: Callable[[], str], placement: str = "") -> Outcome:
    """The Outcome of what a job's process handed back. `last_error` reads the job's stderr,
    only when needed."""
    if result.end is TaskEnd.RETURNED:
        return Outcome(
            Ending.RETURNED, job_return=result.job_return, detail=result.detail, placement=placement
        )
    if result.end is TaskEnd.RAISED:
        return Outcome(
            Ending.RAISED, job_return=result.job_return, detail=result.detail, placement=placement
        )
    if result.end is TaskEnd.UNREACHABLE:
        return Outcome(Ending.NOT_STARTED, detail=result.detail, placement=placement)
    return Outcome(
        Ending.EXITED,
        code=result.code,
        detail=result.detail,
        last_error=last_error(),
        placement=placement,
    )


class Status(str, enum.Enum):
    """A job's status in results.csv (the words are the file's)."""

    COMPLETED = "completed"
    # Finished in an earlier run of the sweep, not run again: what a source is told of such a
    # job; its row keeps the status it had (results.csv files of earlier versions say this).
    RESUMED = "resumed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    SUPERSEDED = "superseded"  # an earlier run's unfinished job, run again by a later one
    PRUNED = "pruned"  # stopped early by the sweep's pruner: it ended, not failed


STATUSES = tuple(s.value for s in Status)
DONE = (Status.COMPLETED.value, Status.RESUMED.value)  # ran to the end: ranked by the objective
# Ended for good: resume runs none of these again (a pruned job was judged, not cut short).
FINAL = (*DONE, Status.PRUNED.value)
SUPERSEDED = Status.SUPERSEDED.value

_STATUS_OF = {
    Ending.RETURNED: Status.COMPLETED,
    Ending.TIMED_OUT: Status.TIMEOUT,
    Ending.TIME_LIMIT: Status.TIMEOUT,
    Ending.INTERRUPTED: Status.INTERRUPTED,
    Ending.PRUNED: Status.PRUNED,
}


def status_of(outcome: Outcome) -> Status:
    return _STATUS_OF.get(outcome.ending, Status.FAILED)
