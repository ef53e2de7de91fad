"""The execution seam: how a job's process is started, watched and ended, behind one interface.

The scheduling loop knows only `Backend` and `JobHandle`; a backend (a cold process per job, a
warm spare per slot, a Ray task) implements them and reports each job's end as a typed
`Outcome`. The reason text is derived from the outcome, never parsed back out of it.
"""

from __future__ import annotations

import enum
import os
import re
import signal
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from ..nvml import GpuMemory


class Ending(enum.Enum):
    RETURNED = "returned"  # the task returned (JobReturn COMPLETED)
    RAISED = "raised"  # the task raised (JobReturn FAILED)
    EXITED = "exited"  # the process exited with a status (sys.exit, os._exit) and no return
    KILLED = "killed"  # the process was killed by a signal nobody in the sweep sent
    TIMED_OUT = "timed out"  # past hydra.launcher.timeout: the sweep ended its process tree
    INTERRUPTED = "interrupted"  # the sweep was stopped (Ctrl-C, SIGTERM) and ended it
    NOT_STARTED = "not started"  # its process could not be created
    CRASHED = "crashed"  # its process died and nobody knows how (Ray does not say)
    LOST = "node lost"  # the machine it ran on left the cluster: not the job's doing


@dataclass(frozen=True)
class Outcome:
    """How one attempt of a job ended."""

    ending: Ending
    job_return: Any = None  # hydra's JobReturn, for RETURNED and RAISED
    code: int | None = None  # the exit status (EXITED) or the signal number (KILLED)
    detail: str = ""  # RAISED: "Type: message"; EXITED: sys.exit's message; else the cause
    last_error: str = ""  # the last error line the job printed, when it returned nothing
    placement: str = ""  # where it ran, when the backend chose (Ray: "0@10.0.0.5/3f2a9c1b")

    @property
    def ok(self) -> bool:
        return self.ending is Ending.RETURNED

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
            text = f"killed by {_signal_name(self.code)}{_SIGNAL_HINTS.get(self.code or 0, '')}"
        else:
            text = self.detail
        if self.ending is Ending.EXITED and self.detail:
            text += f": {self.detail}"
        elif self.last_error and self.ending in (Ending.EXITED, Ending.KILLED, Ending.CRASHED):
            text += f": {self.last_error}"
        return text


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


_ERROR_LINE = re.compile(r"error|exception|fatal|abort|killed|out of memory", re.IGNORECASE)


def last_error_line(text: str) -> str:
    """The last line of a job's stderr that reads like an error (e.g. `hpsearch: error: ...`,
    or an exception's last traceback line), cut to 300 characters; "" if none."""
    for line in reversed(text.splitlines()[-200:]):
        line = line.strip()
        if line and _ERROR_LINE.search(line):
            return line if len(line) <= 300 else line[:297] + "..."
    return ""


def outcome_of(result: tuple, last_error: Callable[[], str], placement: str = "") -> Outcome:
    """The Outcome of what a job's process handed back (`_child.run_task`'s tuple):
    ("returned", JobReturn[, note]), ("raised", JobReturn, "Type: message") or
    ("exited", code, message). `last_error` reads the job's stderr, only when needed."""
    kind = result[0]
    if kind == "returned":
        note = str(result[2]) if len(result) > 2 else ""
        return Outcome(Ending.RETURNED, job_return=result[1], detail=note, placement=placement)
    if kind == "raised":
        return Outcome(Ending.RAISED, job_return=result[1], detail=result[2], placement=placement)
    return Outcome(
        Ending.EXITED,
        code=result[1],
        detail=result[2],
        last_error=last_error(),
        placement=placement,
    )


def sweep_sys_path() -> list[str]:
    """The sweep's own sys.path for a job's process (a script's directory included), its
    relative paths made absolute; entries that are not paths (setuptools' editable-install
    hooks) kept as they are."""
    return [os.path.abspath(p) if os.path.exists(p) else p for p in sys.path]


EnvKey = tuple[tuple[str, str], ...]


def env_key(env: Mapping[str, str]) -> EnvKey:
    """An environment as a dict key: a warm spare is matched to a job by it."""
    return tuple(sorted(env.items()))


@dataclass(frozen=True)
class JobSpec:
    """What a process needs to run one attempt of one job."""

    num: int  # hydra.job.num
    attempt: int  # 1 for the first run
    payload: bytes  # the pickled sweep config of the job
    stdout_path: str
    stderr_path: str
    share: float = 1.0  # the part of its device it holds: 1/jobs_per_gpu, or 1 when alone


class JobHandle(Protocol):
    """One started attempt: `outcome` resolves once its process has exited (or was ended)."""

    outcome: Future[Outcome]

    def started_at(self) -> float | None:
        """When (time.monotonic) the job began to run; None while it waits for a place."""
        ...

    def placement(self) -> str:
        """Where it runs, when the backend chose the place ("" otherwise, or not yet)."""
        ...

    def log_tail(self, max_bytes: int = 64 * 1024) -> str:
        """The end of what the job wrote to stderr."""
        ...


class Backend(Protocol):
    def start(self, spec: JobSpec, env: Mapping[str, str]) -> JobHandle:
        """Start the job in a process created with exactly `env` over the sweep's own
        environment; raise OSError (or any Exception) if it cannot be created."""
        ...

    def prepare(self, wanted: Mapping[EnvKey, tuple[Mapping[str, str], int]]) -> None:
        """Warm start: keep `count` processes made ahead, waiting, for each environment
        `wanted` names (keyed by `env_key(env)`), and none for any other. A backend that
        cannot make processes ahead does nothing."""
        ...

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        """End these jobs' process trees: SIGTERM, up to `grace` s, then SIGKILL; return when
        they are gone."""
        ...

    def close(self) -> None:
        """Release what the backend holds (temporary files, idle processes)."""
        ...


@dataclass
class Execution:
    """Where a sweep's jobs run: the backend, the slots the sweep fills, how to say it."""

    backend: Backend
    devices: tuple[str, ...]
    slots: int
    where: str  # "GPU 0,1", "the CPU", "Ray (2 nodes, 4 GPUs)"
    memory_total: dict[str, int | None]
    cores: int  # the cores one device's slots share (each job's threads: cores // slots)
    # Asks a GPU's free memory (slots wait for it); None: never asked.
    memory_query: Callable[[str, Collection[int]], GpuMemory | None] | None = None
    # The devices and slots there are now (a cluster that gained nodes); None: fixed.
    refresh: Callable[[], tuple[tuple[str, ...], int]] | None = None
