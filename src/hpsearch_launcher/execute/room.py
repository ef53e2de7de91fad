"""How much room the slots have now, as only the execution can tell, and what each job held.

Every MEMORY_POLL_S (at once after a slot freed) the GPUs are asked, through the execution,
what their memory holds: each running job's share of it is its measured peak so far; with
`wait_for_free_memory`, a GPU whose free memory fits fewer jobs than its free slots takes
only those; with `jobs_per_gpu=auto`, a GPU takes the next job only if its reservation fits
(plan.packing). A cluster that gained nodes is taken on every REFRESH_S. The pool changes only
through its own methods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence

from ..contract import memory_limit_mb
from ..nvml import GpuMemory
from ..plan.memory import jobs_that_fit, others_mb, room_mb
from ..plan.slots import SlotPool, device_label
from ..record.progress import SweepState
from .backend import Execution
from .packer import Packer
from .run import Run

log = logging.getLogger("hpsearch.launcher")

MEMORY_POLL_S = 1.0  # how often the GPUs are asked for their memory
REFRESH_S = 5.0  # how often a cluster is asked whether it has more room (nodes that joined)


class Room:
    def __init__(
        self, execution: Execution, pool: SlotPool, state: SweepState, packer: Packer
    ) -> None:
        self.execution = execution
        self.pool = pool
        self.state = state  # where waiting GPUs and the slot count are shown
        self.packer = packer  # jobs_per_gpu=auto: told what NVML says
        self.freed = True  # a slot freed since the GPUs were last asked
        self.gate = execution.settings.wait_for_free_memory
        self.pids_visible = False  # NVML has listed a process of ours
        self._asked = -MEMORY_POLL_S
        self._refreshed = time.monotonic()

    def poll(self, running: Sequence[Run], waiting: bool) -> None:
        """Ask the GPUs, if it is time: measure the running jobs; with jobs `waiting` for a
        slot, limit each group to what its free memory fits (count mode)."""
        now = time.monotonic()
        if not self.freed and now - self._asked < MEMORY_POLL_S:
            return
        self._asked, self.freed = now, False
        asked = {r.group for r in running} | (set(self.pool.groups) if waiting else set())
        pids: dict[int, list[int]] = {}

        def ours() -> Collection[int]:
            for run in running:
                pids[id(run)] = run.handle.pids() if run.handle is not None else []
            return [pid for held in pids.values() for pid in held]

        readings = self.execution.gpu_memory(sorted(asked & set(self.pool.groups)), ours)
        # Once NVML has listed one of our jobs' processes, it sees our pids: where it lists
        # none, ours hold nothing yet (just started) and all the memory used is other users'.
        # Until then ours may be in another PID namespace, and are taken to hold their shares.
        self.pids_visible |= any(m.ours_seen for m in readings.values())
        if self.pids_visible:
            readings = {g: m._replace(ours_seen=True) for g, m in readings.items()}
        for run in running:
            memory = readings.get(run.group)
            if memory is not None and id(run) in pids:
                held = sum(memory.by_pid.get(pid, 0) for pid in pids[id(run)])
                run.peak_mb = max(run.peak_mb, held)
        if self.execution.packs:
            self._show_waiting(self.packer.observe(readings))
        elif self.gate and waiting:
            self._limit_by_count(readings)

    def _limit_by_count(self, readings: dict[str, GpuMemory]) -> None:
        """Limit each group to the jobs its GPU's free memory fits; lift the limit when the
        room is back."""
        short = {}
        for group in self.pool.groups:
            memory, total = readings.get(group), self.execution.memory_total.get(group)
            busy = self.pool.busy[group]
            if busy >= self.pool.slots:
                continue  # asked again once a slot frees
            share = memory_limit_mb(self.execution.settings.fraction, total or 0)
            fits = jobs_that_fit(memory, busy, share)  # None: NVML cannot tell
            if memory is not None and fits is not None and fits < self.pool.slots - busy:
                self.pool.limit(group, busy + fits)
                if fits == 0:
                    short[group] = (
                        f"needs {share} MB free for each job, has "
                        f"{max(0, room_mb(memory, busy, share))} MB "
                        f"(other processes hold {others_mb(memory, busy * share)} MB)"
                    )
            elif self.pool.limits.pop(group, None) is not None:
                log.info("hpsearch: %s has room again", device_label(group))
        self._show_waiting(short)

    def _show_waiting(self, short: dict[str, str]) -> None:
        """Say once when a GPU starts to wait for free memory; keep the display's list."""
        for group, why in short.items():
            if group not in self.state.waiting:
                log.warning(
                    "hpsearch: %s waits for free memory: %s; the other GPUs go on",
                    device_label(group),
                    why,
                )
        for group in list(self.state.waiting):
            if group not in short:
                self.state.waiting.pop(group)
        self.state.waiting.update(short)

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
