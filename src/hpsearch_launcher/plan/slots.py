"""Which GPUs a sweep uses and which slot each job takes: round-robin over free slots.

Words: a *GPU* is an id as nvidia-smi lists it; a *slot group* is what the pool hands out
slots of (a GPU id, `cpu`, or one GPU's worth of a Ray cluster, `ray:0`: a run's `group`); a
*placement* is where a backend says a job ran (Ray's `0@10.0.0.5/3f2a9c1b`), and results.csv's
`device` column is the placement, or the group where the backend chose none; an execution's
*resources* are all of them in words (`GPU 0,1`, `Ray (2 nodes, 4 GPUs)`).

Pure functions and a small state machine, tested with fake GPU ids; nothing here starts a
process or touches a GPU (NVML is asked only through a function you pass).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .settings import GPU_UUID, LauncherSettings, LauncherSettingsError

CPU = "cpu"  # the one slot group of a sweep without GPUs; GPU ids are digits or UUIDs


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
        given = f"hydra.launcher.gpus=[{','.join(gpus)}]"
        if gpus and not known:
            raise LauncherSettingsError(
                f"{given}: no NVIDIA driver or GPU found here (NVML "
                f"does not answer), so no GPU {', '.join(gpus)} for the jobs; use gpus=[] (the "
                "CPU), or gpus=auto (the GPUs CUDA_VISIBLE_DEVICES names, else the CPU)"
            )
        missing = [g for g in gpus if g.isdigit() and g not in known]
        if missing:
            raise LauncherSettingsError(
                f"{given}: no GPU {', '.join(missing)} on this machine "
                f"(NVML sees {', '.join(known)}); pick from those, or gpus=auto"
            )
    return gpus if gpus else (CPU,)


def device_label(device: str) -> str:
    """How the console names a slot group or a placement: `cpu`, `gpu 1`; a placement a
    backend reported (Ray's `0@10.0.0.5/3f2a9c1b`) or a Ray slot group (`ray:0`) as it is."""
    if device == CPU:
        return "cpu"
    return f"gpu {device}" if device.isdigit() or GPU_UUID.match(device) else device


def gpu_settings_unused(settings: LauncherSettings, devices: Sequence[str]) -> str | None:
    """The warning for GPU settings set where the jobs run on the CPU (they do nothing
    there: the sweep still runs, as a GPU box's config may be tried on a laptop); None when
    there are GPUs or none was set."""
    if tuple(devices) != (CPU,):
        return None
    unused = [f"jobs_per_gpu={settings.jobs_per_gpu}"] if settings.jobs_per_gpu != 1 else []
    if settings.memory_fraction is not None:
        unused.append(f"memory_fraction={settings.memory_fraction:g}")
    if not unused:
        return None
    why = "gpus=[]" if settings.gpus == () else "gpus=auto found no GPU"
    return (
        f"hpsearch: warning: hydra.launcher.{', '.join(unused)} does nothing here: the jobs "
        f"run on the CPU ({why}), n_jobs={settings.n_jobs} at a time "
        "(hydra.launcher.n_jobs sets that)"
    )


PACKED_SLOTS = 64  # jobs_per_gpu=auto: the most jobs one GPU holds (memory decides below it)


def slots_per_device(settings: LauncherSettings, devices: Sequence[str]) -> int:
    """Slots per group: jobs_per_gpu on GPUs (auto: PACKED_SLOTS), n_jobs on the CPU."""
    if tuple(devices) != (CPU,):
        return PACKED_SLOTS if settings.packed else int(settings.jobs_per_gpu)
    assert settings.n_jobs is not None, "parse_settings resolves n_jobs"
    return settings.n_jobs


class SlotPool:
    """Round-robin over the groups that have a free slot.

    Job i of a sweep of equal jobs goes to group i mod N. When a slot frees, the next job takes
    the next group in round-robin order that has a free slot, so a group whose job ended early
    is not left idle while others queue; no group ever holds more than `slots` jobs.
    """

    def __init__(self, groups: Sequence[str], slots: int) -> None:
        if not groups or slots < 1:
            raise ValueError(f"SlotPool needs groups and slots >= 1, got {groups!r}, {slots}")
        self.groups = tuple(groups)
        self.slots = slots
        self.busy = dict.fromkeys(self.groups, 0)
        self.reserved: set[str] = set()  # groups draining for a job that needs one whole
        # Most jobs a group may hold while other users' processes hold part of its memory.
        self.limits: dict[str, int] = {}
        self._next = 0  # where the round-robin resumes

    def grow(self, groups: Sequence[str] = (), slots: int = 0) -> None:
        """Take on more groups, or more slots on each (a Ray cluster that gained nodes);
        never fewer: jobs already placed keep their slots."""
        added = [g for g in groups if g not in self.busy]
        self.groups = (*self.groups, *added)
        self.busy |= dict.fromkeys(added, 0)
        self.slots = max(self.slots, slots)

    def limit(self, group: str, most: int) -> None:
        """Let `group` hold at most `most` jobs (fewer than its slots: its GPU's free memory
        has room for no more) until `unlimit`."""
        self.limits[group] = most

    def unlimit(self, group: str) -> None:
        self.limits.pop(group, None)

    def _capacity(self, group: str) -> int:
        return min(self.slots, self.limits.get(group, self.slots))

    def free(self) -> int:
        """Slots free on the groups that take jobs now."""
        open_groups = [g for g in self.groups if g not in self.reserved]
        return sum(max(0, self._capacity(g) - self.busy[g]) for g in open_groups)

    def has_free(self) -> bool:
        return any(self._open(d) for d in self.groups)

    def _open(self, group: str) -> bool:
        return group not in self.reserved and self.busy[group] < self._capacity(group)

    def in_turn(self) -> list[str]:
        """The groups in the order the round-robin will next offer them."""
        n = len(self.groups)
        return [self.groups[(self._next + step) % n] for step in range(n)]

    def acquire(self) -> str:
        """Take a slot on the next group in round-robin order that has one free."""
        for step in range(len(self.groups)):
            i = (self._next + step) % len(self.groups)
            group = self.groups[i]
            if self._open(group):
                self.busy[group] += 1
                self._next = (i + 1) % len(self.groups)
                return group
        raise RuntimeError("acquire() with every slot busy: check has_free() first")

    def acquire_whole(self, group: str) -> bool:
        """Take every slot of `group` for one job, once its running jobs have ended.

        Until then the group is reserved: it takes no new job, so it cannot be starved.
        """
        if self.busy[group]:
            self.reserved.add(group)
            return False
        self.reserved.discard(group)
        self.busy[group] = self.slots
        return True

    def release(self, group: str, whole: bool = False) -> None:
        if self.busy.get(group, 0) < (self.slots if whole else 1):
            raise RuntimeError(f"release({group!r}) without a slot taken on it")
        self.busy[group] = 0 if whole else self.busy[group] - 1


def spare_counts(pool: SlotPool, left: int) -> list[tuple[str, int]]:
    """Warm start: how many spare processes each group wants made ahead: one per busy slot,
    for at most `left` jobs still to start, in the order the round-robin will hand them out.
    Free slots need none (the queue fills them at once); a group draining for a job alone
    gets none until it is done."""
    counts = []
    for group in pool.in_turn():
        count = 0 if group in pool.reserved else min(pool.busy[group], left)
        if count:
            counts.append((group, count))
            left -= count
    return counts
