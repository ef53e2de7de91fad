"""TensorFlow device set-up for one job, done before TensorFlow touches a GPU."""

from __future__ import annotations

import logging
import os
from typing import Any

from hpsearch.errors import ConfigError
from hpsearch_launcher import CPU_THREADS, GPU_ID, job_memory_limit_mb, report_gpu_peak

log = logging.getLogger(__name__)


def configure_devices(tf: Any, device_type: str) -> dict[str, Any]:
    """Hide, cap or enable the GPUs per `device_type`; return what was set, for metrics.json."""
    threads = os.environ.get(CPU_THREADS)
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(int(threads))
        tf.config.threading.set_inter_op_parallelism_threads(max(1, int(threads)))
    if device_type == "cpu":
        # On a CPU build there is nothing to hide; on a CUDA build this keeps every GPU untouched.
        if tf.config.list_physical_devices("GPU"):
            tf.config.set_visible_devices([], "GPU")
        return {"type": "cpu", "gpus": [], "memory_limit_mb": None}
    gpus = tf.config.list_physical_devices("GPU")
    given = os.environ.get(GPU_ID)
    if not gpus and given:
        # A GPU machine with a CPU-only TensorFlow would otherwise train every job on the CPU.
        raise ConfigError(
            f"the launcher gave this job GPU {given}, but TensorFlow sees no GPU (CUDA build: "
            f"{tf.test.is_built_with_cuda()}); install hpsearch[gpu], or use device=cpu"
        )
    if not gpus:
        if device_type == "gpu":
            raise ConfigError(
                "device=gpu: TensorFlow sees no GPU (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}, CUDA build: "
                f"{tf.test.is_built_with_cuda()}); install hpsearch[gpu] on a GPU machine, "
                "or use device=cpu"
            )
        return {"type": "cpu", "gpus": [], "memory_limit_mb": None}
    limit = job_memory_limit_mb()
    for gpu in gpus:
        if limit is not None:
            config = tf.config.LogicalDeviceConfiguration(memory_limit=limit)
            tf.config.set_logical_device_configuration(gpu, [config])
    if limit is not None:
        log.info("GPU memory capped at %d MB per visible GPU (%s)", limit, _names(gpus))
    else:
        log.info(
            "GPU memory not capped (%s); TF_FORCE_GPU_ALLOW_GROWTH=%s",
            _names(gpus),
            os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH"),
        )
    return {
        "type": "gpu",
        "gpus": _names(gpus),
        "memory_limit_mb": limit,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def report_peak_memory(tf: Any, device: dict[str, Any]) -> float | None:
    """On a GPU: the most memory TensorFlow's allocator held (MB), told to the sweep (which
    also measures the process through NVML, CUDA context included, and keeps the larger:
    jobs_per_gpu=auto packs GPUs by it); None on the CPU or when TensorFlow cannot say."""
    if device["type"] != "gpu":
        return None
    try:
        peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    except (ValueError, RuntimeError, KeyError) as err:
        log.info("GPU memory peak unknown: %s", err)
        return None
    report_gpu_peak(peak)
    return float(peak)


def _names(gpus: list[Any]) -> list[str]:
    return [gpu.name for gpu in gpus]
