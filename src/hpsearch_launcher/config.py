"""The launcher's settings as one typed config dataclass: the single source of every setting,
its type and its default. Hydra registers it under `hydra/launcher=hpsearch`; OmegaConf rejects
a value of the wrong type; `plan.settings.parse_settings` applies the rules types cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RayConf:
    # "" starts a Ray on this machine for the sweep (stopped after); "auto" joins the cluster
    # this machine is part of (`ray start`); "ray://host:10001" connects a Ray client.
    address: str = ""
    # CPUs each job holds on its node (a number > 0); also its thread count.
    num_cpus: float = 1
    # Keyword arguments for ray.init when the sweep starts its own Ray (address ""): e.g.
    # {num_gpus: 2, num_cpus: 8}. A running cluster's resources are its own to set.
    init: dict[str, Any] = field(default_factory=dict)


@dataclass
class HpsearchLauncherConf:
    _target_: str = "hydra_plugins.hpsearch_launcher.hpsearch_launcher.HpsearchLauncher"
    # "auto" (CUDA_VISIBLE_DEVICES if set, else NVML's GPUs, else none), or a list of GPU ids
    # used as given ([] runs on the CPU).
    gpus: Any = "auto"
    # Jobs that share one GPU at a time (slots per GPU), an integer >= 1.
    jobs_per_gpu: int = 1
    # Each job's share of its GPU's memory, in (0, 1]; null: 0.9 / jobs_per_gpu.
    memory_fraction: Any = None
    # Jobs at once when there is no GPU; null: the number of CPU cores (cgroup quotas counted).
    n_jobs: Any = None
    # Per-job wall-clock limit in seconds; the job's process tree is killed past it. null: none.
    timeout: Any = None
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
    # the whole memory.
    max_oom_retries: int = 1
    # Other failures (an exception, a crash, a timeout) run again up to this many times.
    max_retries: int = 0
    # With NVML: a GPU takes a job only when it has the job's memory share free, counting what
    # other users' processes hold; until then its jobs wait (other GPUs go on). false: never ask.
    wait_for_free_memory: bool = True
    # Warm start: while a slot's job runs, its next job's process is made and waits, imports
    # done, touching no GPU; still one fresh process per job. false: each process starts cold.
    warm_start: bool = True
    # Modules a waiting process imports ahead of its job (e.g. [tensorflow] or [torch]).
    preload: list[str] = field(default_factory=list)
    # Where jobs run: "local" (processes on this machine) or "ray" (Ray tasks, one fresh worker
    # process each, on a Ray cluster: pip install "hpsearch[ray]"; see `ray` below).
    backend: str = "local"
    ray: RayConf = field(default_factory=RayConf)
