"""jobs_per_gpu=auto: GPUs packed by their jobs' measured memory. The pure book first, then
sweeps on simulated GPUs whose memory the jobs hold (tests/fake_nvml: a job past its cap, or
past what the GPU has free, gets CUDA's out-of-memory error)."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, read_records, simulated_gpus_env, wait_until
from omegaconf import OmegaConf

from hpsearch_launcher.execute.backend import Execution
from hpsearch_launcher.execute.packer import Packer
from hpsearch_launcher.execute.run import Run
from hpsearch_launcher.nvml import GpuMemory
from hpsearch_launcher.outcome import Ending, Outcome
from hpsearch_launcher.plan.packing import (
    Estimates,
    GpuBook,
    advice,
    kind_of,
    need_mb,
    usable_mb,
)
from hpsearch_launcher.plan.settings import parse_settings
from hpsearch_launcher.plan.slots import SlotPool

GB = 1024
AUTO = ("hydra.launcher.jobs_per_gpu=auto",)


def test_a_known_kind_reserves_its_peak_and_a_margin() -> None:
    estimates = Estimates()
    assert estimates.need("a") is None  # unknown: alone
    estimates.learn("a", 9 * GB)
    assert estimates.need("a") == need_mb(9 * GB) == 10266
    estimates.learn("a", 8 * GB)  # the largest peak seen counts
    assert estimates.need("a") == 10266
    estimates.outgrown("a")  # ran out of memory: alone until measured again
    assert estimates.need("a") is None
    estimates.learn("a", 12 * GB)
    assert estimates.need("a") == need_mb(12 * GB)


def packer(total_mb: int = 10_000) -> Packer:
    """The loop's packer for one simulated GPU "0" of `total_mb`, jobs_per_gpu=auto."""
    settings = parse_settings({"jobs_per_gpu": "auto"})
    groups, memory = ("0",), {"0": total_mb}
    execution = Execution(None, groups, 8, "GPU 0", settings, memory, cores=2, packs=True)  # type: ignore[arg-type]
    return Packer(execution)


def test_after_an_out_of_memory_its_kinds_next_jobs_run_alone() -> None:
    """A job of a known kind (1000 MB) runs out of memory under its cap: the kind's next
    jobs run alone with the whole GPU (and are measured) instead of packed at the old need."""
    pack = packer()
    pack.estimates.learn("small", 1000)
    run = Run(job=None, kind="small")  # type: ignore[arg-type]
    env = pack.book_start(run, "0")
    assert run.cap_mb == need_mb(1000) and not run.alone, env
    pack.released(run, Outcome(Ending.RAISED, detail="RuntimeError: CUDA out of memory."))
    after = Run(job=None, kind="small")  # type: ignore[arg-type]
    assert pack.need(after) is None
    pack.book_start(after, "0")
    assert after.alone  # with the whole GPU


def test_the_pool_takes_as_many_more_jobs_as_their_reservations_fit() -> None:
    """6000 MB, 5400 usable; a job of a known kind (1228 MB booked) runs: 3 more fit."""
    pack = packer(total_mb=6000)
    pack.estimates.learn("small", 1000)
    pool = SlotPool(["0"], 8)
    running = Run(job=None, kind="small")  # type: ignore[arg-type]
    pack.book_start(running, pool.acquire())
    pack.pack(pool, Run(job=None, kind="small"))  # type: ignore[arg-type]
    assert pool.limits["0"] == 1 + 3 and pool.free() == 3


def test_a_gpu_takes_jobs_while_their_reservations_fit() -> None:
    book = GpuBook({"0": 80 * GB})
    assert usable_mb(80 * GB) == 73728
    need = need_mb(9 * GB)
    assert book.count("0", need) == 7  # 7 x 10266 MB of 73728
    assert book.fits("0", None)  # an empty GPU takes a job alone
    for token in range(7):
        book.reserve("0", token, need)
    assert not book.fits("0", need) and book.count("0", need) == 0
    assert not book.fits("0", None)  # nor one that needs the GPU alone
    book.release(3)
    assert book.count("0", need) == 1


def test_other_users_memory_shrinks_the_room_and_ours_is_not_counted_twice() -> None:
    book = GpuBook({"0": 80 * GB})
    book.reserve("0", "ours", 10_000)
    # NVML: 30000 MB used, 6000 of them by our job (it has not grown to its 10000 yet).
    book.observe({"0": GpuMemory(80 * GB, 30_000, 6_000, True, {1: 6_000})})
    assert book.others["0"] == 24_000
    assert book.room("0") == 73728 - 24_000 - 10_000
    # A container: NVML lists none of ours; they are taken to hold what they booked.
    book.observe({"0": GpuMemory(80 * GB, 30_000, 0, False)})
    assert book.others["0"] == 20_000
    # Another user holds it all: not even a job alone starts.
    book.release("ours")
    book.observe({"0": GpuMemory(80 * GB, 80 * GB, 0, False)})
    assert not book.fits("0", None) and book.count("0", 1) == 0


def test_a_job_alone_books_all_there_is() -> None:
    book = GpuBook({"0": 10_000})
    assert book.reserve("0", "probe", None) == 9_000
    assert book.room("0") == 0


def test_the_advice_line() -> None:
    assert advice([3 * GB, 1 * GB], [80 * GB], 2) == (
        "GPU memory: jobs peaked at 3.0 GB of 80.0 GB (jobs_per_gpu=2): "
        "jobs_per_gpu=auto would run 21 per GPU"
    )
    assert advice([9 * GB], [80 * GB], 7) == (
        "GPU memory: jobs peaked at 9.0 GB of 80.0 GB: jobs_per_gpu=7 is what fits"
    )
    assert advice([9 * GB], [80 * GB], "auto") == "GPU memory: jobs peaked at 9.0 GB of 80.0 GB"
    assert advice([], [80 * GB], 1) == advice([5], [], 1) == ""


def test_a_kind_is_the_group_choices_or_the_memory_keys() -> None:
    config = OmegaConf.create(
        {
            "model": {"width": 64},
            "batch": 32,
            "lr": 0.1,
            "hydra": {"runtime": {"choices": {"model": "small", "hydra/launcher": "hpsearch"}}},
        }
    )
    assert kind_of(config, ()) == (("model", "small"),)
    assert kind_of(config, ("model", "batch")) == ("small", "32")
    with pytest.raises(KeyError):
        kind_of(config, ("batchsize",))


# Sweeps on two simulated GPUs of 80 GB whose memory the jobs hold.


def gpus(tmp_path: Path, count: int = 2, total_mb: int = 80 * GB) -> tuple[dict, Path]:
    memory = tmp_path / "gpu-memory"
    memory.mkdir()
    env = simulated_gpus_env(
        {
            "HPS_FAKE_GPUS": str(count),
            "HPS_FAKE_GPU_MEMORY": str(memory),
            "HPS_FAKE_GPU_MB": str(total_mb),
        }
    )
    return env, memory


def results(tmp_path: Path) -> pd.DataFrame:
    return pd.read_csv(tmp_path / "sweep" / "results.csv", dtype={"device": str})


def at_once(records: list[dict]) -> dict[str, list[tuple[dict, list[dict]]]]:
    """For each GPU, each job with the jobs running there when it started (itself too)."""
    sets: dict[str, list[tuple[dict, list[dict]]]] = {}
    for r in records:
        running = [
            o for o in records if o["cuda"] == r["cuda"] and o["start"] <= r["start"] < o["end"]
        ]
        sets.setdefault(r["cuda"], []).append((r, running))
    return sets


ALONE_CAP = int(0.95 * 80 * GB)  # a job alone on an 80 GB GPU: the whole GPU, less headroom


def no_out_of_memory(frame: pd.DataFrame) -> None:
    assert list(frame["status"]) == ["completed"] * len(frame), frame.to_string()
    assert set(frame["attempts"]) == {1}, frame[["job", "attempts", "error"]].to_string()


@pytest.mark.slow
def test_same_size_jobs_fill_each_gpu_by_memory(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """9 GB jobs on 80 GB GPUs: the first job on each GPU runs alone and is measured (by NVML:
    these jobs report nothing); then each GPU runs 7 at once (7 x 10266 MB of 73728), never
    more, and none runs out of memory."""
    env, _ = gpus(tmp_path)
    done = runner.run(
        runner.probe_sweep(
            marks, "x=range(0,20)", "gpu_mb=9216", "sleep=4", "hydra.launcher.gpus=[0,1]", *AUTO
        ),
        env=env,
    )
    assert done.returncode == 0, done.stdout
    assert "as many at a time per GPU as their measured memory fits" in done.stdout
    frame = results(tmp_path)
    no_out_of_memory(frame)
    assert set(frame["gpu_peak_mb"]) == {9216}  # measured, every one
    first_two = frame[frame["job"] < 2]
    assert set(first_two["gpu_cap_mb"]) == {ALONE_CAP}  # alone, the whole GPU
    assert set(frame[frame["job"] >= 2]["gpu_cap_mb"]) == {need_mb(9216)}
    records = read_records(marks)
    assert {r["cap_mb"] for r in records[2:]} == {str(need_mb(9216))}
    counts = {gpu: max(len(s) for _, s in sets) for gpu, sets in at_once(records).items()}
    assert counts == {"0": 7, "1": 7}, counts
    assert "GPU memory: jobs peaked at 9.0 GB of 80.0 GB" in done.stdout


@pytest.mark.slow
def test_small_and_large_kinds_share_gpus_by_memory(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """memory_keys=[gpu_mb]: 3 GB and 30 GB jobs are two kinds, measured apart; a GPU then
    holds two large jobs and small ones beside them (by count, two large would be all)."""
    env, _ = gpus(tmp_path)
    done = runner.run(
        runner.probe_sweep(
            marks,
            "x=range(0,8)",
            "gpu_mb=3072,30720",
            "sleep=4",
            "hydra.launcher.gpus=[0,1]",
            *AUTO,
            "hydra.launcher.memory_keys=[gpu_mb]",
        ),
        env=env,
    )
    assert done.returncode == 0, done.stdout
    frame = results(tmp_path)
    no_out_of_memory(frame)
    assert set(frame["gpu_peak_mb"]) == {3072, 30720}
    records = read_records(marks)
    mixed = False
    for sets in at_once(records).values():
        for _, running in sets:
            if any(r["cap_mb"] == str(ALONE_CAP) for r in running):
                assert len(running) == 1, running  # a job measured alone is alone
                continue
            assert sum(int(r["cap_mb"]) for r in running) <= usable_mb(80 * GB), running
            sizes = [r["gpu_mb"] for r in running]
            mixed |= sizes.count(30720) == 2 and 3072 in sizes
    assert mixed, "no GPU held two large jobs and a small one at once"


@pytest.mark.slow
def test_a_job_that_outgrows_its_cap_runs_out_once_and_its_kind_learns(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """One GPU of 10000 MB, jobs of 1000 MB (7 at once after the first); job 1 grows to 3000
    MB past its cap (1228): it runs out of memory once, runs again alone (measured at 3000: it
    reports its peak, as the trainer does), and the jobs started after it reserve 3428 MB."""
    env, _ = gpus(tmp_path, count=1, total_mb=10_000)
    done = runner.run(
        runner.probe_sweep(
            marks,
            "x=range(0,12)",
            "gpu_mb=1000",
            "grow_x=1",
            "grow_to_mb=3000",
            "report_peak=true",
            "sleep=2",
            "hydra.launcher.gpus=[0]",
            *AUTO,
        ),
        env=env,
    )
    assert done.returncode == 0, done.stdout
    frame = results(tmp_path).set_index("x")
    assert list(frame["status"]) == ["completed"] * 12
    assert frame.loc[1, "attempts"] == 2 and "out of memory" in frame.loc[1, "error"]
    assert (frame.drop(index=1)["attempts"] == 1).all()  # no other job ran out
    assert frame.loc[1, "gpu_peak_mb"] == 3000
    grown = records_by_x(marks)[1]["end"]  # its retry's end: the kind learned its peak
    after = [x for x, r in records_by_x(marks).items() if r["start"] > grown]
    assert after, "no job started after the one that grew"
    assert {frame.loc[x, "gpu_cap_mb"] for x in after} == {need_mb(3000)}


def records_by_x(marks: Path) -> dict[int, dict]:
    return {r["x"]: r for r in read_records(marks)}


@pytest.mark.slow
def test_a_job_larger_than_a_gpu_fails_once_saying_so(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    env, _ = gpus(tmp_path, count=1, total_mb=10_000)
    done = runner.run(
        runner.probe_sweep(marks, "x=0", "gpu_mb=20000", "hydra.launcher.gpus=[0]", *AUTO),
        env=env,
    )
    assert done.returncode != 0
    row = results(tmp_path).iloc[0]
    assert row["status"] == "failed" and row["attempts"] == 1
    assert "out of memory alone on its GPU with the whole memory (9500 MB)" in row["error"]
    assert "needs more than one GPU holds" in row["error"]


@pytest.mark.slow
def test_another_users_process_shrinks_the_packing(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Mid-sweep another user takes 15000 MB of the GPU (free then: 7 jobs hold 64512 MB):
    no job starts into memory that is not there (a job that did would run out: the fake GPU
    refuses it), and the GPU runs at most 5 at once (58728 MB of room) until it is back."""
    env, memory = gpus(tmp_path, count=1)
    proc = runner.popen(
        runner.probe_sweep(
            marks, "x=range(0,34)", "gpu_mb=9216", "sleep=3", "hydra.launcher.gpus=[0]", *AUTO
        ),
        env=env,
    )
    try:
        wait_for_ends(marks, 4, proc)  # 7 at once by now
        (memory / "others-0").write_text("15000")
        taken = time.time()
        wait_for_ends(marks, 14, proc)  # 20 jobs still to run: room for 7 again
        (memory / "others-0").unlink()
        freed = time.time()
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    no_out_of_memory(results(tmp_path))
    # As the sweep saw it (its log's times): a job's task may begin a start-up after that.
    spans = sweep_spans(out)
    during = [n for n, (begin, _) in spans.items() if taken + 0.2 < begin < freed]
    assert during, "no job started while the other user held memory"
    assert max(at_start(spans, n) for n in during) <= 5, f"taken {taken:.3f}\n" + out
    after = [n for n, (begin, _) in spans.items() if begin > freed]
    assert max(at_start(spans, n) for n in after) > 5  # the room came back


LOG_TIME = re.compile(r"^\[([\d-]+ [\d:]+,\d+)\]\[HYDRA\] job (\d+) (start|done|ended|FAILED)")


def sweep_spans(out: str) -> dict[int, tuple[float, float]]:
    """Each job's start and end as the sweep's log says (its slot taken, then freed)."""
    spans: dict[int, list[float]] = {}
    for line in out.splitlines():
        found = LOG_TIME.match(line)
        if found:
            when = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            spans.setdefault(int(found[2]), []).append(when)
    return {n: (times[0], times[-1]) for n, times in spans.items()}


def at_start(spans: dict[int, tuple[float, float]], num: int) -> int:
    """Jobs running (the sweep's view) when job `num` started, itself included."""
    begin = spans[num][0]
    return sum(1 for b, e in spans.values() if b <= begin < e)


def wait_for_ends(marks: Path, count: int, proc: subprocess.Popen[str]) -> None:
    def ended() -> bool:
        if len(list(marks.glob("end-*"))) >= count:
            return True
        assert proc.poll() is None, f"the sweep exited before {count} jobs ended"
        return False

    wait_until(ended, 120, f"{count} jobs to end")


@pytest.mark.slow
def test_results_record_peak_and_cap_and_a_hand_set_count_gets_advice(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    env, _ = gpus(tmp_path, count=1)
    done = runner.run(
        runner.probe_sweep(
            marks,
            "x=0,1",
            "gpu_mb=3072",
            "sleep=2",
            "hydra.launcher.gpus=[0]",
            "hydra.launcher.jobs_per_gpu=2",
        ),
        env=env,
    )
    assert done.returncode == 0, done.stdout
    frame = results(tmp_path)
    assert list(frame["gpu_peak_mb"]) == [3072, 3072]
    assert list(frame["gpu_cap_mb"]) == [int(0.45 * 80 * GB)] * 2
    assert (
        "GPU memory: jobs peaked at 3.0 GB of 80.0 GB (jobs_per_gpu=2): "
        "jobs_per_gpu=auto would run 21 per GPU"
    ) in done.stdout
