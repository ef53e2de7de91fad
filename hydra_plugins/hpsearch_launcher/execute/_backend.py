"""The execution seam: how a job's process is started, watched and ended, behind one interface.

The scheduling loop knows only `Backend` and `JobHandle`; a backend (a cold process per job, a
warm spare per slot, a Ray task) implements them and reports each job's end as a typed
`Outcome`. The reason text is derived from the outcome, never parsed back out of it.
"""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol


class Ending(enum.Enum):
    RETURNED = "returned"  # the task returned (JobReturn COMPLETED)
    RAISED = "raised"  # the task raised (JobReturn FAILED)
    EXITED = "exited"  # the process exited with a status (sys.exit, os._exit) and no return
    KILLED = "killed"  # the process was killed by a signal nobody in the sweep sent
    TIMED_OUT = "timed out"  # past hydra.launcher.timeout: the sweep ended its process tree
    INTERRUPTED = "interrupted"  # the sweep was stopped (Ctrl-C, SIGTERM) and ended it
    NOT_STARTED = "not started"  # its process could not be created


@dataclass(frozen=True)
class Outcome:
    """How one attempt of a job ended."""

    ending: Ending
    job_return: Any = None  # hydra's JobReturn, for RETURNED and RAISED
    code: int | None = None  # the exit status (EXITED) or the signal number (KILLED)
    detail: str = ""  # RAISED: "Type: message"; EXITED: sys.exit's message; else the cause
    last_error: str = ""  # the last error line the job printed, when it returned nothing

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
        elif self.last_error and self.ending in (Ending.EXITED, Ending.KILLED):
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


class JobHandle(Protocol):
    """One started attempt: `outcome` resolves once its process has exited (or was ended)."""

    outcome: Future[Outcome]

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
