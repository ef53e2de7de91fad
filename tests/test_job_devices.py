"""The job's side of the GPU contract, with a stand-in `tensorflow` that records every call:
the memory cap the launcher asked for is applied before the GPU is touched, the CPU thread
pools follow the launcher's share, and on CPU nothing GPU is called at all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from hpsearch.devices import configure_devices
from hpsearch.errors import ConfigError
from hpsearch_launcher import nvml


class StandInTF:
    """The few tf.config calls configure_devices makes, recorded in order."""

    def __init__(self, gpus: list[str], cuda: bool = True) -> None:
        self.calls: list[tuple[Any, ...]] = []
        physical = [SimpleNamespace(name=f"/physical_device:GPU:{g}") for g in gpus]
        record = self.calls.append
        self.config = SimpleNamespace(
            threading=SimpleNamespace(
                set_intra_op_parallelism_threads=lambda n: record(("intra", n)),
                set_inter_op_parallelism_threads=lambda n: record(("inter", n)),
            ),
            list_physical_devices=lambda kind: list(physical),
            set_visible_devices=lambda devices, kind: record(("visible", list(devices), kind)),
            LogicalDeviceConfiguration=lambda memory_limit: ("logical", memory_limit),
            set_logical_device_configuration=lambda gpu, configs: record(
                ("cap", gpu.name, configs)
            ),
        )
        self.test = SimpleNamespace(is_built_with_cuda=lambda: cuda)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (
        "HPSEARCH_GPU",
        "HPSEARCH_GPU_MEMORY_FRACTION",
        "HPSEARCH_GPU_MEMORY_LIMIT_MB",
        "HPSEARCH_CPU_THREADS",
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_mb_cap_the_launcher_set_is_applied(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HPSEARCH_GPU", "1")
    clean_env.setenv("HPSEARCH_GPU_MEMORY_LIMIT_MB", "36000")
    tf = StandInTF(gpus=["0"])
    info = configure_devices(tf, "auto")
    assert tf.calls == [("cap", "/physical_device:GPU:0", [("logical", 36000)])]
    assert info["memory_limit_mb"] == 36000


def test_without_the_mb_cap_the_fraction_of_nvmls_total_is_applied(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("HPSEARCH_GPU", "1")
    clean_env.setenv("HPSEARCH_GPU_MEMORY_FRACTION", "0.45")
    clean_env.setattr(nvml, "nvml_total_mb", lambda gpu: {"1": 80000}[gpu])
    tf = StandInTF(gpus=["0"])
    configure_devices(tf, "gpu")
    assert tf.calls == [("cap", "/physical_device:GPU:0", [("logical", 36000)])]


def test_cpu_thread_pools_follow_the_launchers_share(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HPSEARCH_CPU_THREADS", "3")
    tf = StandInTF(gpus=[], cuda=False)
    info = configure_devices(tf, "cpu")
    assert tf.calls == [("intra", 3), ("inter", 3)]  # and nothing GPU
    assert info == {"type": "cpu", "gpus": [], "memory_limit_mb": None}


def test_on_cpu_no_gpu_call_is_made() -> None:
    tf = StandInTF(gpus=[], cuda=False)
    configure_devices(tf, "cpu")
    assert tf.calls == []


def test_device_cpu_on_a_cuda_build_hides_every_gpu() -> None:
    tf = StandInTF(gpus=["0", "1"])
    configure_devices(tf, "cpu")
    assert tf.calls == [("visible", [], "GPU")]  # no cap: the GPUs are never initialised


def test_a_gpu_job_that_tensorflow_cannot_see_fails_clearly(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("HPSEARCH_GPU", "3")
    with pytest.raises(ConfigError, match="gave this job GPU 3, but TensorFlow sees no GPU"):
        configure_devices(StandInTF(gpus=[], cuda=False), "auto")
