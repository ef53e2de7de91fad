"""NVML, asked for what the launcher needs: which GPUs there are, their memory, and what given
processes hold. Each query opens and closes its own NVML session; none raises: a machine
without an NVIDIA driver (or without nvidia-ml-py) simply has no GPU to report.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")
_MB = 1024 * 1024


def nvml_gpu_ids() -> list[str]:
    """The GPU indices NVML sees; [] without a driver (a CPU machine)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, no library: no GPU
        return []
    try:
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def _ask_nvml(gpu: str, query: Callable[[Any, Any], T]) -> T | None:
    """`query(pynvml, handle)` for GPU `gpu` (an index or a UUID), with NVML started and shut
    down around it; None when NVML is missing, does not know the GPU, or the query fails."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, no library: no GPU
        return None
    try:
        handle = (
            pynvml.nvmlDeviceGetHandleByIndex(int(gpu))
            if gpu.isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(gpu)
        )
        return query(pynvml, handle)
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def nvml_total_mb(gpu: str) -> int | None:
    """Total memory of GPU `gpu` (an index or a UUID) in MB; None when NVML can't tell."""
    return _ask_nvml(
        gpu, lambda nvml, handle: int(nvml.nvmlDeviceGetMemoryInfo(handle).total // _MB)
    )


class GpuMemory(NamedTuple):
    """One GPU's memory in MB, as NVML reports it; `ours`: used by the given processes."""

    total: int
    used: int
    ours: int
    ours_seen: bool  # whether NVML listed any of them (not in another PID namespace)
    by_pid: Mapping[int, int] = MappingProxyType({})  # MB each of them listed holds


def nvml_memory(gpu: str, ours: Collection[int]) -> GpuMemory | None:
    """GPU `gpu`'s total and used memory, and what processes `ours` hold of it; None when NVML
    cannot tell (no driver: a CPU machine, or a GPU id it does not know)."""

    def listed(nvml: Any, handle: Any) -> dict[int, int]:
        by_pid: dict[int, int] = {}
        for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if p.pid in ours:  # a process may be listed once per CUDA context
                by_pid[p.pid] = by_pid.get(p.pid, 0) + int((p.usedGpuMemory or 0) // _MB)
        return by_pid

    def query(nvml: Any, handle: Any) -> GpuMemory:
        # Ours, then the total used, then ours again, each counted at its lower figure: memory
        # a job allocates, or frees as it exits, between the calls then counts as another
        # user's (the sweep waits a moment), never as free.
        before = listed(nvml, handle)
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        after = listed(nvml, handle)
        by_pid = {pid: min(mb, after[pid]) for pid, mb in before.items() if pid in after}
        return GpuMemory(
            int(info.total // _MB),
            int(info.used // _MB),
            sum(by_pid.values()),
            bool(by_pid),
            by_pid,
        )

    return _ask_nvml(gpu, query)
