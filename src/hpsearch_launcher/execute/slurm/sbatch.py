"""The SLURM backend's submissions: hydra-submitit-launcher's keys as submitit's SlurmExecutor
takes them (`sbatch_parameters`, pure), and one job submitted through it (`Submitter`): one
`sbatch` per job, never an array, so nothing depends on the cluster's MaxArraySize."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...plan.slurm_settings import SlurmSettings

# hydra-submitit-launcher's key -> submitit SlurmExecutor's (as its AutoExecutor renames them).
_RENAMED = {
    "timeout_min": "time",
    "tasks_per_node": "ntasks_per_node",
    "name": "job_name",
    "mem_gb": "mem",
}
# Keys that mean something to hpsearch, not to sbatch.
_OURS = {"submitit_folder", "max_num_timeout", "array_parallelism", "wait_for_completion"}
DEFAULT_NAME = "hpsearch"


def sbatch_parameters(slurm: SlurmSettings) -> dict[str, Any]:
    """What submitit's SlurmExecutor.update_parameters is given for these settings: the keys
    renamed as submitit's AutoExecutor renames them, those left unset (None) out."""
    given = {
        _RENAMED.get(key, key): value
        for key, value in dataclasses.asdict(slurm).items()
        if key not in _OURS and value is not None
    }
    given["job_name"] = given["job_name"] or DEFAULT_NAME
    if "mem" in given:
        given["mem"] = f"{given['mem']}GB"
    if not given["additional_parameters"]:
        del given["additional_parameters"]
    return given


class Submitter:
    """submitit's SlurmExecutor, set up once for the sweep: `submit` is one sbatch."""

    def __init__(self, slurm: SlurmSettings, folder: Path) -> None:
        import submitit

        # Requeues are the sweep's (a new attempt, counted), not submitit's checkpointing.
        self.executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
        self.executor.update_parameters(**sbatch_parameters(slurm))

    def submit(self, function: Callable[..., Any], *args: Any) -> tuple[str, Path]:
        """Submit `function(*args)` as one SLURM job: its id, and the file its result will
        be pickled to (submitit's ("success", value) or ("error", traceback))."""
        job = self.executor.submit(function, *args)
        return str(job.job_id), Path(job.paths.result_pickle)
