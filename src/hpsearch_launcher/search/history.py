"""What earlier runs of the sweep leave the search: the same command into the same sweep dir
continues it.

- In memory: the finished trials of the sweep dir's results.csv are told to the new study first
  (with the curves their jobs reported), so the sampler and the pruner keep what they learned;
  an interrupted trial's values are queued to run again.
- In a storage: the study and the sweep dir's record are reconciled (reconcile.py).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ..contract import REPORTS_FILE
from ..outcome import Status
from ..plan.naming import split_override
from ..record.adopt import Adopter
from ..record.progress import counted
from ..record.reports import ReportReader
from ..record.table import ResultsTable, param_column
from .objective import objective_values
from .space import SearchSpace

log = logging.getLogger("hpsearch.sweeper")

# Trial user attributes this sweeper sets (they show in Optuna's dashboard too).
OWNER = "hpsearch_sweep"  # "host:pid" of the sweep process that asked the trial
INTERRUPTED = "hpsearch_interrupted"  # true: failed only because its sweep was stopped
RERUN_OF = "hpsearch_rerun_of"  # the number of the interrupted trial this one runs again
# true: a results.csv row that is no trial of this search (an interrupted or superseded job,
# run again as a new one; a row outside this search space), told as failed in its place so
# that a resumed search's trial N is job N.
ROW_ONLY = "hpsearch_row_only"
ENDED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)

STATES = {
    Status.COMPLETED.value: TrialState.COMPLETE,
    Status.RESUMED.value: TrialState.COMPLETE,
    Status.PRUNED.value: TrialState.PRUNED,
    Status.FAILED.value: TrialState.FAIL,
    Status.TIMEOUT.value: TrialState.FAIL,
}


def this_sweep() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def ended_count(study: optuna.Study) -> int:
    """Trials of the search that ended (an interrupted one is to run again: not counted)."""
    trials = study.get_trials(deepcopy=False, states=ENDED)
    return sum(not (t.user_attrs.get(INTERRUPTED) or t.user_attrs.get(ROW_ONLY)) for t in trials)


def started_elsewhere(study: optuna.Study) -> int:
    """Trials of a stored study that no hpsearch sweep asked (no OWNER): another sweeper's,
    such as Hydra's Optuna sweeper, that began the study."""
    trials = study.get_trials(deepcopy=False, states=ENDED)
    return sum(OWNER not in t.user_attrs for t in trials)


def replay_results(study: optuna.Study, space: SearchSpace, sweep_dir: Path) -> None:
    """Tell a fresh in-memory study the trials of the sweep dir's results.csv, one per row in
    job order (a row that is no trial holds its place), so that trial N is job N; queue the
    values of the interrupted ones, and of the attempts a killed run left unrecorded (ended,
    or in flight), to run again."""
    table = ResultsTable.load(sweep_dir)
    told, again, skipped = _told(table, space, len(study.directions))
    # What the killed run left unrecorded, asked first: each end is adopted from its run dir,
    # each attempt in flight taken up where a cluster still runs it, else run again.
    ended, begun = (
        [p for o in found if (p := override_params(space, o))]
        for found in Adopter(table.rows).unrecorded(sweep_dir)
    )
    study.add_trials(told)
    for params in [*ended, *begun, *again]:  # after: numbered on from the rows, as their jobs
        study.enqueue_trial(params)
    real = sum(not t.user_attrs.get(ROW_ONLY) for t in told)
    if real or again or skipped or ended or begun:
        log.info(
            "hpsearch: resumed the search from %s: %s told to the study, %s to run again, "
            "%s to adopt, %s to take up or run again%s",
            table.path,
            counted(real, "trial"),
            counted(len(again), "interrupted one"),
            counted(len(ended), "unrecorded end"),
            counted(len(begun), "trial a killed run left in flight"),
            f"; {skipped} rows outside this search space left out" if skipped else "",
        )


def _told(
    table: ResultsTable, space: SearchSpace, n_objectives: int
) -> tuple[list[FrozenTrial], list[dict[str, Any]], int]:
    """A trial for each job number up to the table's last (ROW_ONLY where the row is no
    trial, or missing), the values of the interrupted rows, and how many rows lie outside
    this search space."""
    told: list[FrozenTrial] = []
    again: list[dict[str, Any]] = []
    skipped = 0
    for num in range(max(table.rows, default=-1) + 1):
        row = table.rows.get(num, {})
        status = row.get("status", "")
        params = row_params(space, row) if row else None
        if params is not None and status in STATES:
            told.append(row_trial(space, params, row, n_objectives))
            continue
        if params is None and row and status != Status.SUPERSEDED.value:
            skipped += 1  # a superseded row was run again by a later row, which counts
        elif params is not None and status == Status.INTERRUPTED.value:
            again.append(params)
        told.append(_row_only())
    return told, again, skipped


def _row_only() -> FrozenTrial:
    return optuna.trial.create_trial(
        state=TrialState.FAIL, params={}, distributions={}, user_attrs={ROW_ONLY: True}
    )


def override_params(space: SearchSpace, overrides: list[str]) -> dict[str, Any] | None:
    """The trial values a job's overrides hold; None outside this search (as row_params)."""
    texts = (split_override(o) for o in overrides)
    return row_params(space, {param_column(k): v for k, v in texts if v is not None})


def row_params(space: SearchSpace, row: Mapping[str, str]) -> dict[str, Any] | None:
    """The row's trial values; None for a row outside this search: a value outside the space,
    or a key fixed now that the row has another value for (it was searched then)."""
    for override in space.fixed:
        key, text = split_override(override)
        if text is not None and row.get(param_column(key), text) != text:
            return None
    params = {}
    for name, param in space.params.items():
        column = param_column(name)
        value = param.value_of(row[column]) if column in row else None
        if value is None:
            return None
        params[name] = value
    return params


def row_trial(
    space: SearchSpace, params: dict[str, Any], row: Mapping[str, str], n_objectives: int
) -> FrozenTrial:
    state = STATES[row["status"]]
    values = None
    if state is TrialState.COMPLETE:
        try:
            values = objective_values(json.loads(row.get("return") or "null"), n_objectives)
        except ValueError:
            values = None
        state = TrialState.COMPLETE if values is not None else TrialState.FAIL
    return optuna.trial.create_trial(
        params=params,
        distributions=space.distributions(),
        values=values,
        state=state,
        intermediate_values=_reports(Path(row.get("run_dir", ""))) if n_objectives == 1 else {},
    )


def _reports(run_dir: Path) -> dict[int, float]:
    """step -> value, as the job reported them (its reports file; empty if it has none)."""
    curve: dict[int, float] = {}
    for step, value in ReportReader(run_dir / REPORTS_FILE).read():
        curve.setdefault(step, value)
    return curve
