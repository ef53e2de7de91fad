"""What the launcher promises a job, and what it reads back: the contract both sides share.

The sweep sets these variables; a task reads them through the package's public names
(`from hpsearch_launcher import job_memory_limit_mb`). Light: nothing heavy is imported.

- The environment: each job's process is created with the variables below (and
  `CUDA_VISIBLE_DEVICES`, `TF_FORCE_GPU_ALLOW_GROWTH`, JAX's `XLA_CLIENT_MEM_FRACTION` and
  `XLA_PYTHON_CLIENT_MEM_FRACTION`) already set, before it imports anything.
- The return value of the task: a number (the objective), a list of numbers or a mapping of
  numbers becomes results.csv columns; anything JSON can hold is handed back on resume.
- `metrics.json` in the job's output dir, optional: its `final` mapping's numbers become
  results.csv columns. `hpsearch_launcher.write_json_atomic` writes it whole or not at all.
"""

from __future__ import annotations

import os

# Set by the launcher in each job's environment before the job's process starts.
GPU_ID = "HPSEARCH_GPU"  # the GPU the job was given ("" on CPU)
MEMORY_FRACTION = "HPSEARCH_GPU_MEMORY_FRACTION"  # the job's share of its GPU's memory
MEMORY_LIMIT_MB = "HPSEARCH_GPU_MEMORY_LIMIT_MB"  # that share in MB, when the parent knew the total
CPU_THREADS = "HPSEARCH_CPU_THREADS"  # the job's share of the CPU cores
PARENT_PID = "HPSEARCH_PARENT_PID"  # the sweep process: the job exits if it dies
# Set by the job's own process when its job begins (a spare is made before it knows its run dir).
REPORTS = "HPSEARCH_REPORTS"  # where report() appends: REPORTS_FILE in the job's run dir
REPORTS_FILE = "reports.jsonl"  # {"step": 3, "value": 0.97} a line
STOP_FILE = ".hpsearch-stop"  # created beside it when the sweep prunes the job
# Beside it where the sweep judges reports (a pruner): the bytes of the reports file judged so
# far. report() waits (for at most what channel.py allows) until its line is judged or the job
# is pruned, so that a pruned job stops before its next epoch instead of after it.
HEARD_FILE = ".hpsearch-heard"
# {"return": <JSON>, "overrides": [...]}: written atomically by the job's own process when its
# task returned, before it exits: a sweep killed before it heard of the end adopts it on resume.
END_FILE = ".hpsearch-end.json"
GPU_PEAK_FILE = "gpu_peak.json"  # {"peak_mb": 3100}: the job's own word on its peak, beside it
# Variables only the launcher may set: hydra.launcher.env refuses them (the setting that
# controls each is named in the error). Any other HPSEARCH_ name is reserved too.
OWNED_VARIABLES = {
    "CUDA_VISIBLE_DEVICES": "hydra.launcher.gpus",
    "CUDA_DEVICE_ORDER": "hydra.launcher.gpus (ids are nvidia-smi's PCI bus order)",
    "TF_FORCE_GPU_ALLOW_GROWTH": "hydra.launcher.allow_growth",
    "XLA_CLIENT_MEM_FRACTION": "hydra.launcher.memory_fraction",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "hydra.launcher.memory_fraction",
    GPU_ID: "hydra.launcher.gpus",
    MEMORY_FRACTION: "hydra.launcher.memory_fraction",
    MEMORY_LIMIT_MB: "hydra.launcher.memory_fraction",
    CPU_THREADS: "hydra.launcher.n_jobs",
    PARENT_PID: "nothing: the launcher sets it",
    REPORTS: "nothing: the launcher sets it",
}
RESERVED_PREFIX = "HPSEARCH_"

METRICS_FILE = "metrics.json"  # {"final": {"val_accuracy": 0.97, ...}, ...} in the output dir


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
    from .nvml import nvml_total_mb

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
