"""Whether a GPU has room for one more job, given what other users' processes hold on it.
Pure: NVML's figures in, a verdict out."""

from __future__ import annotations

from ..nvml import GpuMemory


def others_mb(memory: GpuMemory, ours_booked_mb: int) -> int:
    """MB other users' processes hold: what NVML counts as used, less what our job processes
    hold. Where NVML lists none of ours (a container's own PID namespace, or our jobs have
    not allocated yet) ours are taken to hold all they have booked (`ours_booked_mb`: their
    shares, or reservations), so as not to count them twice."""
    ours = memory.ours if memory.ours_seen else min(memory.used, ours_booked_mb)
    return max(0, memory.used - ours)


def room_mb(memory: GpuMemory, busy: int, share_mb: int) -> int:
    """MB of the GPU left for a new job: its total, less what other users hold, less the
    shares of our jobs already on it (each may grow to its cap)."""
    return memory.total - others_mb(memory, busy * share_mb) - busy * share_mb


def jobs_that_fit(memory: GpuMemory | None, busy: int, share_mb: int) -> int | None:
    """How many more jobs' shares the GPU has room for now; None (no limit) when NVML cannot
    tell. Each counts whole: a job may grow to its cap."""
    return None if memory is None else max(0, room_mb(memory, busy, share_mb)) // share_mb
