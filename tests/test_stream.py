"""The streaming scheduling core: a JobSource asked whenever a slot frees, told every report
and every end as it happens; it may end a running job (pruned), whose slot goes on at once."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import pandas as pd
import pytest
from apps.probe import probe
from conftest import PROBE, read_records

from hpsearch_launcher.outcome import Status
from hpsearch_launcher.stream import Ask, JobEnd

pytestmark = pytest.mark.slow


class ListOfTrials:
    """A source of probe jobs given one at a time, as an asynchronous search gives trials;
    records what it was told. `prune`: keys ended at their first report."""

    def __init__(self, jobs: list[list[str]], prune: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.jobs = jobs
        self.prune = prune
        self.judges = bool(prune)
        self.asked = 0
        self.ends: dict[Hashable, JobEnd] = {}
        self.reports: dict[Hashable, list[tuple[int, float]]] = {}

    def ask(self) -> Ask | None:
        if self.asked == len(self.jobs):
            return None
        self.asked += 1
        return Ask(self.asked - 1, tuple(self.jobs[self.asked - 1]))

    def exhausted(self) -> bool:
        return self.asked == len(self.jobs)

    def remaining(self) -> int:
        return len(self.jobs) - self.asked

    def report(self, key: Hashable, step: int, value: float) -> bool:
        self.reports.setdefault(key, []).append((step, value))
        return key in self.prune

    def ended(self, key: Hashable, end: JobEnd) -> None:
        assert key not in self.ends, f"{key} ended twice"
        self.ends[key] = end


def test_a_freed_slot_takes_the_next_trial_at_once(app_launcher, marks: Path) -> None:
    """Stragglers (6 s) among 8 trials on 2 slots: whenever a trial ends and trials remain,
    the next one starts within 3 s, start-up on a loaded machine included (in batches of 2,
    a slot would idle for most of a straggler's 6 s), and each end is told."""
    sleeps = [6.0, 0.3, 0.3, 0.3, 6.0, 0.3, 0.3, 0.3]
    jobs = [[f"x={i}", f"sleep={s}", f"marks={marks}"] for i, s in enumerate(sleeps)]
    source = ListOfTrials(jobs)
    launcher = app_launcher(PROBE.parent / "conf", "probe", probe, "hydra.launcher.n_jobs=2")
    launcher.stream(source, ["x", "sleep"], total=len(jobs))
    assert sorted(source.ends) == list(range(8))
    assert {e.status for e in source.ends.values()} == {Status.COMPLETED}
    assert [source.ends[k].job_return.return_value for k in range(8)] == [
        float(x) for x in range(8)
    ]
    records = read_records(marks)
    starts = sorted(r["start"] for r in records)
    for end in sorted(r["end"] for r in records)[:-2]:  # each end but the last two's
        following = [s for s in starts if s >= end]
        assert following and following[0] - end < 3.0, (end, starts)


def test_a_pruned_trial_frees_its_slot_and_is_told_pruned(app_launcher, marks: Path) -> None:
    """Trial 0 reports a 60-step curve; the source condemns it at its first report: it stops
    (should_stop), is told PRUNED with the step and value it reached, and trial 1, waiting
    for the only slot, starts."""
    jobs = [
        ["x=5", "steps=60", "step_s=0.1", f"marks={marks}"],
        ["x=1", f"marks={marks}"],
    ]
    source = ListOfTrials(jobs, prune={0})
    launcher = app_launcher(
        PROBE.parent / "conf",
        "probe",
        probe,
        "hydra.launcher.n_jobs=1",
        "hydra.launcher.prune_grace=3",
    )
    launcher.stream(source, ["x"], total=2)
    pruned, after = source.ends[0], source.ends[1]
    # The step it reached by the time the sweep read its reports (they come every 0.1 s).
    assert pruned.status is Status.PRUNED and pruned.step is not None
    assert pruned.value == pytest.approx(5 * (pruned.step + 1) / 60)
    assert source.reports[0][0] == (0, pytest.approx(5 / 60))
    assert after.status is Status.COMPLETED
    by_x = {r["x"]: r for r in read_records(marks)}
    assert by_x[5]["end"] - by_x[5]["start"] < 3  # stopped far short of its 6 s curve
    assert by_x[1]["start"] >= by_x[5]["end"]  # the only slot: trial 1 waited for it
    assert int((marks / "stopped-0").read_text()) >= pruned.step  # it saw should_stop()


def test_a_resumed_trial_keeps_its_number_and_a_pruned_one_stays_pruned(
    app_launcher, marks: Path, tmp_path: Path
) -> None:
    """A first run: x=1 completes (job 0), x=5 is pruned at its first report (job 1). The
    same sweep dir again, asked x=1, x=5, then a new x=3: the first two are resumed with
    their numbers (console and results.csv agree), x=5 told PRUNED and its row still
    `pruned`; x=3 takes the next number, 2 (a resumed trial takes none)."""
    conf, curve = PROBE.parent / "conf", ["steps=60", "step_s=0.1"]
    first = ListOfTrials([["x=1", f"marks={marks}"], ["x=5", *curve, f"marks={marks}"]], {1})
    launcher = app_launcher(conf, "probe", probe, "hydra.launcher.n_jobs=1")
    launcher.stream(first, ["x"], total=2)
    assert [first.ends[k].status for k in (0, 1)] == [Status.COMPLETED, Status.PRUNED]
    again = ListOfTrials([*first.jobs, ["x=3", f"marks={marks}"]])
    launcher = app_launcher(conf, "probe", probe, "hydra.launcher.n_jobs=1")
    launcher.stream(again, ["x"], total=3)
    ends = [again.ends[k] for k in range(3)]
    assert [e.status for e in ends] == [Status.RESUMED, Status.PRUNED, Status.COMPLETED]
    assert [e.job_num for e in ends] == [0, 1, 2]
    table = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x")
    assert table.loc[[1, 5, 3], "status"].tolist() == ["completed", "pruned", "completed"]
    assert table.loc[[1, 5, 3], "job"].tolist() == [0, 1, 2]
    assert len(read_records(marks)) == 3  # x=1 and x=5 once each, then x=3: nothing re-ran
