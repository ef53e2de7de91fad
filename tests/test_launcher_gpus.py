"""The launcher's GPU behaviour with simulated GPUs: fresh processes, round-robin, slots."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Runner, read_records, simulated_gpus_env

pytestmark = pytest.mark.slow


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def test_twelve_jobs_on_three_simulated_gpus_two_slots_each(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    # chain: jobs end in start order, so round-robin is exact (a slot's next job is the next
    # in line).
    args = runner.probe_sweep(
        marks,
        f"x={','.join(map(str, range(12)))}",
        "chain=true",
        "sleep=0.5",
        "hydra.launcher.gpus=[0,1,2]",
        "hydra.launcher.jobs_per_gpu=2",
    )
    result = runner.run(args, env=simulated_gpus_env())
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    assert [r["num"] for r in records] == list(range(12))
    assert len({r["pid"] for r in records}) == 12, "each job needs its own fresh process"
    assert [r["cuda"] for r in records] == ["0", "1", "2"] * 4
    assert {r["fraction"] for r in records} == {"0.45"}  # 0.9 / 2 jobs per GPU
    assert {(r["jax_fraction"], r["jax_fraction_old"]) for r in records} == {("0.45", "0.45")}
    for gpu in "012":
        spans = [(r["start"], r["end"]) for r in records if r["cuda"] == gpu]
        assert len(spans) == 4
        assert max_overlap(spans) <= 2
    assert max_overlap([(r["start"], r["end"]) for r in records]) >= 3, "jobs ran one by one"
    # The console shows one line per job start and end, with its GPU.
    for num in range(12):
        assert f"job {num} start  gpu {'012'[num % 3]}" in result.stdout
        assert f"job {num} done   gpu {'012'[num % 3]}" in result.stdout
    # Runs are named from the swept key; logs are in each run dir.
    for r in records:
        run_dir = tmp_path / "sweep" / f"x={r['num']}"
        assert Path(r["output_dir"]) == run_dir
        assert f"probe job {r['num']} stdout" in (run_dir / "stdout.log").read_text()
        assert f"probe job {r['num']} stderr" in (run_dir / "stderr.log").read_text()


def test_cpu_mode_hides_gpus_and_caps_concurrency(runner: Runner, marks: Path) -> None:
    args = runner.probe_sweep(
        marks,
        "x=0,1,2,3",
        "sleep=1.0",
        "hydra.launcher.gpus=[]",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.jobs_per_gpu=2",
    )
    # The parent's GPUs must not leak into CPU jobs.
    result = runner.run(args, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert result.returncode == 0, result.stdout
    # jobs_per_gpu does nothing on the CPU: the sweep says so, once.
    assert result.stdout.count("hydra.launcher.jobs_per_gpu=2 does nothing here") == 1
    records = read_records(marks)
    assert [r["cuda"] for r in records] == [""] * 4
    assert {r["fraction"] for r in records} == {None}
    assert max_overlap([(r["start"], r["end"]) for r in records]) == 2  # 2 at once, not 1


def test_auto_gpus_follow_cuda_visible_devices(runner: Runner, marks: Path) -> None:
    args = runner.probe_sweep(
        marks, "x=0,1,2,3", "chain=true", "sleep=0.3", "hydra.launcher.memory_fraction=0.3"
    )
    result = runner.run(args, env={"CUDA_VISIBLE_DEVICES": "5,7"})
    assert result.returncode == 0, result.stdout
    records = read_records(marks)
    assert [r["cuda"] for r in records] == ["5", "7", "5", "7"]
    assert {r["fraction"] for r in records} == {"0.3"}
