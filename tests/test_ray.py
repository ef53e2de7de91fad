"""hydra.launcher.backend=ray: jobs as Ray tasks, one fresh worker each, on a real Ray.

Ray is real here (a local Ray the sweep starts, or a cluster of two nodes on this machine);
only the GPUs are declared, so jobs get Ray's CUDA_VISIBLE_DEVICES but no GPU behind it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest
from backend_suite import BackendSuite
from conftest import (
    PROBE,
    Runner,
    measure_cold_start_s,
    read_records,
    simulated_gpus_env,
    wait_no_tagged,
    wait_until,
)

from hpsearch_launcher import contract
from hpsearch_launcher.execute.failures import MAX_LOST_RETRIES, Retry, retry_kind
from hpsearch_launcher.execute.job.remote import node_env, sweep_dir_problem, write_mark
from hpsearch_launcher.execute.ray.driver import gpu_fraction
from hpsearch_launcher.execute.ray.handle import node_lost
from hpsearch_launcher.outcome import Ending, Outcome
from hpsearch_launcher.plan.settings import parse_settings
from hpsearch_launcher.plan.slots import device_label

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

# One Ray at a time on this machine: with pytest-xdist, every Ray test runs in one worker
# (`--dist loadgroup`), since Ray's clusters share /tmp/ray and its default ports.
pytestmark = pytest.mark.xdist_group("ray")


def test_the_ray_tests_run_one_at_a_time_on_one_worker(request: pytest.FixtureRequest) -> None:
    """Two Ray clusters at once on 2 cores time out, and `address=auto` finds the other
    test's: under xdist's loadgroup every test here carries the group in its id."""
    if request.config.getoption("loadgroup", False):  # an xdist worker under loadgroup
        assert request.node.nodeid.endswith("@ray"), "xdist_group is not honoured"


PLACEMENT = re.compile(r"^(?P<gpu>[\d,]+|cpu)@[\d.]+/(?P<node>[0-9a-f]{8})$")
RAY_TASK = "ray::hpsearch job "  # a Ray worker's process title while it runs one of our jobs
# A test cluster's head, its workers at normal priority as a sweep's own Ray runs them (a
# cluster started with RAY_worker_niceness=0, docs/ray.md): at Ray's nice 15 they would crawl
# beside the suite's other work.
HEAD = {"num_cpus": 2, "num_gpus": 1, "_system_config": {"worker_niceness": 0}}


# --- pure parts -----------------------------------------------------------------------------


def test_the_console_names_rays_places_as_they_are() -> None:
    assert device_label("0") == "gpu 0"
    assert device_label("GPU-8a1b") == "gpu GPU-8a1b"
    assert device_label("cpu") == "cpu"
    assert device_label("ray:1") == "ray:1"  # a slot group: which GPU is Ray's choice
    assert device_label("1@10.0.0.5/3f2a9c1b") == "1@10.0.0.5/3f2a9c1b"


def test_gpu_fraction_rounds_down_so_that_jobs_per_gpu_fit() -> None:
    for jobs in range(1, 17):
        assert jobs * gpu_fraction(1 / jobs) <= 1
        assert gpu_fraction(1 / jobs) >= 1 / jobs - 1e-4
    assert gpu_fraction(1.0) == 1.0


def test_node_env_takes_the_gpu_ray_assigned_and_caps_it_in_mb() -> None:
    env = {contract.MEMORY_FRACTION: "0.45", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert node_env(env, ["1"], {"1": 80_000}.get) == env | {
        contract.GPU_ID: "1",
        contract.MEMORY_LIMIT_MB: "36000",
    }
    # A node whose NVML does not know its GPU: the fraction alone (the job computes the rest).
    assert node_env(env, ["1"], lambda gpu: None) == env | {contract.GPU_ID: "1"}
    # No GPU assigned: CUDA sees none (Ray leaves CUDA_VISIBLE_DEVICES alone then).
    assert node_env({"OMP_NUM_THREADS": "2"}, [], {"0": 1}.get) == {
        "OMP_NUM_THREADS": "2",
        "CUDA_VISIBLE_DEVICES": "",
    }


def test_a_node_that_does_not_share_the_sweep_dir_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path, token = write_mark(Path("sweep"))
    assert Path(path).is_absolute()
    (tmp_path / "sweep" / "x=1").mkdir()
    log, cwd = "sweep/x=1/stderr.log", str(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a worker starts in some directory of its own
    assert sweep_dir_problem((path, token), log, cwd) == ""
    assert Path.cwd() == tmp_path  # it works where the sweep started, as a local job does
    missing = sweep_dir_problem((str(elsewhere / ".hpsearch-sweep"), token), log, cwd)
    assert "does not see the sweep dir" in missing and "is missing here" in missing
    assert "filesystem every node mounts at the same path" in missing
    other = sweep_dir_problem((path, "another token"), log, cwd)
    assert "another sweep's" in other
    unwritable = sweep_dir_problem((path, token), "no/such/stderr.log", cwd)
    assert unwritable.startswith("this node cannot write the job's log no/such/stderr.log")
    no_cwd = sweep_dir_problem((path, token), log, str(tmp_path / "not here"))
    assert no_cwd.startswith(f"this node has no directory {tmp_path / 'not here'}, where the")


def test_node_died_error_keeps_the_node_and_drops_rays_advice() -> None:
    err = ray.exceptions.NodeDiedError(
        "Task failed because the node it was running on is dead or unavailable. Node IP: "
        "10.0.0.7, node ID: 44df68e1697a5a40b8877d92097b96edc99f. This can happen if the node "
        "was preempted, had a hardware failure, or its raylet crashed unexpectedly."
    )
    lost = node_lost(err)
    assert lost.ending is Ending.LOST
    assert (
        lost.detail
        == "its node was lost (Node IP: 10.0.0.7, node ID: 44df68e1697a5a40b8877d92097b96edc99f)"
    )
    assert lost.placement == "?@10.0.0.7/44df68e1"


def test_a_lost_node_is_retried_apart_from_the_jobs_own_failures() -> None:
    settings = parse_settings({"max_retries": 0})
    lost = Outcome(Ending.LOST, detail="its node was lost")
    for n in range(1, MAX_LOST_RETRIES + 1):
        assert retry_kind(lost, False, n, 0, settings, lost_attempts=n) is Retry.AGAIN
    assert retry_kind(lost, False, 9, 0, settings, lost_attempts=MAX_LOST_RETRIES + 1) is None
    # Two lost attempts do not use up max_retries=1 for the job's own failure afterwards.
    raised = Outcome(Ending.RAISED, detail="ValueError: x")
    once = parse_settings({"max_retries": 1})
    assert retry_kind(raised, False, 3, 0, once, lost_attempts=2) is Retry.AGAIN
    assert retry_kind(raised, False, 4, 0, once, lost_attempts=2) is None
    assert lost.reason == "its node was lost"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"backend": "k8s"}, "hydra.launcher.backend='k8s': must be one of local, ray, slurm"),
        ({"backend": "ray", "gpus": [0, 1]}, "Ray assigns each job its GPU"),
        ({"ray": {"address": "http://head:8265"}}, "must be empty (start a Ray for the sweep)"),
        ({"ray": {"num_cpus": 0}}, "hydra.launcher.ray.num_cpus=0: must be a number > 0"),
        ({"ray": {"address": "auto", "init": {"num_gpus": 2}}}, "a running cluster's resources"),
        (
            {"ray": {"adress": "auto"}},
            "hydra.launcher.ray.adress: no such setting; did you mean hydra.launcher.ray.address?",
        ),
    ],
)
def test_bad_ray_settings_are_named(params: dict, message: str) -> None:
    with pytest.raises(Exception, match=re.escape(message)):
        parse_settings(params)


def test_ray_addresses_accepted() -> None:
    for address in ("", "auto", "ray://head:10001", "10.0.0.1:6379"):
        assert (
            parse_settings({"backend": "ray", "ray": {"address": address}}).section("ray").address
            == address
        )


# --- a local Ray the sweep starts -----------------------------------------------------------


def _intervals_overlap(records: list[dict]) -> int:
    """The most jobs running at one moment among `records` (their start..end)."""
    events = sorted([(r["start"], 1) for r in records] + [(r["end"], -1) for r in records])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.slow
def test_local_ray_packs_jobs_per_declared_gpu_and_records_like_local(
    launch_app, marks: Path, tmp_path: Path, stretch: float
) -> None:
    from apps.probe import probe

    timeout = round(15 * stretch)  # the hang job's; the others end well before it
    jobs = [[f"x={x}", "sleep=1.0"] for x in range(8)]
    jobs[4] = ["x=4", "mode=stderr_oom_once"]  # out of memory once: again alone, whole GPU
    jobs[5] = ["x=5", "mode=raise"]
    jobs[6] = ["x=6", "mode=exit"]
    jobs[7] = ["x=7", "mode=hang"]
    jobs.append(["x=8", "mode=hard_exit"])  # os._exit: the worker dies, Ray says no more
    returns = launch_app(
        PROBE.parent / "conf",
        "probe",
        probe,
        jobs,
        "hydra.launcher.backend=ray",
        "hydra.launcher.jobs_per_gpu=2",
        f"hydra.launcher.timeout={timeout}",
        "+hydra.launcher.ray.init.num_gpus=2",
        "+hydra.launcher.ray.init.num_cpus=4",
    )
    assert ray.is_initialized()  # the sweep's own Ray serves its later batches; exit stops it
    ray.shutdown()
    # One JobReturn per job, in input order.
    assert [r.overrides[0] for r in returns] == [job[0] for job in jobs]
    assert [r.status.name for r in returns] == ["COMPLETED"] * 5 + ["FAILED"] * 4
    assert [r.return_value for r in returns[:5]] == [0.0, 1.0, 2.0, 3.0, 4.0]
    records = read_records(marks)
    assert [r["x"] for r in records] == [0, 1, 2, 3, 4]
    # Ray's GPU assignment, never more than 2 jobs per GPU at once, a fresh process per job.
    assert {r["cuda"] for r in records} <= {"0", "1"}
    for gpu in ("0", "1"):
        assert _intervals_overlap([r for r in records if r["cuda"] == gpu]) <= 2
    assert len({r["pid"] for r in records}) == 5
    # At the sweep's priority, as local jobs run, not at the nice 15 Ray gives its workers.
    assert [r["nice"] for r in records] == [os.nice(0)] * 5
    # Each watches its raylet: should that die (with the sweep), the job's tree ends at once.
    assert all(r["watchdog"] for r in records)
    assert [r["fraction"] for r in records] == ["0.45"] * 4 + ["0.95"]
    alone = records[4]  # its retry held a whole GPU (num_gpus=1): no other job on it meanwhile
    assert not [r for r in records[:4] if r["cuda"] == alone["cuda"] and r["end"] > alone["start"]]
    table = pd.read_csv(tmp_path / "sweep" / "results.csv", dtype={"device": str})
    assert list(table["status"]) == ["completed"] * 5 + ["failed", "failed", "timeout", "failed"]
    for row, record in zip(table.head(5).itertuples(), records, strict=True):
        found = PLACEMENT.match(row.device)
        assert found and found["gpu"] == record["cuda"], row.device
        assert record["node"].startswith(found["node"])
    assert table["device"].str.match(PLACEMENT.pattern).all(), table["device"]  # every row
    assert table["attempts"][4] == 2
    assert table["error"][4].startswith("attempt 1 (")
    assert "out of memory: its Ray worker process died" in table["error"][4]
    assert table["error"][5] == "ValueError: probe asked to raise"
    assert table["error"][6] == "exited with status 3"
    assert table["error"][7].startswith(f"timed out after {timeout}s")
    assert PLACEMENT.match(table["device"][7]), table["device"][7]  # where it hung
    assert table["error"][8] == "its Ray worker process died (Ray does not tell the exit status)"
    assert PLACEMENT.match(table["device"][8]), table["device"][8]  # where it died
    for name in ("sleep=1.0,x=0", "mode=raise,x=5", "mode=hang,x=7"):
        assert (tmp_path / "sweep" / name / "stdout.log").exists()
    stderr = (tmp_path / "sweep" / "mode=raise,x=5" / "stderr.log").read_text()
    assert "ValueError: probe asked to raise" in stderr  # the traceback, where users look
    assert not (tmp_path / "sweep" / ".hpsearch-sweep").exists()
    # Each worker was used once and is gone; the hang job's grandchild went with its worker.
    pids = [r["pid"] for r in records]
    wait_until(lambda: not [p for p in pids if psutil.pid_exists(p)], 30, "the workers")
    wait_until(lambda: not _processes_with(RAY_TASK), 30, "the sweep's Ray workers")
    assert not _processes_with(f"time.sleep(600) {marks}")  # the hang job's grandchild


@pytest.mark.slow
def test_the_timeout_counts_from_the_start_on_a_node_not_from_rays_queue(
    runner: Runner, marks: Path, tmp_path: Path, stretch: float
) -> None:
    """One CPU for three GPU slots: the jobs run one after the other, the third one waiting
    in Ray's queue for two jobs' time. Each runs `sleep` plus its process's start, under the
    timeout of 2 sleeps while the start costs less than a sleep; counted from submission,
    the third would pass it (3 sleeps at least), however slow the start. The start is
    measured now, not at collection: the load a Ray test meets may be another's."""
    sleep = max(5.0, round(10 * measure_cold_start_s(), 1))  # quiet: 5 s and 10 s
    result = runner.run(
        [
            *runner.probe_sweep(marks, "x=1,2,3", f"sleep={sleep}"),
            "hydra.launcher.backend=ray",
            "hydra.launcher.jobs_per_gpu=3",
            f"hydra.launcher.timeout={round(2 * sleep)}",
            "+hydra.launcher.ray.init.num_gpus=1",
            "+hydra.launcher.ray.init.num_cpus=1",
        ],
        timeout=max(120 * stretch, 12 * sleep),
    )
    assert result.returncode == 0, result.stdout
    assert "run at most 1 jobs of ray.num_cpus=1 at once, fewer than its GPUs' 3 slots" in (
        result.stdout
    )
    records = read_records(marks)
    assert _intervals_overlap(records) == 1  # one at a time: each waited for the one before
    table = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert list(table["status"]) == ["completed"] * 3, table.to_string()
    assert not (tmp_path / "sweep" / ".hpsearch-sweep.started").exists()


@pytest.mark.slow
def test_a_node_that_does_not_see_the_sweeps_mark_fails_its_jobs_with_the_reason(
    runner: Runner, marks: Path, tmp_path: Path, stretch: float
) -> None:
    """What a node without the shared filesystem meets, made here by another sweep taking
    the sweep dir's mark mid-sweep: the jobs that start after it fail, naming the fix."""
    (marks / "hold").touch()
    proc = runner.popen(
        [
            *runner.probe_sweep(marks, "x=range(4)", "sleep=0.5"),
            "hydra.launcher.backend=ray",
            "+hydra.launcher.ray.init.num_cpus=2",
        ]
    )
    try:
        wait_until(lambda: len(list(marks.glob("start-*"))) == 2, 60, "2 jobs")
        (tmp_path / "sweep" / ".hpsearch-sweep").write_text("another sweep's token")
        (marks / "hold").unlink()
        out, _ = proc.communicate(timeout=120 * stretch)
    finally:
        proc.kill()
    assert proc.returncode == 1, out
    table = pd.read_csv(tmp_path / "sweep" / "results.csv", dtype={"device": str})
    assert list(table["status"]) == ["completed", "completed", "failed", "failed"]
    for row in table.tail(2).itertuples():
        assert row.error.startswith("this node does not see the sweep dir "), row.error
        assert "mark file .hpsearch-sweep is another sweep's here" in row.error
        assert PLACEMENT.match(row.device), row.device  # the node that could not
    assert "FAILED cpu@" in out and "does not see the sweep dir" in out
    assert not (tmp_path / "sweep" / "x=2" / "stderr.log").exists()  # it wrote nothing there


def _processes_with(text: str, tag: str | None = None) -> list[psutil.Process]:
    """Live processes whose command line holds `text`; with `tag`, only those of that test's
    runner (other tests on other workers run hanging probes too)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if text not in " ".join(proc.cmdline()) or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if tag is None or proc.environ().get("HPS_TEST_TAG") == tag:
                found.append(proc)
        except psutil.Error:
            continue
    return found


# --- two nodes on this machine --------------------------------------------------------------


def on_cluster(runner: Runner, marks: Path, *args: str) -> list[str]:
    """A probe sweep on the cluster its RAY_ADDRESS names, 2 jobs per GPU."""
    return [
        *runner.probe_sweep(marks, *args),
        "hydra.launcher.backend=ray",
        "hydra.launcher.ray.address=auto",
        "hydra.launcher.jobs_per_gpu=2",
    ]


@pytest.fixture
def two_nodes() -> Iterator[tuple[Cluster, object]]:
    """A Ray cluster: the head and one more node, each with 2 CPUs and 1 declared GPU."""
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    node = cluster.add_node(num_cpus=2, num_gpus=1)
    cluster.wait_for_nodes()
    yield cluster, node
    cluster.shutdown()


@pytest.mark.slow
def test_two_nodes_a_lost_node_fails_only_its_jobs_which_run_again(
    runner: Runner, marks: Path, tmp_path: Path, two_nodes: tuple[Cluster, object], stretch: float
) -> None:
    cluster, node = two_nodes
    (marks / "hold").touch()  # jobs x >= 4 wait at their start until it is removed
    proc = runner.popen(
        on_cluster(runner, marks, "x=range(8)", "sleep=0.5", "hold_from=4"),
        env={"RAY_ADDRESS": cluster.address},
    )
    try:
        # Jobs 0-3 end; jobs 4-7 then hold the 4 slots: 2 on each node's GPU.
        wait_until(
            lambda: all((marks / f"start-{n}").exists() for n in range(4, 8)),
            90,
            "jobs 4-7",
        )
        cluster.remove_node(node, allow_graceful=False)  # its raylet and workers killed
        (marks / "hold").unlink()
        out, _ = proc.communicate(timeout=120 * stretch)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    lost_node = node.node_id
    head = cluster.head_node.node_id
    records = read_records(marks)
    assert {r["node"] for r in records if r["x"] < 4} == {head, lost_node}  # both nodes ran jobs
    table = pd.read_csv(tmp_path / "sweep" / "results.csv", dtype={"device": str})
    assert list(table["status"]) == ["completed"] * 8
    again = table[table["attempts"] == 2]
    assert len(again) == 2, table.to_string()  # exactly the lost node's two held jobs
    for row in again.itertuples():
        assert "its node was lost (Node IP: " in row.error and f"node ID: {lost_node}" in row.error
        assert row.device.endswith(head[:8])  # and ran again on the head
    assert (table["attempts"] == 1).sum() == 6
    assert "retrying (its node was lost" in out
    # The same sweep again, on what is left of the cluster: every job resumed from results.csv.
    again_run = runner.run(
        on_cluster(runner, marks, "x=range(8)", "sleep=0.5", "hold_from=4"),
        env={"RAY_ADDRESS": cluster.address},
        timeout=120 * stretch,
    )
    assert again_run.returncode == 0, again_run.stdout
    assert "8/8 finished (0 done, 0 failed, 8 resumed)" in again_run.stdout


@pytest.mark.slow
def test_a_node_that_joins_mid_sweep_takes_jobs(
    runner: Runner, marks: Path, tmp_path: Path, stretch: float
) -> None:
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    try:
        (marks / "hold").touch()  # every job waits at its start until it is removed
        proc = runner.popen(
            on_cluster(runner, marks, "x=range(6)"),
            env={"RAY_ADDRESS": cluster.address},
        )
        try:
            wait_until(lambda: len(list(marks.glob("start-*"))) == 2, 60, "the head's 2 jobs")
            time.sleep(1)
            assert len(list(marks.glob("start-*"))) == 2  # one GPU: 2 slots, no more
            joined = cluster.add_node(num_cpus=2, num_gpus=1)
            wait_until(
                lambda: len(list(marks.glob("start-*"))) == 4,
                60,
                "2 jobs on the new node",
            )
            (marks / "hold").unlink()
            out, _ = proc.communicate(timeout=120 * stretch)
        finally:
            proc.kill()
        assert proc.returncode == 0, out
        assert "the cluster grew: 4 jobs at a time (2 before)" in out
        records = read_records(marks)
        assert joined.node_id in {r["node"] for r in records}
        assert _intervals_overlap(records) == 4
        table = pd.read_csv(tmp_path / "sweep" / "results.csv")
        assert list(table["status"]) == ["completed"] * 6
    finally:
        cluster.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_sweep_leaves_no_task_on_the_cluster(
    runner: Runner, marks: Path, tmp_path: Path, signum: int, stretch: float
) -> None:
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    try:
        proc = runner.popen(
            on_cluster(runner, marks, "x=range(4)", "mode=hang"),
            env={"RAY_ADDRESS": cluster.address},
        )
        wait_until(
            lambda: (marks / "start-0").exists() and (marks / "start-1").exists(),
            60,
            "2 jobs",
        )
        # The cluster's workers are not the runner's: their jobs' children carry no tag, but
        # their command names this test's marks dir.
        hanging = functools.partial(_processes_with, f"time.sleep(600) {marks}")
        wait_until(lambda: len(hanging()) >= 2, 30, "2 grandchildren")
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=60 * stretch)
        assert proc.returncode == 128 + signum, out
        table = pd.read_csv(tmp_path / "sweep" / "results.csv", dtype={"device": str})
        assert sorted(table["status"]) == ["interrupted"] * 2, table.to_string()
        assert table["device"].str.match(PLACEMENT.pattern).all()  # where each was stopped
        # Nothing of the sweep is left: no task running, its workers and their children gone,
        # and the cluster's GPU all free again (asked by a new driver).
        wait_until(lambda: not _processes_with(RAY_TASK), 15, "the sweep's Ray workers")
        assert not hanging()
        free = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import json, ray; ray.init(address={cluster.address!r}, "
                "logging_level='ERROR'); print(json.dumps(ray.available_resources()))",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        available = json.loads(free.stdout.strip().splitlines()[-1])
        assert available.get("GPU") == 1.0, free.stdout + free.stderr
    finally:
        cluster.shutdown()


@pytest.mark.slow
def test_a_killed_sweep_leaves_nothing_of_its_own_ray(
    runner: Runner, marks: Path, stretch: float
) -> None:
    """SIGKILL gives the sweep no chance to stop anything: the Ray it started (its reaper)
    ends the raylet, the workers and the jobs' children by itself."""
    proc = runner.popen(
        [*runner.probe_sweep(marks, "x=1,2", "mode=hang"), "hydra.launcher.backend=ray"]
    )
    hanging = functools.partial(_processes_with, "time.sleep(600)", runner.tag)
    wait_until(lambda: len(hanging()) >= 2, 60, "2 jobs' grandchildren")
    assert len(_processes_with(RAY_TASK, runner.tag)) == 2
    proc.kill()
    proc.communicate(timeout=30 * stretch)
    left = wait_no_tagged(runner.tag, within=30 * stretch)  # every process of it carries the tag
    assert not left, [p.cmdline()[:2] for p in left]


@pytest.mark.slow
def test_an_unreachable_cluster_is_one_line(runner: Runner, marks: Path) -> None:
    result = runner.run(
        [
            *runner.probe_sweep(marks, "x=1,2"),
            "hydra.launcher.backend=ray",
            "hydra.launcher.ray.address=auto",
        ],
        env={"RAY_ADDRESS": "", "RAY_TMPDIR": str(marks)},  # no cluster recorded there
        timeout=120,
    )
    assert result.returncode == 2, result.stdout
    assert "hpsearch: error: hydra.launcher.ray.address='auto': no Ray cluster reached" in (
        result.stdout
    )
    assert "Traceback" not in result.stdout


@pytest.mark.slow
def test_reports_and_pruning_work_for_ray_jobs(runner: Runner, marks: Path, tmp_path: Path) -> None:
    """The report channel crosses to Ray workers (a file in the shared run dir): with
    prune=median, x=1's hopeless curve is stopped once x=8 and x=7 completed, and no Ray task
    of it is left."""
    result = runner.run(
        [
            *runner.probe_sweep(marks, "x=8,7,1", "steps=20", "step_s=0.2"),
            "hydra.launcher.backend=ray",
            "hydra.launcher.prune=median",
            "hydra.launcher.prune_warmup=1",
            "hydra.launcher.prune_grace=1",
            "+hydra.launcher.ray.init.num_cpus=2",
        ],
        timeout=180,
    )
    assert result.returncode == 0, result.stdout
    table = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x")
    assert list(table.loc[[8, 7], "status"]) == ["completed", "completed"], table.to_string()
    assert table.loc[1, "status"] == "pruned" and table.loc[1, "last_step"] < 19
    assert table.loc[8, "last_step"] == 19 and table.loc[8, "last_value"] == 8.0
    assert not _processes_with(RAY_TASK)


@pytest.mark.slow
def test_each_ray_jobs_peak_gpu_memory_is_measured_on_its_node(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """The worker measures its job's GPU memory where it runs (its node's NVML: here a
    simulated 80 GB GPU the jobs hold 2048 MB of) and records the cap its node set; and
    jobs_per_gpu=auto, this machine's packing, says it runs one job per GPU on Ray."""
    memory = tmp_path / "gpu-memory"
    memory.mkdir()
    env = simulated_gpus_env(
        {"HPS_FAKE_GPUS": "1", "HPS_FAKE_GPU_MEMORY": str(memory), "HPS_FAKE_GPU_MB": "81920"}
    )
    result = runner.run(
        [
            *runner.probe_sweep(marks, "x=0,1", "gpu_mb=2048", "sleep=2"),
            "hydra.launcher.backend=ray",
            "hydra.launcher.jobs_per_gpu=auto",
            "+hydra.launcher.ray.init.num_gpus=1",
            "+hydra.launcher.ray.init.num_cpus=2",
        ],
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout
    assert "on Ray each job holds a whole GPU (jobs_per_gpu=1)" in result.stdout
    table = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert list(table["gpu_peak_mb"]) == [2048, 2048]
    assert list(table["gpu_cap_mb"]) == [int(0.9 * 81920)] * 2


class TestRayBackend(BackendSuite):
    """The suite every backend runs (tests/backend_suite.py), on a Ray of the sweep's own,
    started in this process by the first sweep and stopped after the last."""

    backend = "ray"

    @pytest.fixture(autouse=True, scope="class")
    def ray_stopped_after(self) -> Iterator[None]:
        yield
        ray.shutdown()
