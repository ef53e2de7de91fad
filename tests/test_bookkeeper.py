"""The sweep's side of each end (execute/bookkeeper.py), without processes: a job an earlier
run finished is ended at once and its source told how it ended, under its own number."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import pytest
from test_recorder import earlier_row, resumed_job

from hpsearch_launcher.execute.bookkeeper import Bookkeeper
from hpsearch_launcher.outcome import Status
from hpsearch_launcher.record.progress import SweepState
from hpsearch_launcher.record.recorder import Recorder
from hpsearch_launcher.record.table import ResultsTable
from hpsearch_launcher.stream import Ask, JobEnd


class Told:
    """A source that only records what it is told."""

    def __init__(self) -> None:
        self.ends: dict[Hashable, JobEnd] = {}

    def ended(self, key: Hashable, end: JobEnd) -> None:
        self.ends[key] = end


@pytest.mark.parametrize(
    ("status", "told"), [("completed", Status.RESUMED), ("pruned", Status.PRUNED)]
)
def test_a_resumed_job_is_ended_at_once_its_source_told_how_under_its_number(
    tmp_path: Path, status: str, told: Status
) -> None:
    """A pruned job stays pruned for the study (a PRUNED trial, not a COMPLETE one), and the
    end carries the job's own number, 1, not the next one's."""
    row = earlier_row(1, status, x=5) | {"last_step": "2", "last_value": "0.25"}
    recorder = Recorder(ResultsTable(tmp_path / "results.csv", [row], params=["x"]), 2)
    source, state = Told(), SweepState(total=1)
    keeper = Bookkeeper(recorder, source, state)  # type: ignore[arg-type]
    assert keeper.asked(Ask(key=7, overrides=("x=5",)), resumed_job(0, row)) is True
    end = source.ends[7]
    assert (end.status, end.job_num, end.step, end.value) == (told, 1, 2, 0.25)
    assert state.resumed == 1 and state.asked == 1
