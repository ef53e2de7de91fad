"""The contract between the launcher (parent) and a job (child) about GPUs: the environment
variable names, and NVML look-ups both sides use. No TensorFlow here: the parent imports it."""

from __future__ import annotations

import os

# Set by the launcher in each job's environment before the job's process starts.
GPU_ID = "HPSEARCH_GPU"  # the GPU the job was given ("" on CPU)
MEMORY_FRACTION = "HPSEARCH_GPU_MEMORY_FRACTION"  # the job's share of its GPU's memory
MEMORY_LIMIT_MB = "HPSEARCH_GPU_MEMORY_LIMIT_MB"  # that share in MB, when the parent knew the total
CPU_THREADS = "HPSEARCH_CPU_THREADS"  # the job's share of the CPU cores
PARENT_PID = "HPSEARCH_PARENT_PID"  # the sweep process: the job exits if it dies


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


def nvml_total_mb(gpu: str) -> int | None:
    """Total memory of GPU `gpu` (an index or a UUID) in MB; None when NVML can't tell."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        handle = (
            pynvml.nvmlDeviceGetHandleByIndex(int(gpu))
            if gpu.isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(gpu)
        )
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024))
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def memory_limit_mb(fraction: float, total_mb: int) -> int:
    """The hard cap for a job: its fraction of the GPU, whole MB, at least 1."""
    return max(1, int(fraction * total_mb))


def job_memory_limit_mb() -> int | None:
    """In a job: the MB cap the launcher set, else fraction x NVML's total, else None."""
    if os.environ.get(MEMORY_LIMIT_MB):
        return int(os.environ[MEMORY_LIMIT_MB])
    fraction, gpu = os.environ.get(MEMORY_FRACTION), os.environ.get(GPU_ID)
    if not fraction or not gpu:
        return None
    total = nvml_total_mb(gpu)
    return None if total is None else memory_limit_mb(float(fraction), total)


def cap_torch_memory() -> float | None:
    """In a PyTorch job: cap its CUDA allocator at the launcher's fraction; return it.

    PyTorch reads no environment variable for this, so a torch task calls it first thing.
    """
    fraction = os.environ.get(MEMORY_FRACTION)
    if not fraction:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.set_per_process_memory_fraction(float(fraction), 0)
    return float(fraction)
