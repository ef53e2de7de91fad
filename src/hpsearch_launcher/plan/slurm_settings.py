"""hydra.launcher.slurm (or, with hydra/launcher=hpsearch_slurm, hydra.launcher itself): the
SLURM backend's settings, hydra-submitit-launcher's SlurmQueueConf keys with their meaning,
checked before anything is submitted. Pure: no submitit, no SLURM. What a key cannot mean here
(a job of several processes, a sweep that does not wait) is refused in one line."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ..config import LauncherSettings
from .refusal import fail, flag, whole


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


def slurm_of(settings: LauncherSettings) -> SlurmSettings:
    """The sweep's SLURM settings (hydra.launcher.slurm), as parsed."""
    slurm: SlurmSettings = settings.section("slurm")
    return slurm


def asks_gpus(slurm: SlurmSettings) -> bool:
    """Whether each job asks SLURM for GPUs (then SLURM sets its CUDA_VISIBLE_DEVICES)."""
    return bool(slurm.gpus_per_node or slurm.gpus_per_task or "gpu" in (slurm.gres or ""))
