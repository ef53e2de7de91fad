"""This machine as an Execution: its GPUs (or its CPU), a fresh local process per job with warm
spares ahead, and slots that wait while other users' processes hold a GPU's memory."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from .. import nvml
from ..contract import memory_limit_mb
from ..plan.memory import jobs_that_fit, others_mb, room_mb
from ..plan.settings import LauncherSettings, cpu_count
from ..plan.slots import CPU, slots_per_device, sweep_devices
from .backend import Execution
from .local import LocalBackend

MEMORY_POLL_S = 1.0  # how often GPUs with a free slot are asked for their free memory


@dataclass
class MachineExecution(Execution):
    """The local backend on this machine's GPUs; `memory_room` asks NVML."""

    gate: bool = False  # wait_for_free_memory
    _asked: float = -MEMORY_POLL_S

    def memory_room(
        self, busy: Mapping[str, int], ours: Callable[[], Collection[int]], fresh: bool
    ) -> dict[str, tuple[int, str]] | None:
        now = time.monotonic()
        if not self.gate or (not fresh and now - self._asked < MEMORY_POLL_S):
            return None
        self._asked = now
        room = {}
        pids: Collection[int] | None = None
        for group in self.groups:
            total = self.memory_total.get(group)
            if total is None or busy[group] >= self.slots:
                continue
            share = memory_limit_mb(self.settings.fraction, total)
            # Looked up at call time: the tests stand a fake NVML in for the real one.
            pids = ours() if pids is None else pids
            memory = nvml.nvml_memory(group, pids)
            fits = jobs_that_fit(memory, busy[group], share)
            if memory is not None and fits is not None and fits < self.slots - busy[group]:
                free_mb = max(0, room_mb(memory, busy[group], share))
                others = others_mb(memory, busy[group], share)
                room[group] = (
                    fits,
                    f"needs {share} MB free for each job, has {free_mb} MB "
                    f"(other processes hold {others} MB)",
                )
        return room


def machine_execution(settings: LauncherSettings, task: bytes) -> MachineExecution:
    """This machine's GPUs (or its CPU), checked against what NVML sees."""
    nvml_ids = nvml.nvml_gpu_ids()  # asked once: an NVML session per call
    groups = sweep_devices(settings, os.environ, lambda: nvml_ids)
    cores = cpu_count()
    # Spares importing at once: more would slow the jobs still importing (the first round, on
    # a box with few cores) more than it gains.
    backend = LocalBackend(
        task, settings.preload if settings.warm_start else (), max_preparing=max(1, cores // 2)
    )
    return MachineExecution(
        backend,
        groups,
        slots_per_device(settings, groups),
        "the CPU" if groups == (CPU,) else f"GPU {','.join(groups)}",
        settings,
        {g: nvml.nvml_total_mb(g) for g in groups if g != CPU},
        cores,
        warm=settings.warm_start,
        gate=settings.wait_for_free_memory,
    )
