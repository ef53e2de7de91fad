"""A stand-in for pynvml (nvidia-ml-py), first on the path of test sweeps on simulated GPUs:
NVML answers as a driver would, with HPS_FAKE_GPUS GPUs (default 8), so that the launcher
accepts `hydra.launcher.gpus=[0,1]` on a machine without any. HPS_FAKE_GPUS=none: no driver,
on any machine.

Without HPS_FAKE_GPU_MEMORY it has no figures for them (every query about one GPU fails), as
when NVML cannot tell. With HPS_FAKE_GPU_MEMORY (a directory) each GPU has HPS_FAKE_GPU_MB MB
(default 81920), and its memory is what the processes hold there: a job "allocates" with
`allocate(mb)` (as a framework would: refused, as CUDA's out-of-memory, past the job's cap or
past what the GPU has free), which records `proc-<pid>.json`; another user's process is a
file `others-<gpu>` holding its MB. A process's memory is freed when it is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from types import SimpleNamespace

import psutil


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    if os.environ.get("HPS_FAKE_GPUS") == "none":
        raise NVMLError("Driver Not Loaded")


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return int(os.environ.get("HPS_FAKE_GPUS", "8"))


def _memory_dir() -> Path | None:
    path = os.environ.get("HPS_FAKE_GPU_MEMORY")
    return Path(path) if path else None


def nvmlDeviceGetHandleByIndex(index: int) -> object:
    if _memory_dir() is None or index >= nvmlDeviceGetCount():
        raise NVMLError(f"simulated GPU {index}: no figures")
    return str(index)


def nvmlDeviceGetHandleByUUID(uuid: str) -> object:
    raise NVMLError(f"simulated GPU {uuid}: no figures")


MB = 1024 * 1024


def total_mb() -> int:
    return int(os.environ.get("HPS_FAKE_GPU_MB", "81920"))


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def held(gpu: str) -> dict[int, int]:
    """MB each live process holds on `gpu` (other users' as pid 0)."""
    root = _memory_dir()
    assert root is not None
    by_pid: dict[int, int] = {}
    for path in root.glob("proc-*.json"):
        with contextlib.suppress(OSError, ValueError):
            entry = json.loads(path.read_text())
            pid = int(path.stem.removeprefix("proc-"))
            if entry["gpu"] == gpu and _alive(pid):
                by_pid[pid] = int(entry["mb"])
    with contextlib.suppress(OSError, ValueError):
        by_pid[0] = int((root / f"others-{gpu}").read_text())
    return by_pid


def nvmlDeviceGetMemoryInfo(handle: str) -> SimpleNamespace:
    used = sum(held(handle).values())
    return SimpleNamespace(total=total_mb() * MB, used=used * MB, free=(total_mb() - used) * MB)


def nvmlDeviceGetComputeRunningProcesses(handle: str) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(pid=pid, usedGpuMemory=mb * MB) for pid, mb in held(handle).items() if pid
    ]


def allocate(mb: int) -> None:
    """In a job: hold `mb` MB of its GPU from now on (the total, not an increment), as a
    framework allocating would; CUDA's out-of-memory error past its cap or the GPU's room."""
    root = _memory_dir()
    assert root is not None, "allocate() needs HPS_FAKE_GPU_MEMORY"
    gpu = os.environ["CUDA_VISIBLE_DEVICES"]
    cap = os.environ.get("HPSEARCH_GPU_MEMORY_LIMIT_MB")
    if cap and mb > int(cap):
        raise RuntimeError(f"CUDA out of memory. Tried to allocate {mb} MB over the {cap} MB cap")
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        others = sum(m for pid, m in held(gpu).items() if pid != os.getpid())
        if others + mb > total_mb():
            raise RuntimeError(
                f"CUDA out of memory. Tried to allocate {mb} MB on GPU {gpu} with "
                f"{total_mb() - others} MB free"
            )
        tmp = root / f".proc-{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"gpu": gpu, "mb": mb}))
        os.replace(tmp, root / f"proc-{os.getpid()}.json")
