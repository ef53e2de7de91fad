"""`jobs_per_gpu: auto`: each GPU takes jobs by the memory they are known to need, not by count.

Pure: what NVML said and what jobs measured go in; how many more jobs fit, and each job's
reservation (which is also its hard cap), come out.

- A job's *kind* is what decides its memory: by default its config-group choices (a different
  model group, a different kind), or the values of the keys `memory_keys` names.
- A kind is *known* once one of its jobs ended with a measured peak; its jobs then reserve
  `need_mb(peak)`, the largest peak seen for the kind plus a margin, and run capped at it, so
  no job can take a neighbour's memory.
- A job of an unknown kind (the first of its kind, or one whose kind just ran out of memory)
  runs alone on a GPU with the whole memory, and is measured.
- A GPU's usable memory is its total less the headroom (DEFAULT_MEMORY_SHARE), less what other
  users' processes hold; jobs that started but have not allocated yet count at their
  reservation, never as free memory.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..config import DEFAULT_MEMORY_SHARE
from ..nvml import GpuMemory
from .memory import others_mb
from .settings import AUTO

MARGIN = 0.10  # a known kind's reservation: its largest measured peak, 10% more...
MARGIN_MB = 128  # ...and this (allocator rounding, a CUDA context's growth)

Kind = Hashable


def need_mb(peak_mb: float) -> int:
    """What a job whose kind peaked at `peak_mb` reserves, and is capped at."""
    return math.ceil(peak_mb * (1 + MARGIN)) + MARGIN_MB


def usable_mb(total_mb: int) -> int:
    """What jobs may hold of a GPU of `total_mb`: the rest is headroom."""
    return int(total_mb * DEFAULT_MEMORY_SHARE)


def kind_of(config: DictConfig, memory_keys: Sequence[str]) -> Kind:
    """The job's kind: its config-group choices (Hydra's own groups left out), or with
    `memory_keys`, the values of those keys (a group's choice where the key is a group)."""
    choices: Mapping[str, Any] = OmegaConf.select(config, "hydra.runtime.choices") or {}
    if not memory_keys:
        return tuple(
            sorted(
                (str(k), str(v))
                for k, v in choices.items()
                if k != "hydra" and not str(k).startswith("hydra/")
            )
        )
    values = []
    for key in memory_keys:
        if key in choices:
            values.append(str(choices[key]))
            continue
        value = OmegaConf.select(config, key, default=_MISSING)
        if value is _MISSING:
            raise KeyError(key)
        values.append(str(OmegaConf.to_container(value) if OmegaConf.is_config(value) else value))
    return tuple(values)


_MISSING = object()


class Estimates:
    """What each kind is known to need: its largest measured peak (MB)."""

    def __init__(self) -> None:
        self.peaks: dict[Kind, int] = {}
        self._unsure: set[Kind] = set()  # ran out of memory since: measured again, alone

    def need(self, kind: Kind) -> int | None:
        """The reservation of a job of `kind`; None: not known, it runs alone."""
        if kind in self._unsure or kind not in self.peaks:
            return None
        return need_mb(self.peaks[kind])

    def learn(self, kind: Kind, peak_mb: int) -> None:
        """A job of `kind` ended having held `peak_mb` at most (> 0: it was measured)."""
        self.peaks[kind] = max(self.peaks.get(kind, 0), peak_mb)
        self._unsure.discard(kind)

    def outgrown(self, kind: Kind) -> None:
        """A job of `kind` ran out of memory under its cap: until one is measured again
        (its retry, alone), the kind's jobs run alone."""
        self._unsure.add(kind)


class GpuBook:
    """Each GPU's reservations, and what other users hold of it (from NVML's last answer)."""

    def __init__(self, totals: Mapping[str, int]) -> None:
        self.totals = dict(totals)
        self.reserved: dict[str, dict[Hashable, int]] = {g: {} for g in totals}
        self.others: dict[str, int] = dict.fromkeys(totals, 0)

    def observe(self, readings: Mapping[str, GpuMemory]) -> None:
        """What other users' processes hold now, from NVML (not counting our jobs)."""
        for group, memory in readings.items():
            if group in self.others:
                self.others[group] = others_mb(memory, sum(self.reserved[group].values()))

    def room(self, group: str) -> int:
        """MB of `group` no job holds or has reserved, and no other user holds."""
        free = usable_mb(self.totals[group]) - self.others[group]
        return free - sum(self.reserved[group].values())

    def fits(self, group: str, need: int | None) -> bool:
        """Whether a job reserving `need` MB (None: the whole GPU, alone) may start there."""
        if need is None:
            return not self.reserved[group] and self.room(group) > 0
        return self.room(group) >= need

    def count(self, group: str, need: int | None) -> int:
        """How many more jobs reserving `need` (None: alone) fit on `group` now."""
        if need is None:
            return int(self.fits(group, None))
        return max(0, self.room(group)) // need

    def reserve(self, group: str, token: Hashable, need: int | None) -> int:
        """Book `need` MB (None: all there is) on `group` for the job `token`; the MB booked."""
        booked = max(1, self.room(group)) if need is None else need
        self.reserved[group][token] = booked
        return booked

    def release(self, token: Hashable) -> None:
        """The job's process is gone: its reservation is free."""
        for held in self.reserved.values():
            held.pop(token, None)


def advice(peaks_mb: Iterable[int], totals_mb: Iterable[int], jobs_per_gpu: Any) -> str:
    """The end-of-sweep line on how full the GPUs were: the largest peak a job measured, of
    the GPU's memory; with jobs_per_gpu set by hand, how many such jobs `auto` would run."""
    peaks, totals = [p for p in peaks_mb if p > 0], list(totals_mb)
    if not peaks or not totals:
        return ""
    peak, total = max(peaks), min(totals)
    line = f"GPU memory: jobs peaked at {_gb(peak)} of {_gb(total)}"
    if jobs_per_gpu == AUTO:
        return line
    fit = max(1, usable_mb(total) // need_mb(peak))
    if fit == jobs_per_gpu:
        return f"{line}: jobs_per_gpu={jobs_per_gpu} is what fits"
    return f"{line} (jobs_per_gpu={jobs_per_gpu}): jobs_per_gpu=auto would run {fit} per GPU"


def _gb(mb: int) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb} MB"
