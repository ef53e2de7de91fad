"""The launcher's settings, declared once: every setting's name, type, default and meaning.

`LauncherSettings` is what the sweep reads (frozen, made by `plan.settings.parse_settings`, which
checks what a type cannot say). `HpsearchLauncherConf`, what Hydra registers as
`hydra/launcher=hpsearch`, is derived from it field by field, so OmegaConf rejects a value of
the wrong type on the command line and a setting exists in one place only.

No `from __future__ import annotations`: OmegaConf reads these annotations as types.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

TARGET = "hydra_plugins.hpsearch_launcher.hpsearch_launcher.HpsearchLauncher"
# Headroom left on each GPU for the CUDA context and the allocator's fragmentation.
DEFAULT_MEMORY_SHARE = 0.9


@dataclass(frozen=True)
class RaySettings:
    # "" starts a Ray on this machine for the sweep (stopped after); "auto" joins the cluster
    # this machine is part of (`ray start`); "ray://host:10001" connects a Ray client.
    address: str = ""
    # CPUs each job holds on its node (a number > 0); also its thread count.
    num_cpus: float = 1.0
    # Keyword arguments for ray.init when the sweep starts its own Ray (address ""): e.g.
    # {num_gpus: 2, num_cpus: 8}. A running cluster's resources are its own to set.
    init: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SlurmSettings:
    # hydra-submitit-launcher's SlurmQueueConf keys, with its meaning (hydra/launcher=
    # hpsearch_slurm takes them as it does, in hydra.launcher itself). Where submitit writes
    # each job's sbatch file, pickles and SLURM logs ("": <sweep dir>/.submitit/%j).
    submitit_folder: str = ""
    # Each job's SLURM time limit in minutes (sbatch --time); past it SLURM ends it: TIMEOUT.
    timeout_min: int = 60
    # CPUs each job holds (sbatch --cpus-per-task); null: SLURM's default (1). Its thread count.
    cpus_per_task: Optional[int] = None  # noqa: UP045
    # GPUs each job holds (sbatch --gpus-per-node); SLURM picks them and sets
    # CUDA_VISIBLE_DEVICES. null: none, unless gpus_per_task or gres asks.
    gpus_per_node: Optional[int] = None  # noqa: UP045
    # GPUs of the job's one task (sbatch --gpus-per-task); null: see gpus_per_node.
    gpus_per_task: Optional[int] = None  # noqa: UP045
    # Tasks per node: must be 1 (each job is one fresh process).
    tasks_per_node: int = 1
    # Memory each job holds in GB (sbatch --mem); null: the cluster's DefMemPerCPU.
    mem_gb: Optional[int] = None  # noqa: UP045
    # Nodes per job: must be 1 (each job is one fresh process).
    nodes: int = 1
    # The SLURM job name ("": hpsearch).
    name: str = ""
    # Must be false: each job keeps its stderr.log (its last error line is the row's reason).
    stderr_to_stdout: bool = False
    # Must be true: the sweep waits for every job (a newer hydra-submitit-launcher's key).
    wait_for_completion: bool = True
    # sbatch's --partition, --qos, --comment, --constraint, --exclude, --gres (e.g.
    # gpu:1), --cpus-per-gpu, --mem-per-gpu, --mem-per-cpu and --account; null: not given.
    partition: Optional[str] = None  # noqa: UP045
    qos: Optional[str] = None  # noqa: UP045
    comment: Optional[str] = None  # noqa: UP045
    constraint: Optional[str] = None  # noqa: UP045
    exclude: Optional[str] = None  # noqa: UP045
    gres: Optional[str] = None  # noqa: UP045
    cpus_per_gpu: Optional[int] = None  # noqa: UP045
    mem_per_gpu: Optional[str] = None  # noqa: UP045
    mem_per_cpu: Optional[str] = None  # noqa: UP045
    account: Optional[str] = None  # noqa: UP045
    # Seconds before the time limit that SLURM signals the job (USR2, submitit's --signal).
    signal_delay_s: int = 120
    # A job that SLURM ends at its time limit or preempts (or that `scontrol requeue` sends
    # back) runs again as a new attempt up to this many times (counted in `attempts`).
    max_num_timeout: int = 0
    # More sbatch options by name, e.g. {mail-type: END}.
    additional_parameters: dict[str, Any] = field(default_factory=dict)
    # The most SLURM jobs of the sweep queued or running at once: jobs are submitted one by
    # one as earlier ones end (never as an array: no MaxArraySize limit).
    array_parallelism: int = 256
    # Shell lines run in the sbatch script before the job (e.g. [module load cuda]).
    setup: Optional[list[str]] = None  # noqa: UP045
    # Extra arguments of the srun that starts the job's process.
    srun_args: Optional[list[str]] = None  # noqa: UP045


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
    ray: RaySettings = field(default_factory=RaySettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)

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


def hydra_config_class(
    settings: type,
    name: str,
    target: str | None = None,
    nested: dict[type, type] | None = None,
    defaults: list[Any] | None = None,
    beside: type | None = None,
    values: dict[str, Any] | None = None,
) -> type:
    """A plain (mutable) dataclass with `settings`' fields, types and defaults, `_target_`
    first: what Hydra's ConfigStore and OmegaConf need. `nested` maps a settings class used as
    a field's type to its config class. With `defaults` (Hydra's defaults list for the node,
    its groups' nodes carrying `_target_`s of their own), instantiating the node leaves those
    nodes as configs (`_recursive_: false`): the plugin checks and makes them itself. `beside`:
    a section's settings class whose fields come after, at the same level, instead of the
    section; `values`: defaults that differ from the declared ones."""
    fields: list[tuple[str, Any, Any]] = []
    if target is not None:
        fields.append(("_target_", str, field(default=target)))
    if defaults is not None:
        fields.append(("_recursive_", bool, field(default=False)))
    if defaults is not None:
        fields.append(("defaults", list[Any], field(default_factory=lambda: list(defaults))))
    own = [f for f in dataclasses.fields(settings) if beside is None or f.type is not beside]
    for f in (*own, *(dataclasses.fields(beside) if beside else ())):
        declared: Any = f.type
        kind = (nested or {}).get(declared, declared)
        if f.name in (values or {}):
            fields.append((f.name, kind, field(default=(values or {})[f.name])))
        elif f.default_factory is not dataclasses.MISSING:
            factory = kind if kind is not declared else f.default_factory
            fields.append((f.name, kind, field(default_factory=factory)))
        else:
            fields.append((f.name, kind, field(default=f.default)))
    cls = dataclasses.make_dataclass(name, fields)
    # Importable by name: Hydra's state, this class in it, is pickled for each job.
    cls.__module__, cls.__qualname__ = __name__, name
    return cls


RayConf = hydra_config_class(RaySettings, "RayConf")
SlurmConf = hydra_config_class(SlurmSettings, "SlurmConf")
_NESTED = {RaySettings: RayConf, SlurmSettings: SlurmConf}
HpsearchLauncherConf = hydra_config_class(LauncherSettings, "HpsearchLauncherConf", TARGET, _NESTED)
# hydra/launcher=hpsearch_slurm: the SLURM backend with hydra-submitit-launcher's keys where its
# submitit_slurm has them (hydra.launcher.partition, ...): a user's config moves by its name.
HpsearchSlurmLauncherConf = hydra_config_class(
    LauncherSettings,
    "HpsearchSlurmLauncherConf",
    TARGET,
    _NESTED,
    beside=SlurmSettings,
    values={"backend": "slurm", "submitit_folder": "${hydra.sweep.dir}/.submitit/%j"},
)
