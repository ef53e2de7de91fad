"""A stand-in for pynvml (nvidia-ml-py), first on the path of test sweeps on simulated GPUs:
NVML answers as a driver would, with HPS_FAKE_GPUS GPUs (default 8), so that the launcher
accepts `hydra.launcher.gpus=[0,1]` on a machine without any; it has no figures for them
(every query about one GPU fails), as when NVML cannot tell. HPS_FAKE_GPUS=none: no driver,
on any machine."""

from __future__ import annotations

import os


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    if os.environ.get("HPS_FAKE_GPUS") == "none":
        raise NVMLError("Driver Not Loaded")


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return int(os.environ.get("HPS_FAKE_GPUS", "8"))


def nvmlDeviceGetHandleByIndex(index: int) -> object:
    raise NVMLError(f"simulated GPU {index}: no figures")


def nvmlDeviceGetHandleByUUID(uuid: str) -> object:
    raise NVMLError(f"simulated GPU {uuid}: no figures")
