"""The launcher's settings, declared once: every setting's name, type, default and meaning.

`LauncherSettings` is what the sweep reads (frozen, made by `plan.settings.parse_settings`, which
checks what a type cannot say). What Hydra registers as `hydra/launcher=hpsearch` is derived
from it field by field (`hydra_config_class`, in launcher_conf.py, with each backend's section
from the backend table), so OmegaConf rejects a value of the wrong type on the command line
and a setting exists in one place only.

No `from __future__ import annotations`: OmegaConf reads these annotations as types.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

TARGET = "hydra_plugins.hpsearch_launcher.hpsearch_launcher.HpsearchLauncher"
# A field's metadata key: the sweep fills it itself, a user sets no such key.
INTERNAL = "internal"
# Headroom left on each GPU for the CUDA context and the allocator's fragmentation.
DEFAULT_MEMORY_SHARE = 0.9


@dataclass(frozen=True)
class LauncherSettings:
    # "auto" (CUDA_VISIBLE_DEVICES if set, else NVML's GPUs, else none), or a list of GPU ids
    # used as given ([] runs on the CPU). Checked: None for "auto", else a tuple of ids.
    gpus: Any = "auto"
    # Jobs that share one GPU at a time (slots per GPU), an integer >= 1; or "auto": as many as
    # their measured memory fits (the first job of each kind runs alone and is measured; the
    # kind's next jobs reserve, and are capped at, its peak plus a margin). Checked: int or "auto".
    jobs_per_gpu: Any = 1
    # With jobs_per_gpu=auto: the config keys (swept or not) that change a job's memory, e.g.
    # [model, batch]; jobs differing in them are measured and packed apart. []: the jobs'
    # config-group choices decide.
    memory_keys: tuple[str, ...] = ()
    # Each job's share of its GPU's memory, in (0, 1]; null: 0.9 / jobs_per_gpu.
    memory_fraction: Optional[float] = None  # noqa: UP045 - OmegaConf reads Optional
    # Jobs at once when there is no GPU; null: the number of CPU cores (cgroup quotas counted).
    n_jobs: Optional[int] = None  # noqa: UP045
    # Per-job wall-clock limit in seconds; the job's process tree is killed past it. null: none.
    timeout: Optional[float] = None  # noqa: UP045
    # TF_FORCE_GPU_ALLOW_GROWTH for each job: allocate GPU memory as needed, up to the cap.
    allow_growth: bool = True
    # Extra environment variables for every job; those the launcher sets itself (the GPU, its
    # memory cap, HPSEARCH_*) are refused: use the setting that controls them.
    env: dict[str, str] = field(default_factory=dict)
    # Skip jobs whose identical config already finished in this sweep dir (results.csv), and
    # number new jobs after the earlier run's; false runs every job again, numbered from 0.
    resume: bool = True
    # A job that runs out of memory (TensorFlow's ResourceExhaustedError, a CUDA OOM, or a
    # SIGKILL from the OOM killer) runs again up to this many times, alone on its GPU with
    # the whole memory (on the CPU: with no other job running beside it).
    max_oom_retries: int = 1
    # Other failures (an exception, a crash, a timeout) run again up to this many times.
    max_retries: int = 0
    # With NVML: a GPU takes a job only when it has the job's memory share free, counting what
    # other users' processes hold; until then its jobs wait (other GPUs go on). false: never
    # wait (each job's peak memory is still measured, where NVML answers).
    wait_for_free_memory: bool = True
    # Warm start, still one fresh process per job: true (or fork) forks each job's process from
    # one server per sweep that has the imports done, touching no GPU (back to spawn, with one
    # warning, where a fork is unsafe); spawn makes each slot's next process ahead, imports
    # done; false starts each process cold. Checked: "fork", "spawn" or "off".
    warm_start: Any = True
    # Modules a waiting process imports ahead of its job: "auto" (those the jobs are seen to
    # import), a list (e.g. [tensorflow]), or [] for none. Checked: None for "auto", else a tuple.
    preload: Any = "auto"
    # Stop a job early once its reports (hpsearch_launcher.report, once an epoch) are hopeless:
    # "none", or "median": its best value so far is worse than the median of the completed
    # jobs' values at the same step (a plain grid can prune too; Optuna searches set
    # hydra.sweeper.pruner instead). Its slot goes to the next job at once.
    prune: str = "none"
    # Which way reported values are better, for `prune`: max or min.
    prune_mode: str = "max"
    # Steps a job reports before `prune` may judge it (early epochs are noisy): 2, its first
    # judgement at step 1, as hydra.sweeper.pruner=median's n_warmup_steps=1.
    prune_warmup: int = 2
    # Seconds a pruned job has to stop by itself (should_stop(), e.g. after a checkpoint)
    # before its process tree is ended (SIGTERM, then SIGKILL a second later).
    prune_grace: float = 2.0
    # A job's leftover processes (those it started and left running: a server, a daemon that
    # called setsid or double-forked) are ended when the job's process ends, before its slot
    # takes the next job: on a GPU they would keep their memory. true keeps them running.
    keep_daemons: bool = False
    # Where jobs run: "local" (processes on this machine), "ray" (Ray tasks, one fresh worker
    # process each, on a Ray cluster: pip install "hpsearch[ray]"; see `ray` below) or "slurm"
    # (one SLURM job each, through submitit: pip install "hpsearch[slurm]"; see `slurm`).
    backend: str = "local"
    # Each backend's own settings by its section's name (hydra.launcher.ray.*, ...): declared
    # and parsed where the backend table (plan/backends.py) says, read with section().
    sections: dict[str, Any] = field(default_factory=dict, metadata={INTERNAL: True})

    def section(self, name: str) -> Any:
        """A backend's own settings (its section's dataclass), as parsed."""
        return self.sections[name]

    @property
    def warm(self) -> bool:
        """Whether job processes are made ahead (spawned spares, or a fork server)."""
        return self.warm_start != "off"

    @property
    def packed(self) -> bool:
        """jobs_per_gpu=auto: GPUs take jobs by their measured memory."""
        return self.jobs_per_gpu == "auto"

    @property
    def fraction(self) -> float:
        """Each job's share of its GPU's memory (auto: one job's, before it is measured)."""
        if self.memory_fraction is not None:
            return self.memory_fraction
        return round(DEFAULT_MEMORY_SHARE / (1 if self.packed else self.jobs_per_gpu), 4)


def user_fields(settings: type) -> list[dataclasses.Field[Any]]:
    """The settings a user sets in `settings` (a dataclass): its fields but those the sweep
    fills itself (LauncherSettings.sections, from the backend table's sections)."""
    return [f for f in dataclasses.fields(settings) if not f.metadata.get(INTERNAL)]


def hydra_config_class(
    settings: type,
    name: str,
    module: str,
    target: str | None = None,
    sections: dict[str, type] | None = None,
    defaults: list[Any] | None = None,
    flat: type | None = None,
    values: dict[str, Any] | None = None,
) -> type:
    """A plain (mutable) dataclass with `settings`' fields, types and defaults, `_target_`
    first: what Hydra's ConfigStore and OmegaConf need, named `name` in `module` (where the
    caller binds it: Hydra's state, this class in it, is pickled for each job). `sections` (a
    section's name -> its config class) come after, one field each. With `defaults` (Hydra's
    defaults list for the node, its groups' nodes carrying `_target_`s of their own),
    instantiating the node leaves those nodes as configs (`_recursive_: false`): the plugin
    checks and makes them itself. `flat`: a section's settings class whose fields come after at
    the same level, instead of the section; `values`: defaults that differ from the declared
    ones."""
    fields: list[tuple[str, Any, Any]] = []
    if target is not None:
        fields.append(("_target_", str, field(default=target)))
    if defaults is not None:
        fields.append(("_recursive_", bool, field(default=False)))
        fields.append(("defaults", list[Any], field(default_factory=lambda: list(defaults))))
    for f in (*user_fields(settings), *(dataclasses.fields(flat) if flat else ())):
        if f.name in (values or {}):
            fields.append((f.name, f.type, field(default=(values or {})[f.name])))
        elif f.default_factory is not dataclasses.MISSING:
            fields.append((f.name, f.type, field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, f.type, field(default=f.default)))
    fields += [(n, conf, field(default_factory=conf)) for n, conf in (sections or {}).items()]
    cls = dataclasses.make_dataclass(name, fields)
    cls.__module__, cls.__qualname__ = module, name
    return cls
