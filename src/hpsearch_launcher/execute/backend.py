"""The execution seam: how a job's process is started, watched and ended, behind one interface.

The scheduling loop knows only `Execution`, `Backend` and `JobHandle`; a backend (a cold process
per job, a warm spare per slot, a Ray task) implements them and reports each job's end as a
typed `Outcome` (hpsearch_launcher.outcome).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from ..nvml import GpuMemory
from ..outcome import Outcome

_ERROR_LINE = re.compile(r"error|exception|fatal|abort|killed|out of memory", re.IGNORECASE)


def last_error_line(text: str) -> str:
    """The last line of a job's stderr that reads like an error (e.g. `hpsearch: error: ...`,
    or an exception's last traceback line), cut to 300 characters; "" if none."""
    for line in reversed(text.splitlines()[-200:]):
        line = line.strip()
        if line and _ERROR_LINE.search(line):
            return line if len(line) <= 300 else line[:297] + "..."
    return ""


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
