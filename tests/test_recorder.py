"""The records of a resumed sweep (record/recorder.py), without processes: an earlier run's
finished row handed to a job of this run keeps its number and the status it ended with."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hpsearch_launcher.plan.jobs import Job
from hpsearch_launcher.record.recorder import Recorder
from hpsearch_launcher.record.table import ResultsTable


def earlier_row(job: int, status: str, x: int) -> dict[str, str]:
    return {
        "job": str(job),
        "status": status,
        "objective": str(x / 10),
        "return": str(x / 10),
        "run_dir": f"sweep/x={x}",
        "config_hash": f"h{x}",
        "error": "",
    }


def resumed_job(index: int, previous: dict[str, str]) -> Job:
    """A job of this run whose config an earlier run finished."""
    x = previous["run_dir"].split("=")[1]
    config = OmegaConf.create({"x": int(x), "hydra": {"job": {"name": "app", "chdir": False}}})
    num = int(previous["job"])  # as the job factory numbers a resumed job
    return Job(index, num, (f"x={x}",), config, f"h{x}", {"x": x}, f"x={x}", previous)


def new_job(num: int, x: int) -> Job:
    config = OmegaConf.create({"x": x, "hydra": {"job": {"name": "app", "chdir": False}}})
    return Job(0, num, (f"x={x}",), config, f"h{x}", {"x": str(x)}, f"x={x}")


def resumed_rows(tmp_path: Path, statuses: list[str]) -> dict[int, dict[str, str]]:
    """The table after a resumed run handed each earlier row (of these statuses) to a job."""
    rows = [earlier_row(job, status, x=job + 1) for job, status in enumerate(statuses)]
    table = ResultsTable(tmp_path / "results.csv", rows, params=["x"])
    recorder = Recorder(table, first_new_job=len(rows))
    for index, row in enumerate(rows):
        ret = recorder.resumed(resumed_job(index, row))
        assert ret.return_value == float(row["return"])
    table.flush(force=True)
    return {int(r["job"]): r for r in ResultsTable.load(tmp_path).rows.values()}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("completed", "completed"),  # as a resumed search's rows: df.status == "completed"
        ("pruned", "pruned"),  # a pruned job stays pruned: it was judged, not cut short
        ("resumed", "completed"),  # an earlier version's word for a finished job
    ],
)
def test_a_resumed_row_keeps_the_status_it_ended_with(
    tmp_path: Path, before: str, after: str
) -> None:
    rows = resumed_rows(tmp_path, [before])
    assert rows[0]["status"] == after


def test_a_resumed_row_keeps_its_job_number_and_run_dir(tmp_path: Path) -> None:
    rows = resumed_rows(tmp_path, ["completed", "pruned", "completed"])
    assert sorted(rows) == [0, 1, 2]
    assert [rows[j]["run_dir"] for j in (0, 1, 2)] == ["sweep/x=1", "sweep/x=2", "sweep/x=3"]


def test_a_new_job_takes_the_next_number_and_a_resumed_one_none(tmp_path: Path) -> None:
    """Jobs 0-2 ran before: this run's new jobs go on from 3, with no gap where a resumed
    job (which keeps its row's number) comes between them (a batch's and a search's alike)."""
    rows = [earlier_row(job, "completed", x=job + 1) for job in range(3)]
    recorder = Recorder(ResultsTable(tmp_path / "results.csv", rows, params=["x"]), 3)
    first = new_job(recorder.next_job, x=9)
    assert recorder.numbered(first).num == 3 and recorder.next_job == 4
    assert recorder.numbered(resumed_job(1, rows[1])).num == 1
    assert recorder.next_job == 4  # the resumed job took no number
    assert recorder.numbered(new_job(recorder.next_job, x=8)).num == 4
