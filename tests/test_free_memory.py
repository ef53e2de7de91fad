"""Slots that know other users: a GPU takes a job only with the job's memory share free.
Pure tables, then a sweep on simulated GPUs whose fake NVML changes mid-sweep."""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import psutil
import pytest
from apps.probe import probe
from conftest import PROBE, read_records, role, wait_for

from hpsearch_launcher import nvml
from hpsearch_launcher.execute import room
from hpsearch_launcher.execute.backend import Execution
from hpsearch_launcher.execute.packer import Packer
from hpsearch_launcher.execute.room import Room
from hpsearch_launcher.execute.run import Run
from hpsearch_launcher.execute.sweep import POLL_S
from hpsearch_launcher.nvml import GpuMemory
from hpsearch_launcher.plan.memory import jobs_that_fit, others_mb, room_mb
from hpsearch_launcher.plan.settings import parse_settings
from hpsearch_launcher.plan.slots import SlotPool
from hpsearch_launcher.record.progress import SweepState


@pytest.mark.parametrize(
    ("memory", "busy", "room"),
    [
        (GpuMemory(total=1000, used=0, ours=0, ours_seen=False), 0, 1000),
        (GpuMemory(total=1000, used=700, ours=0, ours_seen=False), 0, 300),  # another user
        # Our own job holds 400 of the 700 used: only 300 are another user's.
        (GpuMemory(total=1000, used=700, ours=400, ours_seen=True), 1, 1000 - 300 - 450),
        # NVML cannot see our pids (a container): ours count as their whole shares.
        (GpuMemory(total=1000, used=700, ours=0, ours_seen=False), 1, 1000 - 250 - 450),
        (GpuMemory(total=1000, used=100, ours=0, ours_seen=False), 1, 1000 - 0 - 450),
        # NVML's figures taken a moment apart: ours above the total used counts as no other.
        (GpuMemory(total=1000, used=300, ours=400, ours_seen=True), 1, 1000 - 0 - 450),
    ],
)
def test_room_counts_only_other_users_memory(memory: GpuMemory, busy: int, room: int) -> None:
    assert room_mb(memory, busy, share_mb=450) == room
    assert jobs_that_fit(memory, busy, 450) == max(0, room) // 450
    assert (jobs_that_fit(memory, busy, 450) >= 1) is (room >= 450)


def test_exactly_the_share_free_is_room() -> None:
    exactly = GpuMemory(total=1000, used=550, ours=0, ours_seen=False)
    assert jobs_that_fit(exactly, busy=0, share_mb=450) == 1


def test_no_nvml_means_no_waiting() -> None:
    assert jobs_that_fit(None, busy=3, share_mb=10**9) is None


def test_a_short_gpu_takes_no_job_and_the_others_go_on() -> None:
    pool = SlotPool(["0", "1", "2"], slots=1)
    pool.limit("1", 0)
    assert [pool.acquire(), pool.acquire()] == ["0", "2"]
    assert not pool.has_free()
    pool.unlimit("1")
    assert pool.acquire() == "1"


class Readings(Execution):
    """An execution whose GPU "0" (10000 MB, jobs_per_gpu=auto) answers, each time it is
    asked, with the next of the readings the test gives."""

    def __init__(self, readings: list[GpuMemory]) -> None:
        settings = parse_settings({"jobs_per_gpu": "auto"})
        super().__init__(None, ("0",), 8, "GPU 0", settings, {"0": 10_000}, 2, packs=True)  # type: ignore[arg-type]
        self.readings = readings

    def gpu_memory(self, groups: Collection[str], ours: Any) -> dict[str, GpuMemory]:
        ours()
        return {"0": self.readings.pop(0)}


class Pids(NamedTuple):
    """A running job's handle, as far as the room asks it: its processes."""

    pid: int

    def pids(self) -> list[int]:
        return [self.pid]


def test_once_nvml_lists_our_pids_a_job_it_does_not_list_holds_nothing() -> None:
    """Job A (pid 101) is listed at 1000 MB beside another user's 300 MB: NVML sees our
    pids. A ends; job B (pid 102) has just started and allocated nothing, so NVML lists none
    of ours: the 300 MB used are still the other user's, not taken for B's booking."""
    execution = Readings(
        [
            GpuMemory(10_000, 1300, 1000, True, {101: 1000}),
            GpuMemory(10_000, 300, 0, False),
        ]
    )
    pool, packer = SlotPool(["0"], 8), Packer(execution)
    gpus = Room(execution, pool, SweepState(total=2), packer)
    assert packer.book is not None
    a = Run(job=None, group="0", handle=Pids(101))  # type: ignore[arg-type]
    packer.book.reserve("0", id(a), 1000)
    gpus.poll([a], waiting=True)
    assert packer.book.others["0"] == 300 and a.peak_mb == 1000
    packer.book.release(id(a))
    b = Run(job=None, group="0", handle=Pids(102))  # type: ignore[arg-type]
    packer.book.reserve("0", id(b), 1000)
    gpus.freed = True  # a slot freed: asked again at once
    gpus.poll([b], waiting=True)
    assert packer.book.others["0"] == 300


class FakeNvml:
    """Other users' memory per GPU, read from a file the test rewrites mid-sweep; every
    answer is logged with the time it was given."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers: list[tuple[float, str, int]] = []

    def set(self, others: dict[str, int]) -> None:
        self.path.write_text(json.dumps(others))

    def __call__(self, gpu: str, ours: Collection[int]) -> GpuMemory:
        others = json.loads(self.path.read_text()).get(gpu, 0)
        self.answers.append((time.time(), gpu, others))
        return GpuMemory(total=1000, used=others, ours=0, ours_seen=False)


def use_fake_nvml(monkeypatch: pytest.MonkeyPatch, fake: object) -> None:
    """NVML as the launcher asks it at launch: GPUs of 1000 MB, memory from `fake`, asked
    before every start."""
    monkeypatch.setattr(nvml, "nvml_gpu_ids", lambda: ["0", "1"])
    monkeypatch.setattr(nvml, "nvml_memory", fake)
    monkeypatch.setattr(nvml, "nvml_total_mb", lambda gpu: 1000)
    monkeypatch.setattr(room, "MEMORY_POLL_S", 0.0)


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeNvml]:
    fake = FakeNvml(tmp_path / "nvml.json")
    use_fake_nvml(monkeypatch, fake)
    yield fake


@pytest.mark.slow
def test_jobs_wait_for_memory_that_appears_and_vanishes_mid_sweep(
    launch_app, fake_nvml: FakeNvml, marks: Path
) -> None:
    """GPU 1 starts full (another user holds 800 of 1000 MB, a job needs 450): jobs run on
    GPU 0 only. When GPU 1 frees, it takes jobs; when another user then fills GPU 0, the
    rest run on GPU 1. No job ever starts on a GPU without its share free."""
    fake_nvml.set({"1": 800})

    def other_users() -> None:
        wait_for(marks / "start-1")
        fake_nvml.set({})
        wait_for(marks / "start-3")
        fake_nvml.set({"0": 900})

    changer = threading.Thread(target=other_users)
    changer.start()
    jobs = [[f"x={x}", "sleep=0.5"] for x in range(8)]
    returns = launch_app(
        PROBE.parent / "conf",
        "probe",
        probe,
        jobs,
        "hydra.launcher.gpus=[0,1]",
        "hydra.launcher.memory_fraction=0.45",
    )
    changer.join()
    assert [r.return_value for r in returns] == [float(x) for x in range(8)]
    records = read_records(marks)
    on = {r["num"]: r["cuda"] for r in records}
    assert on[0] == on[1] == "0"  # GPU 1 was full
    assert "1" in {on[n] for n in range(2, 8)}  # it took jobs once it had room
    last = max(records, key=lambda r: r["start"])
    assert last["cuda"] == "1"  # GPU 0 was full by then
    for r in records:  # the last answer before each start said there was room
        before = [a for a in fake_nvml.answers if a[1] == r["cuda"] and a[0] <= r["start"]]
        assert before and 1000 - before[-1][2] >= 450, r


class Asked(NamedTuple):
    pids: frozenset[int]  # the pids the sweep asked about
    jobs: int  # our job processes on the GPU at that moment
    others: int  # MB another user held


class SharedGpuNvml:
    """NVML on a 1000 MB GPU shared with another user, telling processes apart as the real
    one does: each of this sweep's job processes on it holds JOB_MB, counted in `used`
    always but in `ours` only when its pid is among those asked about. The other user's
    OTHER_MB arrive once `arrival` exists. A job forked by the fork server (the default) is
    the sweep's grandchild: NVML sees it all the same."""

    JOB_MB, OTHER_MB = 100, 300

    def __init__(self, arrival: Path) -> None:
        self.arrival = arrival
        self.asked: list[Asked] = []

    def __call__(self, gpu: str, ours: Collection[int]) -> GpuMemory:
        others = self.OTHER_MB if self.arrival.exists() else 0
        jobs = {p.pid for p in psutil.Process().children(recursive=True) if job_on(p, gpu)}
        seen = jobs & set(ours)
        self.asked.append(Asked(frozenset(ours), len(jobs), others))
        used = others + self.JOB_MB * len(jobs)
        return GpuMemory(total=1000, used=used, ours=self.JOB_MB * len(seen), ours_seen=bool(seen))

    def asked_beside_one_job(self) -> list[Asked]:
        """The questions asked while the other user and one job of ours were on the GPU."""
        return [a for a in self.asked if a.others and a.jobs == 1]


def job_on(proc: psutil.Process, gpu: str) -> bool:
    """Whether `proc` is a job's process on `gpu` (not a spare, the fork server, nor a job's
    own child)."""
    try:
        environ, status = proc.environ(), proc.status()
    except psutil.Error:
        return False
    gpu_of = environ.get("CUDA_VISIBLE_DEVICES")
    return role(proc) == "job" and gpu_of == gpu and status != psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_our_running_jobs_memory_is_told_from_other_users(
    launch_app, monkeypatch: pytest.MonkeyPatch, marks: Path
) -> None:
    """The free-memory check asks NVML about our running jobs' pids, so that what they hold
    is not taken for another user's, nor another user's for ours. On a 1000 MB GPU with
    450 MB shares (2 jobs per GPU), one job of ours at 100 MB and another user at 300 MB
    leave 1000 - 300 - 450 = 250 MB: the next job waits. (Counted as if ours held their
    whole share, the other user's 300 MB vanish into it, 550 MB look free, and the next job
    starts and can run out of memory.)"""
    fake = SharedGpuNvml(arrival=marks / "start-1")  # the other user comes while job 1 runs
    use_fake_nvml(monkeypatch, fake)
    (marks / "hold").touch()  # job 0 (x=5) runs until the decision about job 2 is made

    def release_job_0() -> None:
        # The sweep asked twice with job 0 alone beside the other user and did not start
        # job 2; or it started job 2 (the bug).
        deadline = time.monotonic() + 60
        while len(fake.asked_beside_one_job()) < 2 and not (marks / "start-2").exists():
            assert time.monotonic() < deadline, f"no decision about job 2: {fake.asked}"
            time.sleep(0.02)
        (marks / "hold").unlink()

    releaser = threading.Thread(target=release_job_0)
    releaser.start()
    try:
        launch_app(
            PROBE.parent / "conf",
            "probe",
            probe,
            [["x=5", "hold_from=5"], ["x=0", "hold_from=5"], ["x=1", "hold_from=5"]],
            "hydra.launcher.gpus=[0]",
            "hydra.launcher.jobs_per_gpu=2",
            "hydra.launcher.memory_fraction=0.45",
            "hydra.launcher.warm_start=false",
        )
    finally:
        releaser.join()
    records = read_records(marks)
    assert [r["x"] for r in records] == [5, 0, 1]
    assert any(records[0]["pid"] in a.pids for a in fake.asked_beside_one_job()), fake.asked
    assert records[2]["start"] >= records[0]["end"], "job 2 started beside job 0 without room"


def stand_in_pynvml(init_fails: bool = False) -> SimpleNamespace:
    """NVML with one GPU (index 0, or its UUID) of 1000 MB, 700 used, 400 of them by pid 42."""
    mb = 1024 * 1024
    gpu = object()

    def init() -> None:
        if init_fails:
            raise OSError("NVML Shared Library Not Found")

    def by_index(i: int) -> object:
        if i != 0:
            raise LookupError(i)
        return gpu

    return SimpleNamespace(
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=by_index,
        nvmlDeviceGetHandleByUUID=lambda uuid: {"GPU-1a": gpu}[uuid],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=1000 * mb, used=700 * mb),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=42, usedGpuMemory=400 * mb),
            SimpleNamespace(pid=7, usedGpuMemory=None),
        ],
    )


def test_nvml_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml())
    assert nvml.nvml_total_mb("0") == nvml.nvml_total_mb("GPU-1a") == 1000
    assert nvml.nvml_memory("0", [42]) == GpuMemory(1000, 700, 400, True, {42: 400})
    assert nvml.nvml_memory("0", [5]) == GpuMemory(1000, 700, 0, False)
    assert nvml.nvml_total_mb("3") is None  # a GPU NVML does not know
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml(init_fails=True))
    assert nvml.nvml_total_mb("0") is None and nvml.nvml_memory("0", []) is None


def test_memory_that_moves_between_nvmls_calls_never_counts_as_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NVML's process list and its total are two calls. A job of ours that allocates between
    them (pid 42: 0, then 400 MB), or exits (pid 43: 300 MB, then gone), counts at its lower
    figure: the memory it moved is another user's for this answer, never free."""
    mb = 1024 * 1024
    lists = iter(
        [
            [
                SimpleNamespace(pid=43, usedGpuMemory=300 * mb),
                SimpleNamespace(pid=42, usedGpuMemory=0),
            ],
            [SimpleNamespace(pid=42, usedGpuMemory=400 * mb)],
        ]
    )
    fake = stand_in_pynvml()
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: next(lists)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    memory = nvml.nvml_memory("0", [42, 43])
    assert memory == GpuMemory(1000, 700, 0, True, {42: 0})
    assert others_mb(memory, 0) == 700


def test_a_missing_gpu_stops_the_sweep_before_results_csv_is_touched(
    launch_app, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """resume=false sets an earlier results.csv aside, but only for a sweep that will run:
    a GPU this machine does not have is found first."""
    monkeypatch.setattr(nvml, "nvml_gpu_ids", lambda: ["0", "1"])
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "results.csv").write_text("job,x,status\n0,1,completed\n")
    with pytest.raises(SystemExit, match="2"):
        launch_app(
            PROBE.parent / "conf",
            "probe",
            probe,
            [["x=1"]],
            "hydra.launcher.gpus=[0,7]",
            "hydra.launcher.resume=false",
        )
    assert "no GPU 7 on this machine (NVML sees 0, 1)" in capsys.readouterr().err
    assert (sweep / "results.csv").read_text() == "job,x,status\n0,1,completed\n"
    assert not (sweep / "results.csv.bak").exists()


@pytest.mark.slow
@pytest.mark.parametrize("poll_s", [0.0, None], ids=["poll-every-step", "default-poll"])
def test_a_gpu_with_room_for_one_job_runs_one_at_a_time(
    launch_app, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, marks: Path, poll_s: float | None
) -> None:
    """Another user holds 300 of GPU 0's 1000 MB; two slots of 450 MB each: 700 MB free has
    room for one job, not two (our running job's 100 MB told apart by its pid). Both slots
    were once filled after one job's room was checked; and at the default poll interval a
    freed slot was refilled on a stale answer."""
    (tmp_path / "other-user").touch()  # there from the start
    use_fake_nvml(monkeypatch, SharedGpuNvml(arrival=tmp_path / "other-user"))
    if poll_s is None:
        monkeypatch.setattr(room, "MEMORY_POLL_S", 1.0)  # the real default
    jobs = [[f"x={x}", "sleep=0.4"] for x in range(4)]
    launch_app(
        PROBE.parent / "conf",
        "probe",
        probe,
        jobs,
        "hydra.launcher.gpus=[0]",
        "hydra.launcher.jobs_per_gpu=2",
    )
    records = sorted(read_records(marks), key=lambda r: r["start"])
    for earlier, later in itertools.pairwise(records):
        assert later["start"] >= earlier["end"] - 0.05, "two jobs shared 700 MB of room"


@pytest.mark.slow
def test_a_sweep_whose_every_gpu_starts_full_waits_then_runs(
    launch_app, fake_nvml: FakeNvml, marks: Path
) -> None:
    """Other users hold the only GPU when the sweep starts: no job can start, none runs, and
    the sweep must wait for the memory (not end with its jobs never run, nor spin a core)."""
    fake_nvml.set({"0": 800})

    def other_user_leaves() -> None:
        deadline = time.monotonic() + 30
        while not fake_nvml.answers:  # the sweep asked, and waits
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.5)
        waited.extend(fake_nvml.answers)
        fake_nvml.set({})

    waited: list = []

    leaver = threading.Thread(target=other_user_leaves)
    leaver.start()
    returns = launch_app(
        PROBE.parent / "conf",
        "probe",
        probe,
        [["x=1"], ["x=2"]],
        "hydra.launcher.gpus=[0]",
        "hydra.launcher.memory_fraction=0.45",
    )
    leaver.join()
    assert [r.return_value for r in returns] == [1.0, 2.0]
    assert len(read_records(marks)) == 2
    # It slept between looks while it waited (POLL_S), rather than asking in a busy loop.
    assert len(waited) <= 1.5 / POLL_S + 3, len(waited)
