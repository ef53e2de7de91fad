"""Progress of a running sweep: a live table on a terminal, plain lines elsewhere (CI, logs)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..plan.slots import device_label

log = logging.getLogger("hpsearch.launcher")

PLAIN_INTERVAL_S = 30.0  # at most one progress line this often when nothing else happens


@dataclass
class SweepState:
    total: int
    done: int = 0
    failed: int = 0
    interrupted: int = 0
    resumed: int = 0
    pruned: int = 0
    asked: int = 0  # jobs the source gave so far
    queued: int = 0
    running: dict[str, list[str]] = field(default_factory=dict)  # device -> run names
    waiting: dict[str, str] = field(default_factory=dict)  # GPU -> why it takes no job now
    durations: list[float] = field(default_factory=list)  # of jobs that ran to the end
    slots: int = 1
    started: float = field(default_factory=time.monotonic)

    stopping: bool = False  # interrupted: nothing more will run, so no ETA

    def eta_s(self) -> float | None:
        """Remaining jobs x mean job time / parallel slots; None until a job has ended."""
        if not self.durations or self.stopping:
            return None
        left = self.queued + sum(len(v) for v in self.running.values())
        return left * (sum(self.durations) / len(self.durations)) / max(1, self.slots)

    def never_started(self) -> int:
        """Stopping: the jobs of the sweep that did not start. Not `queued`: a source may
        count an interrupted job as still to run (a search runs its trial again), but it
        started, and the counts must add up to the total."""
        if not self.total:
            return self.queued
        running = sum(len(v) for v in self.running.values())
        ended = self.done + self.failed + self.resumed + self.pruned
        return max(0, self.total - ended - self.interrupted - running)

    def summary(self) -> str:
        running = sum(len(v) for v in self.running.values())
        eta = self.eta_s()
        # An interrupted job did not finish: it runs again when the sweep is resumed.
        ended = self.done + self.failed + self.resumed + self.pruned
        interrupted = f", {self.interrupted} interrupted" if self.interrupted else ""
        pruned = f", {self.pruned} pruned" if self.pruned else ""
        left = f"{self.never_started()} never started" if self.stopping else f"{self.queued} queued"
        text = (
            f"{ended}/{self.total} finished ({self.done} done, {self.failed} failed{pruned}, "
            f"{self.resumed} resumed){interrupted}, {running} running, {left}; elapsed "
            f"{_clock(time.monotonic() - self.started)}"
        )
        if not self.stopping:
            text += f", ETA {'?' if eta is None else _clock(eta)}"
        for device, note in self.waiting.items():
            text += f"; {device_label(device)} waits for free memory ({note})"
        return text


def counted(n: int, singular: str, plural: str = "") -> str:
    """`1 running job`, `2 running jobs`: a count and its noun, agreeing."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


class Progress(Protocol):
    def update(self, state: SweepState, event: bool) -> None: ...

    def close(self) -> None: ...


class PlainProgress:
    """A progress line when a job ends (at most every 2 s) or every PLAIN_INTERVAL_S."""

    def __init__(self) -> None:
        self._last = 0.0

    def update(self, state: SweepState, event: bool) -> None:
        now = time.monotonic()
        if now - self._last >= (2.0 if event else PLAIN_INTERVAL_S):
            self._last = now
            log.info("progress: %s", state.summary())

    def close(self) -> None:
        pass


class RichProgress:
    """A live table (rich) of counts, the jobs on each device, elapsed time and ETA.

    Log lines keep printing above it: the console's log handlers are pointed at rich's
    console while it is live, and back when it closes.
    """

    def __init__(self, devices: Sequence[str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.devices = devices
        self.console = Console(file=sys.stdout)
        self.live = Live(console=self.console, refresh_per_second=4, transient=True)
        self.live.start()
        # After start(): sys.stdout is now rich's proxy, which prints above the live table.
        self._swapped = _point_handlers_at(sys.stdout)

    def update(self, state: SweepState, event: bool) -> None:
        self.live.update(self._render(state))

    def _render(self, state: SweepState) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(show_edge=False)
        table.add_column("device")
        table.add_column("running")
        joined = [d for d in state.running if d not in self.devices]  # a cluster that grew
        for device in [*self.devices, *joined]:
            names = ", ".join(state.running.get(device, [])) or "-"
            if device in state.waiting:
                names += f"  [waits for free memory: {state.waiting[device]}]"
            table.add_row(device_label(device), names)
        return Group(Text(state.summary(), style="bold"), table)

    def close(self) -> None:
        self.live.stop()
        for handler, stream in self._swapped.items():
            handler.setStream(stream)


def make_progress(devices: Sequence[str]) -> Progress:
    return RichProgress(devices) if sys.stdout.isatty() else PlainProgress()


def _point_handlers_at(stream: Any) -> Mapping[logging.StreamHandler[Any], Any]:
    swapped: dict[logging.StreamHandler[Any], Any] = {}
    for handler in (
        logging.getLogger().handlers + log.handlers + logging.getLogger("hpsearch").handlers
    ):
        if isinstance(handler, logging.StreamHandler) and handler.stream in (
            sys.__stdout__,
            sys.__stderr__,
        ):
            swapped[handler] = handler.setStream(stream)
    return swapped


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
