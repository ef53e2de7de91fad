"""How much room the slots have now, as only the execution can tell: GPUs whose free memory
(other users' processes hold part of it) fits fewer jobs than their free slots, and a cluster
that gained nodes. The scheduling loop asks it between its steps; the pool changes only
through its own methods."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection

from ..plan.slots import SlotPool, device_label
from ..record.progress import SweepState
from .backend import Execution

log = logging.getLogger("hpsearch.launcher")

REFRESH_S = 5.0  # how often a cluster is asked whether it has more room (nodes that joined)


class Room:
    def __init__(self, execution: Execution, pool: SlotPool, state: SweepState) -> None:
        self.execution = execution
        self.pool = pool
        self.state = state  # where waiting GPUs and the slot count are shown
        self.freed = True  # a slot freed since the GPUs' free memory was last asked
        self._refreshed = time.monotonic()

    def check(self, ours: Callable[[], Collection[int]]) -> None:
        """Limit each group to the jobs its GPU's free memory fits (`ours()`: our running jobs'
        pids: their memory is not other users'); lift the limit when the room is back."""
        room = self.execution.memory_room(self.pool.busy, ours, fresh=self.freed)
        if room is None:
            return
        self.freed = False
        for group in self.pool.groups:
            if group not in room:
                if self.pool.limits.pop(group, None) is not None:
                    log.info("hpsearch: %s has room again", device_label(group))
                    self.state.waiting.pop(group, None)
                continue
            fits, why = room[group]
            if fits == 0 and group not in self.state.waiting:
                log.warning(
                    "hpsearch: %s waits for free memory: %s; the other GPUs go on",
                    device_label(group),
                    why,
                )
            if fits == 0:
                self.state.waiting[group] = why
            else:
                self.state.waiting.pop(group, None)
            self.pool.limit(group, self.pool.busy[group] + fits)

    def grow(self) -> None:
        """Take on the room the execution gained (a cluster's new nodes), every REFRESH_S."""
        now = time.monotonic()
        if now - self._refreshed < REFRESH_S:
            return
        self._refreshed = now
        try:
            grown = self.execution.grown()
        except Exception as err:  # the cluster could not say: go on with what there is
            log.warning("hpsearch: could not ask the cluster for its size: %r", err)
            return
        if grown is None:
            return
        before = len(self.pool.groups) * self.pool.slots
        self.pool.grow(*grown)
        after = len(self.pool.groups) * self.pool.slots
        if after > before:
            self.state.slots = after
            log.info("hpsearch: the cluster grew: %d jobs at a time (%d before)", after, before)
