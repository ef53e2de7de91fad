"""A backend kept whole in this file: a subprocess per job, no warm start. It is the proof of
ARCHITECTURE.md's "Adding a backend": registered through the table (`plan.backends.register`),
nothing outside this file edited to add it, with a settings section of its own
(hydra.launcher.subprocess.*), and it runs the suite every backend runs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from backend_suite import BackendSuite

from hpsearch_launcher.config import LauncherSettings
from hpsearch_launcher.execute.backend import Ahead, Execution, JobHandle, JobSpec
from hpsearch_launcher.execute.job.child import BOOT, LocalTicket
from hpsearch_launcher.execute.job.wire import job_line
from hpsearch_launcher.execute.log_tail import file_tail, last_error_line
from hpsearch_launcher.execute.payload import sweep_sys_path
from hpsearch_launcher.outcome import Ending, Outcome, TaskResult, outcome_of
from hpsearch_launcher.plan.backends import BackendEntry, Section, register, unregister
from hpsearch_launcher.plan.refusal import fail
from hpsearch_launcher.plan.settings import (
    LauncherSettingsError,
    check_setting_key,
    cpu_count,
    parse_settings,
)
from hpsearch_launcher.plan.slots import CPU, slots_per_device

NAME = "subprocess"
ENTRY_EXAMPLE = f"{NAME}.python=python3"  # a refusal's fix
KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class SubprocessSettings:
    # The interpreter that runs each job ("": the sweep's own).
    python: str = ""


def parse_subprocess(params: Mapping[str, Any]) -> SubprocessSettings:
    python = params["python"]
    if not isinstance(python, str) or (python and shutil.which(python) is None):
        raise fail(
            "subprocess.python", python, "must be a Python found on PATH, or empty", ENTRY_EXAMPLE
        )
    return SubprocessSettings(python=python)


class SubprocessHandle:
    """One job's process; a thread waits for it and reads its result file."""

    def __init__(self, proc: subprocess.Popen[bytes], spec: JobSpec, result: Path) -> None:
        self.proc, self.spec, self.result = proc, spec, result
        self.began = time.monotonic()
        self.outcome: Future[Outcome] = Future()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        code = self.proc.wait()
        try:
            if self.result.exists():
                data = TaskResult.from_bytes(self.result.read_bytes())
                outcome = outcome_of(data, self._last_error)
            elif code < 0:
                outcome = Outcome(Ending.KILLED, code=-code, last_error=self._last_error())
            else:
                outcome = Outcome(Ending.EXITED, code=code, last_error=self._last_error())
        except Exception as err:  # never leave the sweep waiting on a future that won't resolve
            outcome = Outcome(Ending.EXITED, code=code, detail=f"unreadable result: {err!r}")
        self.outcome.set_result(outcome)

    def _last_error(self) -> str:
        return last_error_line(self.log_tail())

    def started_at(self) -> float | None:
        return self.began

    def placement(self) -> str:
        return ""

    def log_tail(self, max_bytes: int = 64 * 1024) -> str:
        return file_tail(Path(self.spec.stderr_path), max_bytes)

    def pids(self) -> list[int]:
        return [self.proc.pid]


class SubprocessBackend:
    """`python -c BOOT` per job (execute/job's child), made when the job starts."""

    def __init__(self, task: bytes, python: str) -> None:
        self.python = python
        self.dir = Path(tempfile.mkdtemp(prefix="hpsearch-subprocess-"))
        self.task_file = self.dir / "task.pkl"
        self.task_file.write_bytes(task)
        self.sys_path = json.dumps(sweep_sys_path())
        # What a job says of its imports: not heard here. Open for the backend's life.
        self.status = open(os.devnull, "wb")  # noqa: SIM115

    def start(self, spec: JobSpec, env: Mapping[str, str]) -> SubprocessHandle:
        stem = self.dir / f"job-{spec.num}-{spec.attempt}"
        result, job_file = stem.with_suffix(".out"), stem.with_suffix(".pkl")
        job_file.write_bytes(spec.ticket(LocalTicket, result=str(result)).to_bytes())
        fd = self.status.fileno()
        args = [self.sys_path, str(self.task_file), spec.stderr_path, "[]", str(fd)]
        proc = subprocess.Popen(
            [self.python, "-c", BOOT, *args],
            pass_fds=[fd],
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own group: ended as a tree
        )
        assert proc.stdin is not None
        proc.stdin.write(job_line(str(job_file)))
        proc.stdin.close()
        return SubprocessHandle(proc, spec, result)

    def warming(self, env: Mapping[str, str]) -> bool:
        return False  # no warm start

    def prepare(self, ahead: Ahead) -> None:
        """No warm start: nothing made ahead."""

    def stop(self, handle: JobHandle, force: bool) -> None:
        if isinstance(handle, SubprocessHandle):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(handle.proc.pid, signal.SIGKILL if force else signal.SIGTERM)

    def end(self, handles: Sequence[JobHandle], grace: float) -> None:
        for force, wait in ((False, grace), (True, KILL_WAIT_S)):
            for handle in handles:
                self.stop(handle, force)
            deadline = time.monotonic() + wait
            for handle in handles:
                assert isinstance(handle, SubprocessHandle)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    handle.proc.wait(timeout=max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        self.status.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def subprocess_execution(settings: LauncherSettings, task: bytes, sweep_dir: Path) -> Execution:
    """This machine's CPU, a fresh subprocess per job."""
    groups = (CPU,)
    slots = slots_per_device(settings, groups)
    backend = SubprocessBackend(task, settings.section(NAME).python or sys.executable)
    return Execution(backend, groups, slots, "the CPU", settings, {}, cpu_count())


ENTRY = BackendEntry(
    NAME,
    f"{__name__}.subprocess_execution",
    opens_first=True,
    title="Subprocess",
    section=Section(NAME, SubprocessSettings, parse_subprocess, ENTRY_EXAMPLE),
)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    register(ENTRY)
    yield
    unregister(NAME)


class TestSubprocessBackend(BackendSuite):
    backend = NAME


def test_its_section_is_checked_and_read_as_the_tables_own_are() -> None:
    """hydra.launcher.subprocess.*: its defaults, its keys and its parser, from the entry."""
    assert parse_settings({"backend": NAME}).section(NAME) == SubprocessSettings()
    given = parse_settings({"backend": NAME, NAME: {"python": "python3"}})
    assert given.section(NAME).python == "python3"
    with pytest.raises(LauncherSettingsError, match=r"subprocess\.pyton: no such setting; did"):
        check_setting_key(f"{NAME}.pyton")
    with pytest.raises(LauncherSettingsError, match=r"subprocess\.python=3: must be a Python"):
        parse_settings({NAME: {"python": 3}})
