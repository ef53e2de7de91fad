"""A study in a storage and the sweep dir's record (results.jsonl), made to agree at start-up.

The launcher records a job's end before the study is told of it, so a kill can leave a row
whose trial the study still holds RUNNING, or (a storage shared, an older sweep) rows and
trials that do not match. Both ways, by the trial's values:
- a trial a dead sweep left RUNNING whose end is recorded is told that end; one with no
  recorded end is marked failed (interrupted) and its values queued to run again, once;
- a recorded end of no trial in the study is added to it (as an in-memory resume does);
- a finished trial with no row is named in the line (only its own run's record could give
  it one: its run dir and config are not in the study).
A trial that a live sweep on this host, or any sweep on another host, runs is left alone.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
import psutil
from optuna.trial import FrozenTrial, TrialState

from ..outcome import SUPERSEDED
from ..record.table import ResultsTable
from .history import ENDED, INTERRUPTED, OWNER, RERUN_OF, STATES, row_params, row_trial
from .space import SearchSpace

log = logging.getLogger("hpsearch.sweeper")

Key = tuple[tuple[str, str], ...]


def reconcile_storage(
    study: optuna.Study, storage: optuna.storages.BaseStorage, space: SearchSpace, sweep_dir: Path
) -> None:
    """Make the study and the sweep dir's record agree; say in one line what was done."""
    table = ResultsTable.load(sweep_dir)
    unmatched, missing = _unmatched(study, space, table)
    stale, elsewhere = _stale(study)
    closed = failed = 0
    for trial in stale:
        rows = unmatched.get(_key(trial.params), [])
        if rows:
            ended = rows.pop(0)
            study.tell(trial.number, values=ended.values, state=ended.state, skip_if_finished=True)
            closed += 1
            continue
        # FrozenTrial keeps the storage's id of the trial: the storage's own calls need it.
        storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
        study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
        failed += 1
    added = [t for rows in unmatched.values() for t in rows]
    study.add_trials(added)
    again = _queue_interrupted(study)
    if stale or again or elsewhere or added or missing:
        log.info(
            "hpsearch: study %r reconciled with %s: %d trials a killed sweep left running "
            "told their recorded end, %d marked failed; %d recorded ends added to the study; "
            "%d interrupted trials to run again; %d finished trials without a row%s",
            study.study_name,
            table.journal.path.name,
            closed,
            failed,
            len(added),
            len(again),
            missing,
            f"; {elsewhere} running on other hosts left alone" if elsewhere else "",
        )


def _key(params: Mapping[str, Any]) -> Key:
    return tuple(sorted((name, repr(value)) for name, value in params.items()))


def _unmatched(
    study: optuna.Study, space: SearchSpace, table: ResultsTable
) -> tuple[dict[Key, list[FrozenTrial]], int]:
    """The record's ended rows that no finished trial stands for (as trials to tell), by
    their values; and how many finished trials no row stands for."""
    rows: dict[Key, list[FrozenTrial]] = {}
    for num in sorted(table.rows):
        row = table.rows[num]
        params = row_params(space, row)
        if params is None or row.get("status") == SUPERSEDED or row.get("status") not in STATES:
            continue
        trial = row_trial(space, params, row, len(study.directions))
        rows.setdefault(_key(params), []).append(trial)
    missing = 0
    for trial in study.get_trials(deepcopy=False, states=ENDED):
        if trial.user_attrs.get(INTERRUPTED):
            continue
        same = rows.get(_key(trial.params))
        if same:
            same.pop(0)
        else:
            missing += 1
    return rows, missing


def _stale(study: optuna.Study) -> tuple[list[FrozenTrial], int]:
    """RUNNING trials whose sweep on this host is gone; and how many run on other hosts."""
    here = socket.gethostname()
    stale, elsewhere = [], 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = str(trial.user_attrs.get(OWNER, ""))
        host, _, pid = owner.rpartition(":")
        if owner and host != here:
            elsewhere += 1
        elif not (owner and pid.isdigit() and _alive(int(pid), trial.datetime_start)):
            stale.append(trial)
    return stale, elsewhere


def _queue_interrupted(study: optuna.Study) -> list[FrozenTrial]:
    """Queue every interrupted trial not yet queued to run again; the ones queued now."""
    trials = study.get_trials(deepcopy=False)
    queued = {t.user_attrs.get(RERUN_OF) for t in trials}
    again = [
        t
        for t in trials
        if t.state is TrialState.FAIL and t.user_attrs.get(INTERRUPTED) and t.number not in queued
    ]
    for trial in again:
        study.enqueue_trial(dict(trial.params), user_attrs={RERUN_OF: trial.number})
    return again


def _alive(pid: int, since: datetime | None) -> bool:
    """Whether the sweep process `pid`, which asked a trial at `since`, still runs (a process
    made later only reuses its pid)."""
    try:
        made = psutil.Process(pid).create_time()
    except psutil.Error:
        return False
    return since is None or made <= since.timestamp() + 1
