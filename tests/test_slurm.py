"""The SLURM backend (hydra.launcher.backend=slurm): its settings, hydra-submitit-launcher's keys
and SLURM's states without a cluster; then sweeps on a real single-node SLURM, which
.ci/slurm-up.sh starts (CI runs it; a developer can). Without one the cluster's tests skip with
one line; with HPSEARCH_REQUIRE_SLURM=1 (CI) a missing cluster fails them."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from backend_suite import BackendSuite
from conftest import Runner, read_records, wait_for, wait_until
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hpsearch_launcher.execute.failures import Retry, retry_kind
from hpsearch_launcher.execute.slurm.adopt import Adoptions
from hpsearch_launcher.execute.slurm.ledger import Entry, Ledger, read_entries
from hpsearch_launcher.execute.slurm.sbatch import sbatch_parameters
from hpsearch_launcher.execute.slurm.states import outcome_of_state
from hpsearch_launcher.outcome import Ending, Outcome, Status, status_of
from hpsearch_launcher.plan.settings import parse_settings
from hpsearch_launcher.plan.slurm_settings import SlurmSettings, slurm_of

pytestmark = pytest.mark.xdist_group("slurm")  # one cluster: its tests one at a time
REQUIRED = os.environ.get("HPSEARCH_REQUIRE_SLURM") == "1"
SLURM = ("hydra.launcher.backend=slurm",)
_UNUSABLE = ("down", "drain", "fail", "unk", "not_responding", "inval")  # sinfo's node states


@functools.cache
def cluster_problem() -> str:
    """Why there is no SLURM cluster to test against ("" if its node takes jobs); asked once
    (sinfo takes seconds to give up on a controller that is not there)."""
    if shutil.which("sinfo") is None:
        return "no sinfo"
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, check=False, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 30 s"
    states = done.stdout.split()
    if done.returncode or all(s.startswith(_UNUSABLE) for s in states):
        return f"sinfo: {(done.stderr or ' '.join(states)).strip() or 'no node'}"
    return ""


def queue() -> list[str]:
    """The jobs SLURM holds that are not done (pending, running, completing)."""
    done = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True)
    return done.stdout.splitlines()


@pytest.fixture
def cluster() -> None:
    """A test on the real cluster: skipped without one (failed where one is required)."""
    problem = cluster_problem()
    if problem and REQUIRED:
        pytest.fail(f"HPSEARCH_REQUIRE_SLURM=1 and no SLURM cluster ({problem})")
    if problem:
        pytest.skip(f"no SLURM cluster ({problem}): .ci/slurm-up.sh starts one")


@pytest.fixture
def empty_queue(cluster: None) -> None:
    """A test that reads SLURM's queue: earlier tests' jobs are gone first (a job stays in
    it for seconds after its result, while srun and SLURM wind it down)."""
    wait_until(lambda: not queue(), 30, "earlier tests' jobs to leave SLURM's queue")


@pytest.fixture(scope="module", autouse=True)
def no_job_left() -> Iterator[None]:
    """After the tests, SLURM holds none of their jobs."""
    yield
    if not cluster_problem():
        wait_until(lambda: not queue(), 30, "SLURM's queue to empty")


def results(tmp_path: Path) -> pd.DataFrame:
    return pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)


# ---- without a cluster ----------------------------------------------------------------------


def test_submitit_slurm_keys_mean_what_they_mean_there() -> None:
    params = sbatch_parameters(
        SlurmSettings(timeout_min=5, mem_gb=4, gpus_per_node=1, partition="gpu", name="")
    )
    assert params["time"] == 5 and params["mem"] == "4GB" and params["gpus_per_node"] == 1
    assert params["partition"] == "gpu" and params["job_name"] == "hpsearch"
    assert "array_parallelism" not in params and "max_num_timeout" not in params


@pytest.mark.parametrize(
    ("slurm", "message"),
    [
        ({"nodes": 2}, "hydra.launcher.slurm.nodes=2: must be 1: each job is one fresh process"),
        ({"tasks_per_node": 4}, "slurm.tasks_per_node=4: must be 1"),
        ({"stderr_to_stdout": True}, "each job keeps its own stderr.log"),
        ({"wait_for_completion": False}, "records every job's end"),
        ({"array_parallelism": 0}, "hydra.launcher.slurm.array_parallelism=0"),
        ({"partiton": "gpu"}, "did you mean hydra.launcher.slurm.partition?"),
    ],
)
def test_what_a_key_cannot_mean_here_is_refused_in_one_line(slurm: dict, message: str) -> None:
    with pytest.raises(Exception, match=re.escape(message)) as error:
        parse_settings({"backend": "slurm", "slurm": slurm})
    assert len(str(error.value).splitlines()) == 1


# Every key of hydra-submitit-launcher's SlurmQueueConf, set as a user's config sets it.
SUBMITIT_SLURM_KEYS = {
    "submitit_folder": "cluster/.submitit/%j",
    "timeout_min": 7,
    "cpus_per_task": 4,
    "gpus_per_node": 1,
    "tasks_per_node": 1,
    "mem_gb": 16,
    "nodes": 1,
    "name": "my_app",
    "stderr_to_stdout": False,
    "partition": "gpu",
    "qos": "normal",
    "comment": "sweep",
    "constraint": "volta",
    "exclude": "node7",
    "gres": "gpu:1",
    "cpus_per_gpu": 2,
    "gpus_per_task": 1,
    "mem_per_gpu": "8G",
    "mem_per_cpu": "2G",
    "account": "lab",
    "signal_delay_s": 60,
    "max_num_timeout": 2,
    "additional_parameters": {"mail-type": "END"},
    "array_parallelism": 8,
    "setup": ["module load cuda"],
    "srun_args": ["--cpu-bind=none"],
}


def test_a_submitit_slurm_config_moves_by_the_launchers_name() -> None:
    """hydra/launcher=hpsearch_slurm takes submitit_slurm's keys where it has them, each
    meaning what it means there (as submitit's sbatch parameters)."""
    conf = Path(__file__).parent / "apps" / "conf"
    overrides = [  # a mapping's new key needs a + (as with submitit_slurm: Hydra's struct)
        f"+hydra.launcher.{k}.mail-type=END"
        if k == "additional_parameters"
        else f"hydra.launcher.{k}={str(v).lower() if isinstance(v, bool) else repr(v)}"
        for k, v in SUBMITIT_SLURM_KEYS.items()
    ]
    with initialize_config_dir(str(conf), version_base=None):
        cfg = compose(
            "probe", ["hydra/launcher=hpsearch_slurm", *overrides], return_hydra_config=True
        )
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert isinstance(launcher, dict)
    settings = parse_settings({k: v for k, v in launcher.items() if k != "_target_"})
    assert settings.backend == "slurm"
    assert {k: getattr(slurm_of(settings), k) for k in SUBMITIT_SLURM_KEYS} == SUBMITIT_SLURM_KEYS
    sbatch = sbatch_parameters(slurm_of(settings))
    assert (sbatch["time"], sbatch["mem"], sbatch["job_name"]) == (7, "16GB", "my_app")
    assert sbatch["ntasks_per_node"] == 1 and sbatch["setup"] == ["module load cuda"]


def test_the_default_submitit_folder_is_in_the_sweep_dir() -> None:
    conf = Path(__file__).parent / "apps" / "conf"
    with initialize_config_dir(str(conf), version_base=None):
        cfg = compose("probe", ["hydra/launcher=hpsearch_slurm"], return_hydra_config=True)
    folder = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)["submitit_folder"]
    assert folder == f"{cfg.hydra.sweep.dir}/.submitit/%j"


@pytest.mark.parametrize(
    ("state", "ending", "status"),
    [
        ("TIMEOUT", Ending.TIME_LIMIT, Status.TIMEOUT),
        ("PREEMPTED", Ending.PREEMPTED, Status.FAILED),
        ("NODE_FAIL", Ending.LOST, Status.FAILED),
        ("OUT_OF_MEMORY", Ending.CRASHED, Status.FAILED),
        ("CANCELLED", Ending.CRASHED, Status.FAILED),
    ],
)
def test_slurms_ends_map_onto_the_results_statuses(
    state: str, ending: Ending, status: Status
) -> None:
    outcome = outcome_of_state(state, "0:15", "", "cpu@node/7")
    assert outcome.ending is ending and status_of(outcome) is status
    assert state in outcome.reason


@pytest.mark.parametrize("ending", [Ending.TIME_LIMIT, Ending.PREEMPTED])
def test_a_time_limit_or_preemption_runs_again_up_to_max_num_timeout(ending: Ending) -> None:
    """As hydra-submitit-launcher requeues them; apart from max_retries (the job's own
    failures): two requeues leave max_retries=1 for a failure afterwards."""
    settings = parse_settings({"max_retries": 1, "slurm": {"max_num_timeout": 2}})
    limit = slurm_of(settings).max_num_timeout  # the SLURM execution's `requeues`
    requeued = Outcome(ending, detail="SLURM")
    assert retry_kind(requeued, False, 1, 0, settings, requeues=(1, limit)) is Retry.AGAIN
    assert retry_kind(requeued, False, 2, 0, settings, requeues=(2, limit)) is Retry.AGAIN
    assert retry_kind(requeued, False, 3, 0, settings, requeues=(3, limit)) is None
    raised = Outcome(Ending.RAISED, detail="ValueError: x")
    assert retry_kind(raised, False, 3, 0, settings, requeues=(2, limit)) is Retry.AGAIN
    assert retry_kind(raised, False, 4, 0, settings, requeues=(2, limit)) is None
    assert (
        retry_kind(requeued, False, 1, 0, parse_settings({}), requeues=(1, 0)) is None
    )  # none by default


def test_a_job_slurm_ended_without_its_state_says_its_exit() -> None:
    assert outcome_of_state("FAILED", "3:0", "", "").reason == "exited with status 3"
    assert outcome_of_state("FAILED", "0:9", "", "").reason.startswith("killed by SIGKILL")
    assert (
        "segmentation fault" in outcome_of_state("FAILED", "139:0", "", "").reason
    )  # srun's 128 + 11


def _entry(job_id: str, result: str = "r.pkl", run_dir: str = "x=1", attempt: int = 1) -> Entry:
    return Entry(job_id, "abc", ("x=1",), run_dir, attempt, result, "s/1-1", 1.0)


def test_a_ledger_keeps_each_run_dirs_last_entry_and_leaves_out_what_is_no_entry() -> None:
    """A later attempt of a job (its run dir) replaces the earlier; a line cut by a kill, an
    older hpsearch's bare job id, a foreign or half-filled record are left out and counted."""
    first, other, again = _entry("11"), _entry("12", run_dir="x=2"), _entry("13", attempt=2)
    half = json.dumps({**json.loads(first.line()), "job_id": ""})
    text = "".join(
        [first.line(), "17\n", other.line(), "{not json\n", half + "\n", "\n", again.line()]
    )
    assert read_entries(text + again.line()[:20]) == ([other, again], 4)
    assert read_entries("") == ([], 0)


def test_a_ledger_entry_after_a_cut_line_starts_a_line_of_its_own(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.path.write_text(_entry("11").line() + '{"job_id": "12", "conf')
    ledger.add(_entry("13", run_dir="x=3"))
    assert ledger.earlier() == [_entry("11"), _entry("13", run_dir="x=3")]
    ledger.close()
    assert not ledger.path.exists() and ledger.earlier() == []


# ---- on the cluster ---------------------------------------------------------------------------


@pytest.mark.usefixtures("cluster")
def test_without_accounting_sacct_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job squeue no longer lists is looked up with sacct; a cluster without accounting (this
    one: no slurmdbd) says so once, and sacct is not asked again (nor warned about)."""
    from hpsearch_launcher.execute.slurm import watcher as module

    watcher = module.Watcher()
    try:
        assert watcher.accounted_state("999999") == ""
        assert watcher.accounting is False
        monkeypatch.setattr(module, "run", lambda command: pytest.fail(f"ran {command}"))
        assert watcher.accounted_state("999999") == ""
    finally:
        watcher.close()


@pytest.mark.usefixtures("cluster")
class TestSlurmBackend(BackendSuite):
    backend = "slurm"


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_a_grid_with_pruning_streams_one_row_per_job_on_slurms_gpus(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Two at a time (array_parallelism=2), a GPU each (gpus_per_node=1 on the cluster's 2
    simulated ones): 8 and 7 complete, the later ones are pruned; each job's
    CUDA_VISIBLE_DEVICES is SLURM's choice, and its row says where it ran."""
    done = runner.run(
        runner.probe_sweep(
            marks,
            "x=8,7,6,5,4",
            "steps=6",
            "step_s=0.3",
            *SLURM,
            "hydra.launcher.slurm.array_parallelism=2",
            "hydra.launcher.slurm.gpus_per_node=1",
            "hydra.launcher.prune=median",
            "hydra.launcher.prune_warmup=1",
        )
    )
    assert done.returncode == 0, done.stdout
    rows = results(tmp_path).set_index("x")
    assert len(rows) == 5
    assert set(rows.loc[[8, 7], "status"]) == {"completed"}
    assert set(rows.loc[[6, 5, 4], "status"]) == {"pruned"}, rows
    seen = {r["num"]: r["cuda"] for r in read_records(marks)}
    assert set(seen.values()) <= {"0", "1"} and len(seen) == 5, seen
    for num, device in zip(rows["job"], rows["device"], strict=True):
        assert device.startswith(f"{seen[num]}@")  # its GPU, @ node / SLURM job id
    # No accounting here (no slurmdbd): submitit's watcher would warn on every poll.
    assert "sacct" not in done.stdout


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_a_search_with_pruning_finds_the_local_backends_best(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    search = [
        "hydra/sweeper=hpsearch",
        "hydra.sweeper.direction=maximize",
        "x=range(0,100)",
        "hydra.sweeper.sampler.seed=2",
        "hydra.sweeper.n_trials=6",
        "hydra.sweeper.pruner=median",
        "+hydra.sweeper.pruner_args.n_startup_trials=2",
        "steps=3",
        "step_s=0.2",
    ]
    best = {}
    for backend in ("local", "slurm"):
        sweep = f"hydra.sweep.dir=sweep-{backend}"
        done = runner.run(
            runner.probe_sweep(marks, *search, f"hydra.launcher.backend={backend}", sweep)
        )
        assert done.returncode == 0, done.stdout
        rows = pd.read_csv(tmp_path / f"sweep-{backend}" / "results.csv")
        assert len(rows) == 6 and set(rows["status"]) <= {"completed", "pruned"}, rows
        best[backend] = rows.loc[rows["status"] == "completed", "objective"].max()
    assert best["slurm"] == best["local"]


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_out_of_memory_retries_wait_for_no_other_job(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Each job its own slot group: a job retried alone after running out of memory does not
    wait for the others to drain (SLURM gives each job its own allocation)."""
    done = runner.run(
        runner.probe_sweep(
            marks, "x=1,2", "mode=tf_oom_once", *SLURM, "hydra.launcher.slurm.array_parallelism=2"
        )
    )
    assert done.returncode == 0, done.stdout
    assert "2 at a time;" in done.stdout
    rows = results(tmp_path)
    assert list(rows["status"]) == ["completed"] * 2 and list(rows["attempts"]) == [2, 2]
    assert done.stdout.count("(alone, attempt 2)") == 2


def _job_ids() -> list[str]:
    return [line.split()[0] for line in queue()]


def _ledgers_queued(tmp_path: Path) -> list[str]:
    """The jobs the sweep dir's ledger lists that SLURM holds, not done (another suite's
    jobs on the same cluster do not count)."""
    ours = {entry.job_id for entry in Ledger(tmp_path / "sweep").earlier()}
    return [job_id for job_id in _job_ids() if job_id in ours]


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_a_job_cancelled_outside_the_sweep_fails_alone(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    (marks / "hold").touch()  # x=3 waits at its start until the test cancels it
    sweep = runner.popen(runner.probe_sweep(marks, "x=1,2,3", "hold_from=3", *SLURM))
    wait_until(lambda: (marks / "start-2").exists(), 60, "job 2 to start")
    # Where it runs, as the job wrote it at its start: cpu@<node>/<SLURM job id>.
    started = next((tmp_path / "sweep" / ".hpsearch-sweep.started").glob("*-2-1"))  # <run>-2-1
    subprocess.run(["scancel", started.read_text().rpartition("/")[2]], check=True)
    out, _ = sweep.communicate(timeout=60)
    rows = results(tmp_path).set_index("x")
    assert list(rows.loc[[1, 2], "status"]) == ["completed", "completed"], out
    assert rows.loc[3, "status"] == "failed"
    assert "cancelled outside the sweep (SLURM: CANCELLED, scancel)" in rows.loc[3, "error"]


@pytest.mark.slow
@pytest.mark.usefixtures("empty_queue")
def test_a_requeued_job_runs_again_as_its_second_attempt(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    (marks / "hold").touch()
    sweep = runner.popen(
        runner.probe_sweep(marks, "x=1", *SLURM, "hydra.launcher.slurm.max_num_timeout=1")
    )
    wait_until(lambda: (marks / "start-0").exists(), 60, "the job to start")
    subprocess.run(["scontrol", "requeue", *_job_ids()], check=True)
    (marks / "start-0").unlink()
    wait_until(lambda: (marks / "start-0").exists(), 60, "its second attempt to start")
    (marks / "hold").unlink()
    out, _ = sweep.communicate(timeout=60)
    assert sweep.returncode == 0, out
    row = results(tmp_path).iloc[0]
    assert (row["status"], row["attempts"]) == ("completed", 2), out
    assert "SLURM requeued it" in out


@pytest.mark.slow
@pytest.mark.usefixtures("empty_queue")
def test_ctrl_c_cancels_the_sweeps_jobs(runner: Runner, marks: Path, tmp_path: Path) -> None:
    sweep = runner.popen(runner.probe_sweep(marks, "x=1,2,3", "sleep=120", *SLURM))
    wait_until(lambda: len(list(marks.glob("start-*"))) == 3, 60, "3 jobs to start")
    sweep.send_signal(signal.SIGINT)
    out, _ = sweep.communicate(timeout=60)
    assert sweep.returncode != 0
    assert not queue(), out  # cancelled, and SLURM is done with them
    assert set(results(tmp_path)["status"]) == {"interrupted"}


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")  # its own jobs, told by the ledger
def test_after_kill_9_the_same_command_adopts_what_was_left(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Issue 48: `kill -9` of the sweep, then the same command: nothing submitted twice,
    nothing lost. x=1 ends before the kill (its row resumed), x=2 returns and x=3 fails
    while the sweep is dead (their ends adopted: neither runs again), x=4 still runs (waited
    on), x=5 was never submitted (submitted now)."""
    args = runner.probe_sweep(
        marks, "x=1,2,3,4,5", "gate=true", "fail_x=3", *SLURM,
        "hydra.launcher.slurm.array_parallelism=3", "hydra.launcher.max_retries=0",
    )  # fmt: skip
    sweep = runner.popen(args)  # each job waits, before it ends, for marks/go-<its num>
    wait_for(*(marks / f"start-{num}" for num in range(3)))
    (marks / "go-0").touch()
    wait_for(marks / "start-3")  # x=1 recorded, its slot given to x=4
    sweep.kill()
    sweep.communicate()
    (marks / "go-1").touch()
    (marks / "go-2").touch()
    wait_until(lambda: len(_ledgers_queued(tmp_path)) == 1, 60, "x=2 and x=3 to end")
    again = runner.popen(args)
    wait_for(marks / "start-4")  # x=5, submitted after x=4 was adopted
    ledger = (tmp_path / "sweep" / ".hpsearch-slurm-jobs").read_text().splitlines()
    for num in (3, 4):
        (marks / f"go-{num}").touch()
    out, _ = again.communicate(timeout=120)
    submitted = Counter(tuple(json.loads(line)["overrides"]) for line in ledger)
    assert sorted(submitted.values()) == [1] * 5, submitted  # each job's overrides once
    rows = results(tmp_path).set_index("x")
    assert dict(rows["status"]) == {
        1: "completed", 2: "completed", 3: "failed", 4: "completed", 5: "completed"
    }, out  # fmt: skip
    assert set(rows["attempts"]) == {1}, out
    assert "probe asked to raise" in rows.loc[3, "error"]
    assert sorted((marks / "starts.log").read_text().split()) == ["1", "2", "3", "4", "5"]
    folders = [d for d in (tmp_path / "sweep" / ".submitit").iterdir() if d.is_dir()]
    assert len(folders) == 5, out  # one sbatch per job, over both runs
    assert "adopted: SLURM job" in out and "cancelled" not in out
    ours = {json.loads(line)["job_id"] for line in ledger}
    wait_until(lambda: not ours & set(_job_ids()), 30, "SLURM to be done with the jobs")


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")  # its own jobs, told by the ledger
@pytest.mark.parametrize("storage", ["sqlite", "memory"])
def test_after_kill_9_a_search_adopts_its_running_trials(
    runner: Runner, marks: Path, tmp_path: Path, storage: str
) -> None:
    """Trial 0 ended, 1 and 2 run when the sweep is killed. A storage held them RUNNING: the
    rerun fails them and asks their values again; in memory the study died with the run, and
    the rerun (its sampler told trial 0, so drawing anew) asks first the trials it left in
    flight (their run dirs tell). Either way those jobs adopt the SLURM jobs still running,
    not run them again."""
    study = (
        [
            f"hydra.sweeper.storage=sqlite:///{tmp_path / 'study.db'}",
            "hydra.sweeper.study_name=probe",
        ]
        if storage == "sqlite"
        else []
    )
    args = runner.probe_sweep(
        marks, "hydra/sweeper=hpsearch", "hydra.sweeper.direction=maximize", "x=range(0,100)",
        "hydra.sweeper.sampler.seed=2", "hydra.sweeper.n_trials=3", *study, "gate=true", *SLURM,
        "hydra.launcher.slurm.array_parallelism=2",
    )  # fmt: skip
    sweep = runner.popen(args)  # each job waits, before it ends, for marks/go-<its num>
    wait_for(marks / "start-0", marks / "start-1")
    (marks / "go-0").touch()
    wait_for(marks / "start-2")  # trial 0 recorded, its slot given to trial 2
    sweep.kill()
    sweep.communicate()
    again = runner.popen(args)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(again.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: sum("adopted: SLURM job" in ln for ln in lines) == 2, 60, "adoption")
    finally:  # the jobs wait for their gates: opened whatever happened, nothing left behind
        for num in range(1, 5):
            (marks / f"go-{num}").touch()
        again.wait(timeout=120)
    reader.join(timeout=10)
    out = "".join(lines)
    assert again.returncode == 0, out
    rows = results(tmp_path)
    assert list(rows["status"]) == ["completed"] * 3 and set(rows["attempts"]) == {1}, out
    assert len((marks / "starts.log").read_text().split()) == 3  # each trial's job ran once
    assert len([d for d in (tmp_path / "sweep" / ".submitit").iterdir() if d.is_dir()]) == 3


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")  # its own jobs, told by the ledger
@pytest.mark.parametrize(
    ("rerun", "why"),
    [
        (("x=7,8",), "no job of this run has their config and overrides"),
        (("x=1,2", "hydra.launcher.resume=false"), "resume=false: their jobs run again"),
    ],
)
def test_after_kill_9_a_run_of_other_jobs_cancels_what_was_left(
    runner: Runner, marks: Path, tmp_path: Path, rerun: tuple[str, ...], why: str
) -> None:
    (marks / "hold").touch()  # every job waits at its start
    sweep = runner.popen(runner.probe_sweep(marks, "x=1,2", *SLURM))
    wait_until(lambda: len(list(marks.glob("start-*"))) == 2, 60, "2 jobs to start")
    sweep.kill()
    sweep.communicate()
    left = _ledgers_queued(tmp_path)
    assert len(left) == 2  # SIGKILL: nobody cancelled them
    again = runner.popen(runner.probe_sweep(marks, *rerun, *SLURM))
    wait_until(lambda: not set(left) & set(_job_ids()), 60, "the left jobs to be cancelled")
    (marks / "hold").unlink()
    out, _ = again.communicate(timeout=60)
    assert again.returncode == 0, out
    assert (
        f"cancelled 2 SLURM jobs an earlier run of this sweep left running (it was killed): {why}"
        in out
    )
    assert list(results(tmp_path)["status"]) == ["completed", "completed"], out


@pytest.mark.usefixtures("cluster")
def test_a_ledger_entry_slurm_no_longer_knows_is_adoptable_only_with_its_result(
    tmp_path: Path,
) -> None:
    from hpsearch_launcher.execute.slurm import watcher as module

    result = tmp_path / "999998_0_result.pkl"
    result.write_bytes(b"")
    gone, ended = (_entry(job_id, str(tmp_path / "none.pkl")) for job_id in ("999999", "999998"))
    ended = dataclasses.replace(ended, result=str(result))
    watcher = module.Watcher()
    try:
        adoptions = Adoptions([gone, ended], watcher.known)
    finally:
        watcher.close()
    assert adoptions.left == [ended]  # the other's job is submitted again
