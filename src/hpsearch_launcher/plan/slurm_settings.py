"""hydra.launcher.slurm (or, with hydra/launcher=hpsearch_slurm, hydra.launcher itself): the
SLURM backend's settings, hydra-submitit-launcher's SlurmQueueConf keys with their meaning,
checked before anything is submitted. Pure: no submitit, no SLURM. What a key cannot mean here
(a job of several processes, a sweep that does not wait) is refused in one line."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..config import SlurmSettings
from .refusal import fail, flag, whole

# The keys a user's submitit_slurm config holds in hydra.launcher itself.
FLAT_KEYS = frozenset(f.name for f in dataclasses.fields(SlurmSettings))
_WHOLE = {  # key: the least it may be
    "timeout_min": 1,
    "cpus_per_task": 1,
    "gpus_per_node": 0,
    "gpus_per_task": 0,
    "mem_gb": 1,
    "cpus_per_gpu": 1,
    "signal_delay_s": 0,
    "max_num_timeout": 0,
    "array_parallelism": 1,
}
_ONE_PROCESS = "must be 1: each job is one fresh process (hpsearch runs no multi-task job)"


def parse_slurm(params: Mapping[str, Any]) -> SlurmSettings:
    """The SLURM section, its keys already checked and its defaults overlaid."""
    values = dict(params)
    for key, least in _WHOLE.items():
        if values[key] is not None:
            values[key] = whole(f"slurm.{key}", values[key], least, f"slurm.{key}={least + 1}")
    for key in ("nodes", "tasks_per_node"):
        if values[key] != 1:
            raise fail(f"slurm.{key}", values[key], _ONE_PROCESS, f"slurm.{key}=1")
    if flag("slurm.stderr_to_stdout", values["stderr_to_stdout"]):
        raise fail(
            "slurm.stderr_to_stdout",
            True,
            "must be false: each job keeps its own stderr.log, whose last error line is its "
            "row's reason",
            "slurm.stderr_to_stdout=false",
        )
    if not flag("slurm.wait_for_completion", values["wait_for_completion"]):
        raise fail(
            "slurm.wait_for_completion",
            False,
            "must be true: hpsearch records every job's end and result",
            "slurm.wait_for_completion=true",
        )
    for key in ("setup", "srun_args"):
        if values[key] is not None and not isinstance(values[key], (list, tuple)):
            raise fail(f"slurm.{key}", values[key], "must be a list of strings", f"slurm.{key}=[]")
    if not isinstance(values["additional_parameters"] or {}, Mapping):
        raise fail(
            "slurm.additional_parameters",
            values["additional_parameters"],
            "must be a mapping of sbatch options to values",
            "slurm.additional_parameters.mail-type=END",
        )
    values["additional_parameters"] = dict(values["additional_parameters"] or {})
    return SlurmSettings(**values)


def asks_gpus(slurm: SlurmSettings) -> bool:
    """Whether each job asks SLURM for GPUs (then SLURM sets its CUDA_VISIBLE_DEVICES)."""
    return bool(slurm.gpus_per_node or slurm.gpus_per_task or "gpu" in (slurm.gres or ""))
