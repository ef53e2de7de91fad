"""hpsearch_launcher: each job of a Hydra sweep in a fresh process, GPUs shared by round-robin
slots. The Hydra plugin (`hydra/launcher=hpsearch`) lives in `hydra_plugins.hpsearch_launcher`.

This package's own names are the job-side API: what a task may import and call. It is light
(no TensorFlow, PyTorch, Ray, loky or Hydra is imported) and stable:

    from hpsearch_launcher import cap_torch_memory, job_memory_limit_mb

- `report(value, step=None) -> bool`: report the objective once per epoch (the sweep's pruner
  reads it); True when the sweep asks the job to stop. `should_stop()`: the same question alone.
- `report_gpu_peak(megabytes)`: at the job's end, its framework's peak GPU memory (results.csv's
  `gpu_peak_mb` keeps the larger of it and what NVML measured; `jobs_per_gpu=auto` packs by it).
- `cap_torch_memory()`: in a PyTorch job, cap the CUDA allocator at the job's memory share.
- `job_memory_limit_mb()`: the job's GPU memory cap in MB (None on CPU or when unknown).
- `write_json_atomic(path, data)`: write a file (e.g. `METRICS_FILE`) no reader sees half of.
- `METRICS_FILE`: `metrics.json`; its `final` mapping's numbers become results.csv columns.
- `GPU_ID`, `CPU_THREADS`, `MEMORY_FRACTION`, `MEMORY_LIMIT_MB`: the environment variables the
  launcher sets in each job's process before it starts.
- `EXECUTION_WHITELIST`: the targets of this package an app's config may name (the sweep
  summary callback), for Hydra 1.4's `@hydra.main(execution_whitelist=...)`.
"""

from .atomic import write_json_atomic
from .channel import report, report_gpu_peak, should_stop
from .contract import (
    CPU_THREADS,
    GPU_ID,
    MEMORY_FRACTION,
    MEMORY_LIMIT_MB,
    METRICS_FILE,
    cap_torch_memory,
    job_memory_limit_mb,
)

# Hydra 1.4 asks an app to name the config-selected targets it trusts; these are ours.
EXECUTION_WHITELIST = ("hpsearch_launcher.callbacks.SweepSummary",)

__all__ = [
    "CPU_THREADS",
    "EXECUTION_WHITELIST",
    "GPU_ID",
    "MEMORY_FRACTION",
    "MEMORY_LIMIT_MB",
    "METRICS_FILE",
    "cap_torch_memory",
    "job_memory_limit_mb",
    "report",
    "report_gpu_peak",
    "should_stop",
    "write_json_atomic",
]
