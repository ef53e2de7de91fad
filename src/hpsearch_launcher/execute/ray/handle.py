"""The Ray backend's handle on one job: its Ray task, when the job began (its start file on
the sweep dir), and its end as the sweep's `Outcome`, read from Ray's result or its failure
(a lost node, Ray's memory monitor, a dead worker, a cancel)."""

from __future__ import annotations

import re
import signal
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ...outcome import Ending, Outcome, TaskResult, outcome_of
from ..backend import JobSpec
from ..remote_handle import RemoteHandle


class RayHandle(RemoteHandle):
    """One submitted task; `outcome` resolves when Ray has its result or its failure."""

    def __init__(self, ref: Any, spec: JobSpec, started_file: Path) -> None:
        super().__init__(spec, started_file)
        self.ref = ref
        ref.future().add_done_callback(self._resolve)

    def _resolve(self, done: Future[Any]) -> None:
        try:
            outcome = self._read(done)
        except Exception as err:  # never leave the sweep waiting on a future that won't resolve
            outcome = Outcome(Ending.CRASHED, detail=f"unreadable result: {err!r}")
        self.outcome.set_result(outcome)

    def _read(self, done: Future[Any]) -> Outcome:
        from ray import exceptions as rx

        try:
            where, data = done.result()
        except rx.TaskCancelledError:
            return Outcome(Ending.INTERRUPTED, detail="cancelled")
        except rx.NodeDiedError as err:
            return node_lost(err)
        except rx.OutOfMemoryError as err:  # Ray's memory monitor killed the worker
            return Outcome(
                Ending.KILLED,
                code=signal.SIGKILL,
                last_error=f"Ray: {first_line(err)}",
                placement=self.placement(),
            )
        except rx.WorkerCrashedError:
            return Outcome(
                Ending.CRASHED,
                detail="its Ray worker process died (Ray does not tell the exit status)",
                last_error=self.last_error(),
                placement=self.placement(),
            )
        except rx.RayError as err:
            return Outcome(Ending.CRASHED, detail=f"{type(err).__name__}: {first_line(err)}")
        return outcome_of(TaskResult.from_bytes(data), self.last_error, placement=where)


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def node_lost(err: BaseException) -> Outcome:
    """Ray's NodeDiedError without its advice: "its node was lost (Node IP: ..., node ID:
    ...)", placed on that node as far as the message names it."""
    text = " ".join(str(err).split())
    found = re.search(r"Node IP: ([^,]+), node ID: (\w+)", text)
    if found is None:
        return Outcome(Ending.LOST, detail=f"its node was lost ({first_line(err)})")
    ip, node = found.groups()
    return Outcome(
        Ending.LOST,
        detail=f"its node was lost ({found.group(0)})",
        placement=f"?@{ip}/{node[:8]}",
    )
