"""Which devices a sweep uses and which slot each job takes: round-robin over free slots.

Pure functions and a small state machine, tested with fake GPU ids; nothing here starts a
process or touches a GPU (NVML is asked only through a function you pass).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .settings import GPU_UUID, LauncherSettings, LauncherSettingsError

CPU = "cpu"  # the one "device" of a sweep without GPUs; GPU ids are digits or UUIDs


def visible_gpus(environ: Mapping[str, str], nvml_ids: Callable[[], list[str]]) -> tuple[str, ...]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES if set, else NVML's, else none."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        listed = environ["CUDA_VISIBLE_DEVICES"].replace(" ", "")
        # CUDA stops at the first invalid entry ("-1" is the usual way to hide every GPU).
        ids: list[str] = []
        for item in listed.split(","):
            if not item or item.startswith("-"):
                break
            ids.append(item)
        return tuple(ids)
    return tuple(nvml_ids())


def sweep_devices(
    settings: LauncherSettings, environ: Mapping[str, str], nvml_ids: Callable[[], list[str]]
) -> tuple[str, ...]:
    """The devices the slots are spread over: the chosen GPUs, or (CPU,) when there are none."""
    if settings.gpus is None:
        gpus = visible_gpus(environ, nvml_ids)
    else:
        gpus = settings.gpus
        known = nvml_ids()
        missing = [g for g in gpus if g.isdigit() and known and g not in known]
        if missing:
            raise LauncherSettingsError(
                f"hydra.launcher.gpus={list(gpus)}: no GPU {', '.join(missing)} on this machine "
                f"(NVML sees {', '.join(known)}); pick from those, or gpus=auto"
            )
    return gpus if gpus else (CPU,)


def device_label(device: str) -> str:
    """How the console names a device: `cpu`, `gpu 1`; a place a backend reported (Ray's
    `0@10.0.0.5/3f2a9c1b`) or a slot group (Ray's `ray:0`) as it is."""
    if device == CPU:
        return "cpu"
    return f"gpu {device}" if device.isdigit() or GPU_UUID.match(device) else device


def slots_per_device(settings: LauncherSettings, devices: Sequence[str]) -> int:
    if tuple(devices) != (CPU,):
        return settings.jobs_per_gpu
    assert settings.n_jobs is not None, "parse_settings resolves n_jobs"
    return settings.n_jobs


class SlotPool:
    """Round-robin over the devices that have a free slot.

    Job i of a sweep of equal jobs goes to device i mod N. When a slot frees, the next job takes
    the next device in round-robin order that has a free slot, so a device whose job ended early
    is not left idle while others queue; no device ever holds more than `slots` jobs.
    """

    def __init__(self, devices: Sequence[str], slots: int) -> None:
        if not devices or slots < 1:
            raise ValueError(f"SlotPool needs devices and slots >= 1, got {devices!r}, {slots}")
        self.devices = tuple(devices)
        self.slots = slots
        self.busy = dict.fromkeys(self.devices, 0)
        self.reserved: set[str] = set()  # devices draining for a job that needs one whole
        self.short: set[str] = set()  # GPUs without a job's memory share free (other users)
        self._next = 0  # where the round-robin resumes

    def grow(self, devices: Sequence[str] = (), slots: int = 0) -> None:
        """Take on more devices, or more slots on each (a Ray cluster that gained nodes);
        never fewer: jobs already placed keep their slots."""
        added = [d for d in devices if d not in self.busy]
        self.devices = (*self.devices, *added)
        self.busy |= dict.fromkeys(added, 0)
        self.slots = max(self.slots, slots)

    def has_free(self) -> bool:
        return any(self._open(d) for d in self.devices)

    def _open(self, device: str) -> bool:
        return (
            device not in self.reserved
            and device not in self.short
            and self.busy[device] < self.slots
        )

    def in_turn(self) -> list[str]:
        """The devices in the order the round-robin will next offer them."""
        n = len(self.devices)
        return [self.devices[(self._next + step) % n] for step in range(n)]

    def acquire(self) -> str:
        """Take a slot on the next device in round-robin order that has one free."""
        for step in range(len(self.devices)):
            i = (self._next + step) % len(self.devices)
            device = self.devices[i]
            if self._open(device):
                self.busy[device] += 1
                self._next = (i + 1) % len(self.devices)
                return device
        raise RuntimeError("acquire() with every slot busy: check has_free() first")

    def acquire_whole(self, device: str) -> bool:
        """Take every slot of `device` for one job, once its running jobs have ended.

        Until then the device is reserved: it takes no new job, so it cannot be starved.
        """
        if self.busy[device]:
            self.reserved.add(device)
            return False
        self.reserved.discard(device)
        self.busy[device] = self.slots
        return True

    def release(self, device: str, whole: bool = False) -> None:
        if self.busy.get(device, 0) < (self.slots if whole else 1):
            raise RuntimeError(f"release({device!r}) without a slot taken on it")
        self.busy[device] = 0 if whole else self.busy[device] - 1
