"""This machine as an Execution: its GPUs (or its CPU), a fresh local process per job with warm
spares ahead, and what NVML says of each GPU's memory (other users' processes, our jobs')."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from ... import nvml
from ...nvml import GpuMemory
from ...plan.settings import LauncherSettings, cpu_count
from ...plan.slots import CPU, gpu_settings_unused, slots_per_device, sweep_devices
from ..backend import Execution
from .backend import LocalBackend

log = logging.getLogger("hpsearch.launcher")


@dataclass
class MachineExecution(Execution):
    """The local backend on this machine's GPUs; `gpu_memory` asks NVML."""

    def gpu_memory(
        self, groups: Collection[str], ours: Callable[[], Collection[int]]
    ) -> dict[str, GpuMemory]:
        readings = {}
        pids: Collection[int] | None = None
        for group in groups:
            if self.memory_total.get(group) is None:
                continue
            # Looked up at call time: the tests stand a fake NVML in for the real one.
            pids = ours() if pids is None else pids
            memory = nvml.nvml_memory(group, pids)
            if memory is not None:
                readings[group] = memory
        return readings


def machine_execution(settings: LauncherSettings, task: bytes, sweep_dir: Path) -> MachineExecution:
    """This machine's GPUs (or its CPU), checked against what NVML sees. (`sweep_dir`: every
    backend's opener is given it, plan/backends.py; a local job needs no proof it is shared.)"""
    nvml_ids = nvml.nvml_gpu_ids()  # asked once: an NVML session per call
    groups = sweep_devices(settings, os.environ, lambda: nvml_ids)
    cores = cpu_count()
    totals = {g: nvml.nvml_total_mb(g) for g in groups if g != CPU}
    slots = slots_per_device(settings, groups)
    unused = gpu_settings_unused(settings, groups)
    if unused:
        log.warning(unused)
    packs = settings.packed and groups != (CPU,)
    if packs and None in totals.values():
        unknown = ", ".join(g for g, total in totals.items() if total is None)
        log.warning(
            "hpsearch: jobs_per_gpu=auto: NVML gives no memory figures for GPU %s, so no job "
            "can be measured: one job per GPU",
            unknown,
        )
        packs, slots = False, 1
    # Spares importing at once: more would slow the jobs still importing (the first round, on
    # a box with few cores) more than it gains.
    gpus = [g for g in groups if g != CPU]
    backend = LocalBackend(
        task,
        settings.preload if settings.warm else (),
        max_preparing=max(1, cores // 2),
        fork=settings.warm_start == "fork",
        keep_daemons=settings.keep_daemons,
        holds_gpu=lambda pid: holds_gpu(gpus, pid),
    )
    return MachineExecution(
        backend,
        groups,
        slots,
        "the CPU" if groups == (CPU,) else f"GPU {','.join(groups)}",
        settings,
        totals,
        cores,
        warm=settings.warm,
        packs=packs,
    )


def holds_gpu(gpus: Collection[str], pid: int) -> bool:
    """Whether NVML lists process `pid` on any of `gpus` (it holds a CUDA context there)."""
    for gpu in gpus:
        memory = nvml.nvml_memory(gpu, [pid])
        if memory is not None and pid in memory.by_pid:
            return True
    return False
