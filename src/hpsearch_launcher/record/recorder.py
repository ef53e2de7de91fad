"""Turns each job's end into its results.csv row and the JobReturn the sweeper gets.

The scheduling loop reports what happened; this decides what is written and returned. A
JobReturn is made here only for a job whose process handed none back (resumed, or failed
without a return from the task).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from omegaconf import OmegaConf

from ..contract import REPORTS_FILE
from ..hydra_line import CARRIES_TASK_TRACEBACK
from ..notices import once_per_sweep
from ..outcome import Ending, Outcome, Status, status_of
from ..plan.jobs import Job, task_config
from ..plan.slots import device_label
from .adopt import Adopter
from .attempt import Attempt
from .lock import SweepLock
from .reports import ReportReader
from .rows import (
    LAST_STEP,
    LAST_VALUE,
    PRUNED_STEP,
    final_metrics,
    in_form_of,
    iso_time,
    loaded_return,
    return_columns,
    stored_return,
)
from .superseded import move_aside
from .table import TAIL, ResultsTable

log = logging.getLogger("hpsearch.launcher")


class JobFailed(CompactHydraException):
    """A job that did not return: its process died, timed out or was interrupted."""


class Recorder:
    """The sweep's records, kept across its launch() calls (Optuna launches a batch at a time):
    writes each job's row into the table, and knows which earlier rows resume may reuse."""

    def __init__(
        self,
        table: ResultsTable,
        first_new_job: int,
        lock: SweepLock | None = None,
        resume: bool = True,
    ) -> None:
        self.table = table
        self.lock = lock  # the sweep dir, this sweep's while the records are kept
        self.first_new_job = first_new_job  # rows below it are from earlier runs of the sweep
        # The number of this run's next job that is not resumed (a resumed job keeps its row's).
        self.next_job = first_new_job
        self.notices = once_per_sweep(log)  # about tasks' output
        self.reused: set[int] = set()  # earlier rows already handed to a job of this run
        # How earlier runs wrote run_dir (relative or absolute): this run's rows follow it.
        self.run_dir_like = next((d for r in table.rows.values() if (d := r.get("run_dir"))), "")
        self.adopter = Adopter(table.rows)  # ends a killed run left in run dirs, unrecorded
        self.resume = resume  # False: nothing an earlier run left is reused, adopted ends too

    def resumable(self) -> dict[str, list[dict[str, str]]]:
        """Earlier runs' finished rows not yet reused, by config hash, in job order."""
        return {
            digest: kept
            for digest, rows in self.table.finished().items()
            if (
                kept := [
                    r
                    for r in rows
                    if int(r["job"]) < self.first_new_job and int(r["job"]) not in self.reused
                ]
            )
        }

    def numbered(self, job: Job) -> Job:
        """`job`, made with the number `next_job` gave it: a new job took that number, so the
        next goes on from it; a resumed one keeps its row's number and takes none (the
        console, results.csv and hydra.job.num then agree, with no gaps)."""
        self.next_job += job.previous is None
        return job

    def resumed(self, job: Job) -> JobReturn:
        """A job that finished in an earlier run: its row keeps the status it ended with
        (completed or pruned: what the job did, as a resumed search's rows keep theirs, so
        `status == "completed"` finds every finished run), its return value goes back."""
        assert job.previous is not None
        self.reused.add(int(job.previous["job"]))
        row = dict(job.previous)
        if row.get("status") == Status.RESUMED.value:  # so an earlier version named it
            row["status"] = Status.COMPLETED.value
        self.table.put(row, job.params)
        return make_return(job, JobStatus.COMPLETED, loaded_return(row), row["run_dir"])

    def adopt(self, job: Job) -> tuple[JobReturn, list[tuple[int, float]]] | None:
        """A job whose end a killed run of the sweep left in its run dir, unrecorded: recorded
        now as completed, not run again. Its return, and what it reported, for the source.
        None with resume=false: an earlier run's end is not this sweep's."""
        adopted = self.adopter.find(job) if self.resume else None
        if adopted is None:
            return None
        reports = ReportReader(adopted.run_dir / REPORTS_FILE)
        points = reports.read()
        ret = make_return(job, JobStatus.COMPLETED, adopted.value, str(adopted.run_dir))
        outcome = Outcome(Ending.RETURNED, job_return=ret)
        step, value = reports.last
        ret = self.write_end(
            Attempt(job, outcome, "", adopted.ended, 1, adopted.run_dir, (), step, value)
        )
        return ret, points

    def free_run_dir(self, job: Job, path: Path) -> None:
        """Before `job` claims `path`: move an earlier run's unfinished attempt out of it (into
        superseded/), so the re-run gets the plain name: one its config's rows name, or one a
        killed run left with no row. With resume=false, an earlier run's dirs are left alone."""
        if not self.resume or not path.is_dir():
            return
        try:
            abandoned = self.adopter.abandoned(path)
            moved = move_aside(self.table, path, job.config_hash, self.first_new_job, abandoned)
        except OSError as err:  # the job still runs, in `name~2` as before
            log.warning("hpsearch: could not move the earlier attempt in %s aside: %s", path, err)
            return
        if moved is not None:
            log.info("job %d: the earlier unfinished attempt in %s is now %s", job.num, path, moved)

    def write_end(self, attempt: Attempt) -> JobReturn:
        """Record a job's last attempt; return what the sweeper gets for it. A pruned job
        returns its last value, as completed (a grid's sweeper must not fail on it: the
        pruner judged, the job did not fail)."""
        job, outcome, value = attempt.job, attempt.outcome, attempt.value
        if outcome.ok and outcome.detail:  # the child replaced an unpicklable return value
            self.notices.warn("return-pickle", f"job {job.num}'s return value: {outcome.detail}")
        if outcome.leftovers:
            self.notices.warn("leftovers", left_running(job.num, outcome.leftovers))
        row = self._row(attempt, value)
        self.table.supersede(job.config_hash, self.first_new_job, job.num)
        self.table.put(row, job.params)
        ret = attempt.job_return
        if outcome.ok:
            assert ret is not None
            return ret
        if outcome.ending is Ending.PRUNED:
            return make_return(job, JobStatus.COMPLETED, value, str(attempt.run_dir))
        return self._failed(job, outcome, ret, attempt.device, attempt.run_dir)

    def _row(self, attempt: Attempt, value: Any) -> dict[str, Any]:
        """The attempt's results row: status, the values (the return value's columns win
        over metrics.json's), its last report, then the fixed tail (columns.TAIL)."""
        job, outcome = attempt.job, attempt.outcome
        row: dict[str, Any] = {"job": job.num, "status": status_of(outcome).value}
        if outcome.ok:
            row |= return_columns(value, job.num, self.notices)
        metrics = final_metrics(attempt.run_dir, job.num, self.notices)
        row |= {k: v for k, v in metrics.items() if k not in row}
        if attempt.last_step is not None:
            row |= {LAST_STEP: attempt.last_step, LAST_VALUE: attempt.last_value}
        if attempt.pruned_step is not None:
            row[PRUNED_STEP] = attempt.pruned_step
        ended = time.time()
        tail = {  # None is written "" (unknown, none)
            "device": attempt.device,
            "gpu_peak_mb": attempt.peak_mb,
            "gpu_cap_mb": attempt.cap_mb,
            "start": iso_time(attempt.started),
            "end": iso_time(ended),
            "wall_time_s": round(ended - attempt.started, 3),
            "attempts": attempt.attempts,
            "leftovers": None if outcome.leftovers is None else len(outcome.leftovers),
            "run_dir": in_form_of(attempt.run_dir, self.run_dir_like),
            "config_hash": job.config_hash,
            "error": attempt.error,
            # Completed or pruned: its return value is stored for resume.
            "return": stored_return(value, job.num, self.notices) if outcome.finished else "",
        }
        assert tuple(tail) == TAIL, "a fixed column is declared in columns.TAIL, filled here"
        return row | tail

    def _failed(
        self, job: Job, outcome: Outcome, ret: JobReturn | None, device: str, run_dir: Path
    ) -> JobReturn:
        # The sweeper raises what a failed JobReturn holds. Where Hydra carries the task's
        # traceback and cause back (1.4), that is the task's own exception, as from any
        # launcher, noted with the job and its logs: Hydra prints the task's frames. Otherwise
        # one line naming the job, its reason and its logs (Hydra prints a compact error), the
        # task's exception, if it raised one, its cause; its traceback is in stderr.log.
        where = f"job {job.num} ({job.label}) on {device_label(device)}"
        if ret is not None and CARRIES_TASK_TRACEBACK:
            ret._return_value.add_note(f"{where}; logs in {run_dir}")
            return ret
        failure = JobFailed(f"{where}: {outcome.reason}; logs in {run_dir}")
        if ret is not None:
            failure.__cause__ = ret._return_value
            ret._return_value = failure
            return ret
        cwd = str(run_dir) if job.config.hydra.job.chdir else os.getcwd()
        return make_return(job, JobStatus.FAILED, failure, cwd)


def make_return(job: Job, status: JobStatus, value: Any, working_dir: str) -> JobReturn:
    """A JobReturn made in the sweep process, as Hydra's run_job would have filled it."""
    ret = JobReturn(
        overrides=list(job.overrides),
        cfg=task_config(job.config),
        hydra_cfg=OmegaConf.create({"hydra": job.config.hydra}),
        working_dir=working_dir,
        task_name=str(job.config.hydra.job.name),
        status=status,
    )
    ret._return_value = value
    return ret


def left_running(num: int, leftovers: tuple[str, ...], most: int = 3) -> str:
    """What a job left running, said once: results.csv's `leftovers` counts it for each job."""
    shown = ", ".join(leftovers[:most]) + (", ..." if len(leftovers) > most else "")
    return (
        f"job {num} left {len(leftovers)} process(es) running when it ended: {shown}; they "
        "were ended with it, as every job's are (results.csv: leftovers; "
        "hydra.launcher.keep_daemons=true keeps them)"
    )
