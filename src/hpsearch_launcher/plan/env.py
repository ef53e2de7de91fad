"""The environment each job's process is created with: its GPU, its memory cap, its threads."""

from __future__ import annotations

from .. import contract
from .settings import LauncherSettings
from .slots import CPU


def job_env(
    device: str,
    settings: LauncherSettings,
    slots: int,
    parent_pid: int,
    memory_total_mb: int | None,
    cpu_count: int,
    fraction: float | None = None,
    limit_mb: int | None = None,
) -> dict[str, str]:
    """The environment a job's process is created with: its GPU, its memory cap, its threads.

    Set at process creation because CUDA, TensorFlow, JAX and PyTorch read these once, at start.
    `fraction` overrides the settings' share (a job retried alone on a whole GPU); `slots` is
    how many jobs share the device's CPU cores (1 for a job alone); `limit_mb`, the cap in MB
    where it is set in MB (jobs_per_gpu=auto), else the fraction of the total.
    """
    on_gpu = device != CPU
    env = {
        # Indices as nvidia-smi and NVML number them, not CUDA's fastest-first default.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": device if on_gpu else "",
        contract.GPU_ID: device if on_gpu else "",
        contract.PARENT_PID: str(parent_pid),
        "PYTHONUNBUFFERED": "1",  # the job's log files fill as it runs
    }
    if on_gpu:
        share = settings.fraction if fraction is None else fraction
        env |= _gpu_memory_env(share, settings.allow_growth, memory_total_mb, limit_mb)
    else:
        env |= _cpu_threads_env(max(1, cpu_count // slots))
    env |= settings.env
    return env


def _gpu_memory_env(
    fraction: float, allow_growth: bool, memory_total_mb: int | None, limit_mb: int | None
) -> dict[str, str]:
    """A GPU job's memory cap, as each framework reads it (and as MB, when it is known)."""
    env = {
        contract.MEMORY_FRACTION: f"{fraction:g}",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true" if allow_growth else "false",
        # JAX preallocates this share and never exceeds it: XLA_CLIENT_MEM_FRACTION is the
        # name JAX reads now, the older one is deprecated but still read by older JAX.
        # PyTorch has no variable for a cap: cap_torch_memory() applies it in the job.
        "XLA_CLIENT_MEM_FRACTION": f"{fraction:g}",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{fraction:g}",
    }
    if limit_mb is not None:
        env[contract.MEMORY_LIMIT_MB] = str(limit_mb)
    elif memory_total_mb is not None:
        env[contract.MEMORY_LIMIT_MB] = str(contract.memory_limit_mb(fraction, memory_total_mb))
    return env


def _cpu_threads_env(threads: int) -> dict[str, str]:
    """A CPU job's thread count: jobs sharing the CPU split its cores instead of each taking
    all of them."""
    return {
        name: str(threads)
        for name in (
            contract.CPU_THREADS,
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
        )
    }
