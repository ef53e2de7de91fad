"""warm_start=fork: each job's process forked from one server per sweep, still a fresh process
per job in every promise; and where forking is unsafe, back to spawned spares with one warning.

The sweep holds its jobs while the server imports (a cold process would import it all again), so
every job of a sweep whose server is safe is forked, the first round too, on a machine of any
speed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pandas as pd
import psutil
import pytest
from conftest import (
    Runner,
    processes_tagged,
    read_records,
    role,
    roles,
    simulated_gpus_env,
    wait_for,
    wait_for_roles,
    wait_no_tagged,
    wait_until,
)

from hpsearch_launcher.execute.job.wire import MESSAGE_MAX
from hpsearch_launcher.execute.local import fork_client as forked_module
from hpsearch_launcher.execute.local.fork_child import apply_env
from hpsearch_launcher.execute.local.fork_client import ForkRefused, ForkServer
from hpsearch_launcher.execute.local.spare import Spare

FORK = "hydra.launcher.warm_start=fork"
PRELOAD = "hydra.launcher.preload=[preload_marker]"
NOT_FORKING = "hpsearch: warm_start=fork: not forking: "
# The sweep logs the server's thread count (debug) once it has heard its `ready`.
VERBOSE = "hydra.verbose=hpsearch.launcher"
SERVER_READY = "hpsearch: the fork server has "
ONE_SLOT = ("hydra.launcher.n_jobs=1", "hydra.launcher.gpus=[]")

pytestmark = pytest.mark.slow


class ForkSweep:
    """A probe sweep with warm_start=fork, its output read as it comes (a thread)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def finish(self, timeout: float = 180) -> str:
        """Wait for its end; what it printed."""
        try:
            self.proc.wait(timeout=timeout)
            self._reader.join(timeout=30)
        finally:
            self.proc.kill()
        return "".join(self.lines)


def start_fork_sweep(
    runner: Runner,
    marks: Path,
    *args: str,
    env: dict[str, str] | None = None,
    preload: tuple[str, ...] = (PRELOAD,),
) -> ForkSweep:
    """A probe sweep with warm_start=fork, its server importing `preload_marker` (50 ms)
    unless `preload` says otherwise (none: `preload: auto` learns)."""
    return ForkSweep(
        runner.popen(
            runner.probe_sweep(marks, *preload, FORK, VERBOSE, *args),
            env=simulated_gpus_env({"PROBE_MARKS": str(marks), **(env or {})}),
        )
    )


def fork_sweep(
    runner: Runner, marks: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """start_fork_sweep, run to its end: the sweep, and what it printed."""
    sweep = start_fork_sweep(runner, marks, *args, env=env)
    out = sweep.finish()
    return sweep.proc, out


def forked(records: list[dict], sweep: subprocess.Popen[str]) -> list[dict]:
    """The records of jobs whose process the server forked (its parent is not the sweep)."""
    return [r for r in records if r["ppid"] != sweep.pid]


def test_forked_jobs_get_fresh_processes_with_their_slots_environment(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    sweep, out = fork_sweep(
        runner,
        marks,
        f"x={','.join(map(str, range(8)))}",
        "sleep=0.3",
        "hydra.launcher.gpus=[0,1]",
        "hydra.launcher.jobs_per_gpu=2",
    )
    assert sweep.returncode == 0, out
    assert NOT_FORKING not in out
    records = read_records(marks)
    assert len({r["pid"] for r in records}) == 8  # one process per job, never reused
    assert all(r["sid"] == r["pgid"] == r["pid"] for r in records)  # its own session and group
    assert all(r["watchdog"] for r in records)  # each ends with the server (or the sweep)
    later = forked(records, sweep)
    assert len(later) == 8, out  # every job forked, the first round too (it waited for it)
    assert len({r["ppid"] for r in later}) == 1  # by one server
    assert out.count(SERVER_READY) == 1, out  # heard once: then it forked every job
    for r in records:  # each job's environment is its slot's, set in the child
        assert (r["cuda"], r["fraction"], r["jax_fraction"]) in {
            ("0", "0.45", "0.45"),
            ("1", "0.45", "0.45"),
        }
    assert {r["cuda"] for r in later} == {"0", "1"}  # one server serves every GPU
    assert all(r["preloaded_at"] is not None and r["preloaded_at"] < r["start"] for r in later)
    for r in records:  # no input, and nothing of the server's held open: a spawned job's two
        logs = f"{tmp_path / 'sweep'}/x={r['x']}/"  # (stdin, its status pipe) and its logs
        assert r["stdin_eof"], r
        assert len([f for f in r["fds"] if not f.startswith(logs)]) == 2, r
    for r in later:  # its own run dir, stdout and stderr
        run_dir = tmp_path / "sweep" / f"x={r['x']}"
        assert (run_dir / "stdout.log").read_text() == f"probe job {r['num']} stdout\n"
        assert f"probe job {r['num']} stderr\n" in (run_dir / "stderr.log").read_text()
    for gpu in ("0", "1"):  # 2 jobs per GPU at once, never more
        spans = [(r["start"], r["end"]) for r in records if r["cuda"] == gpu]
        for start, _ in spans:
            assert sum(s <= start < e for s, e in spans) <= 2


def test_a_freed_slots_job_takes_a_process_forked_while_the_slot_was_busy(
    runner: Runner, marks: Path
) -> None:
    """One slot, jobs of 2 s: each later job's process had been made long before its task
    began (forked ahead, it waited while the job before it ran), yet it is that job's own
    fresh process in every way the first test asks."""
    sweep, out = fork_sweep(runner, marks, "x=0,1,2,3", "sleep=2", *ONE_SLOT)
    assert sweep.returncode == 0, out
    records = sorted(read_records(marks), key=lambda r: r["num"])
    assert len({r["pid"] for r in records}) == 4 and len(forked(records, sweep)) == 4
    for r in records[1:]:
        assert r["age"] > 1.0, r  # a process forked for its job would be milliseconds old
        assert r["sid"] == r["pgid"] == r["pid"] and r["watchdog"]
        assert r["stdin_eof"] and len([f for f in r["fds"] if "x=" not in f]) == 2
    assert roles(processes_tagged(runner.tag))["spare"] == 0  # none outlives the sweep


def test_a_process_forked_ahead_that_dies_while_waiting_is_replaced(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    (marks / "hold").touch()
    sweep = start_fork_sweep(runner, marks, "x=0,1,2", *ONE_SLOT)
    try:
        killed = _forked_ahead(runner.tag, marks).pid
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: _forked_ahead(runner.tag, marks).pid != killed, 30, "its replacement")
        (marks / "hold").unlink()
        out = sweep.finish()
    finally:
        sweep.proc.kill()
    assert sweep.proc.returncode == 0, out
    assert NOT_FORKING not in out  # nothing the sweep had to know of
    records = read_records(marks)
    assert len(records) == 3 and killed not in {r["pid"] for r in records}
    assert set(pd.read_csv(tmp_path / "sweep" / "results.csv")["status"]) == {"completed"}


def test_a_process_forked_ahead_of_a_learned_module_is_dismissed_not_given_a_job(
    runner: Runner, marks: Path
) -> None:
    """preload: auto learns at job 0's end that the task imports the marker: the process forked
    ahead before that lacks it, so it ends, and jobs from the third on get the marker imported
    ahead. While job 2 is held, the one process waiting is the one forked since."""
    (marks / "hold").touch()
    args = ("x=0,1,2,3", "imports=[preload_marker]", "hold_from=2", *ONE_SLOT)
    sweep = start_fork_sweep(runner, marks, *args, preload=())
    try:
        wait_for(marks / "start-2")
        waiting = _forked_ahead(runner.tag, marks)
        time.sleep(1)  # a dismissed one that lingered would still be here
        assert [p.pid for p in processes_tagged(runner.tag) if role(p) == "spare"] == [waiting.pid]
        (marks / "hold").unlink()
        out = sweep.finish()
    finally:
        sweep.proc.kill()
    assert sweep.proc.returncode == 0, out
    records = sorted(read_records(marks), key=lambda r: r["num"])
    assert records[0]["preloaded_at"] is None  # what taught the sweep
    assert all(r["preloaded_at"] is not None for r in records[2:]), records


def _forked_ahead(tag: str, marks: Path) -> psutil.Process:
    """The one process the sweep's fork server keeps forked ahead (waits until there is one),
    once job 0 has started: before that, job 0's own forked process is briefly one too (until
    it calls setsid), and a test that killed it would kill a job, not a waiting process."""
    wait_for(marks / "start-0")
    found: list[psutil.Process] = []

    def seen() -> bool:
        found[:] = [p for p in processes_tagged(tag) if role(p) == "spare"]
        return bool(found)

    wait_until(seen, 30, "a process forked ahead")
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("raise", "ValueError: probe asked to raise"),
        ("exit", "exited with status 3"),
        ("segfault", "killed by SIGSEGV (segmentation fault)"),
    ],
)
def test_a_forked_jobs_failure_reads_as_a_spawned_jobs(
    runner: Runner, marks: Path, tmp_path: Path, mode: str, reason: str
) -> None:
    """Its exit status (or signal) comes back through the server as through Popen."""
    sweep, out = fork_sweep(
        runner,
        marks,
        "x=0,1,2",
        f"mode={mode}",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.gpus=[]",
    )
    assert sweep.returncode == 1, out
    assert int((marks / "start-2").read_text()) != sweep.pid, out  # job 2 was forked
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv", keep_default_na=False)
    assert list(rows["status"]) == ["failed"] * 3
    assert all(reason in e for e in rows["error"]), rows["error"]


@pytest.mark.parametrize(
    ("at_import", "why"),
    [
        ("thread", "the task's module started threads at import (probe-import-thread)"),
        ("gpu", "it holds a CUDA context (NVML lists it on a GPU)"),
    ],
)
def test_a_server_unsafe_to_fork_falls_back_to_spawning_with_one_warning(
    runner: Runner, marks: Path, tmp_path: Path, at_import: str, why: str
) -> None:
    memory = tmp_path / "gpu-memory"
    memory.mkdir()
    sweep, out = fork_sweep(
        runner,
        marks,
        "x=0,1,2,3,4,5",
        "sleep=0.3",
        "hydra.launcher.gpus=[0]",
        "hydra.launcher.jobs_per_gpu=2",
        env={"PROBE_AT_IMPORT": at_import, "HPS_FAKE_GPU_MEMORY": str(memory)},
    )
    assert sweep.returncode == 0, out
    assert out.count(NOT_FORKING) == 1, out
    assert f"{NOT_FORKING}{why}; the sweep goes on with spawned spares" in out
    records = read_records(marks)
    assert len(records) == 6 and forked(records, sweep) == []


def test_a_forked_process_that_hangs_before_it_starts_is_killed_and_the_sweep_completes(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    sweep, out = fork_sweep(
        runner,
        marks,
        "x=0,1,2,3",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.gpus=[]",
        env={"PROBE_AT_IMPORT": "hang_at_fork", "HPSEARCH_FORK_READY_TIMEOUT": "2"},
    )
    assert sweep.returncode == 0, out
    assert out.count(NOT_FORKING) == 1, out
    assert "had not started its job 2 s after its fork (HPSEARCH_FORK_READY_TIMEOUT)" in out
    records = read_records(marks)
    assert sorted(r["x"] for r in records) == [0, 1, 2, 3]  # each job once, none forked
    assert forked(records, sweep) == []
    assert set(pd.read_csv(tmp_path / "sweep" / "results.csv")["status"]) == {"completed"}


def test_a_task_module_whose_import_hangs_holds_jobs_only_so_long_and_the_sweep_ends(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Jobs wait for the server while it imports the task's module, but not past
    HPSEARCH_PRELOAD_TIMEOUT: then the sweep falls back, the jobs' cold processes hang in the
    same import, and hydra.launcher.timeout ends them, as it would have without a server."""
    sweep, out = fork_sweep(
        runner,
        marks,
        "x=0,1",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.gpus=[]",
        "hydra.launcher.timeout=2",
        env={"PROBE_AT_IMPORT": "hang", "HPSEARCH_PRELOAD_TIMEOUT": "2"},
    )
    assert sweep.returncode == 1, out
    assert out.count(NOT_FORKING) == 1, out
    assert "had not imported the task's module 2 s after it started" in out
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert list(rows["status"]) == ["timeout", "timeout"]


def test_forked_jobs_draw_fresh_numbers_and_a_seed_gives_what_it_gives_spawned(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """NumPy's global generator, imported ahead in the server (`numpy.random`: NumPy 2 loads it
    only when first used), is not shared by its children; a job that seeds itself draws what a
    spawned job with that seed draws."""
    numpy = ("imports=[numpy]", "hydra.launcher.preload=[numpy.random,preload_marker]")
    sweep, out = fork_sweep(
        runner, marks, "x=0,1,2,3,4,5", "hydra.launcher.n_jobs=2", "hydra.launcher.gpus=[]", *numpy
    )
    assert sweep.returncode == 0, out
    unseeded = forked(read_records(marks), sweep)
    assert len(unseeded) == 6, out
    for which in (0, 1):  # Python's random, NumPy's
        assert len({r["draws"][which] for r in unseeded}) == 6

    (marks / "records.jsonl").unlink()
    seeded = [
        "x=0,1,2,3,4,5",
        "seed=7",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.gpus=[]",
        "hydra.sweep.dir=seeded",
    ]
    sweep, out = fork_sweep(runner, marks, *seeded, *numpy)
    assert sweep.returncode == 0, out
    records = read_records(marks)
    assert len(forked(records, sweep)) == 6, out
    (marks / "records.jsonl").unlink()
    spawned = runner.run(
        runner.probe_sweep(marks, "x=0", "seed=7", "hydra.sweep.dir=spawned", *numpy[:1])
    )
    assert spawned.returncode == 0, spawned.stdout
    (alone,) = read_records(marks)
    assert {tuple(r["draws"]) for r in records} == {tuple(alone["draws"])}


@pytest.mark.parametrize(
    ("sig", "exit_code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)],
)
def test_stopping_the_sweep_ends_forked_job_trees_and_the_server(
    runner: Runner, marks: Path, sig: signal.Signals, exit_code: int
) -> None:
    """Two forked jobs: one hangs with a grandchild, one ignores SIGTERM. Nothing outlives the
    sweep (the runner fixture checks every tagged process is gone)."""
    args = (
        "x=0,1,2,3",
        "hang_x=2",
        "trap_x=3",
        "hydra.launcher.n_jobs=2",
        "hydra.launcher.gpus=[]",
    )
    sweep = start_fork_sweep(runner, marks, *args)
    try:
        deadline = time.monotonic() + 60
        while not ((marks / "start-2").exists() and (marks / "start-3").exists()):
            assert time.monotonic() < deadline, "jobs 2 and 3 never started"
            time.sleep(0.05)
        assert all(int((marks / f"start-{n}").read_text()) != sweep.proc.pid for n in (2, 3))
        wanted = {"job": 2, "spare": 0, "grandchild": 1, "server": 1}
        assert wait_for_roles(runner.tag, wanted, within=60) == wanted
        sweep.proc.send_signal(sig)
        out = sweep.finish(timeout=60)
    finally:
        sweep.proc.kill()
    assert sweep.proc.returncode == exit_code, out
    assert wait_no_tagged(runner.tag, within=10) == []  # within 10 s, nothing is orphaned


def test_a_forked_job_past_its_timeout_is_ended_with_its_tree(
    runner: Runner, marks: Path, tmp_path: Path, cold_start_s: float
) -> None:
    timeout = max(2, round(6 * cold_start_s))
    args = ("x=0,1,2", "hang_x=2", f"hydra.launcher.timeout={timeout}", "hydra.launcher.gpus=[]")
    sweep, out = fork_sweep(runner, marks, *args, "hydra.launcher.n_jobs=2")
    assert sweep.returncode == 1, out
    assert int((marks / "start-2").read_text()) != sweep.pid, out  # job 2 was forked
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv").set_index("x")
    assert list(rows["status"]) == ["completed", "completed", "timeout"]


def test_a_server_killed_mid_sweep_falls_back_and_every_job_completes(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    """Its forked jobs go on, adopted by the sweep (their subreaper), and each is recorded
    once, as it ended: not run again, never taken for out of memory."""
    args = ("x=0,1,2,3,4,5", "sleep=1", "hydra.launcher.n_jobs=2", "hydra.launcher.gpus=[]")
    sweep = start_fork_sweep(runner, marks, *args)
    try:
        deadline = time.monotonic() + 60
        while not (marks / "start-2").exists():
            assert time.monotonic() < deadline, "job 2 never started"
            time.sleep(0.05)
        (server,) = [p for p in processes_tagged(runner.tag) if role(p) == "server"]
        server.kill()
        out = sweep.finish(timeout=120)
    finally:
        sweep.proc.kill()
    assert sweep.proc.returncode == 0, out
    assert out.count(NOT_FORKING) == 1, out
    assert f"{NOT_FORKING}the fork server ended (-9)" in out
    rows = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert sorted(rows["x"]) == list(range(6)) and set(rows["status"]) == {"completed"}
    assert set(rows["attempts"]) == {1} and "memory" not in out, out
    assert len((marks / "starts.log").read_text().split()) == 6  # none ran twice


def test_a_forked_job_loses_the_servers_variables_its_slot_does_not_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server was spawned with its first slot's environment: a job on a slot without one of
    those variables (a CPU slot, a whole-GPU retry without a cap) must not inherit it."""
    monkeypatch.setenv("HPSEARCH_GPU_MEMORY_LIMIT_MB", "4096")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    apply_env({"CUDA_VISIBLE_DEVICES": "1"}, ["HPSEARCH_GPU_MEMORY_LIMIT_MB"])
    assert "HPSEARCH_GPU_MEMORY_LIMIT_MB" not in os.environ
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def answering(theirs: socket.socket, *replies: Callable[[int], list[dict]]) -> threading.Thread:
    """A stand-in for the server's side of the control socket: for each fork asked, in turn,
    the messages `replies[i](id)` (after the delay a reply may take, sleep keys)."""

    def serve() -> None:
        for reply in replies:
            data, fds, _, _ = socket.recv_fds(theirs, MESSAGE_MAX, 1)
            for fd in fds:
                os.close(fd)
            for message in reply(json.loads(data)["id"]):
                time.sleep(message.pop("sleep", 0))
                theirs.send(json.dumps(message).encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def stand_in_server(*replies: Callable[[int], list[dict]]) -> Iterator[ForkServer]:
    """The sweep's ForkServer, its control socket answered by `answering(replies)`."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # A server process that is never stopped: this one.
    spare = cast(Spare, SimpleNamespace(proc=SimpleNamespace(pid=os.getpid())))
    server = ForkServer(spare, ours, {}, lambda pid: None, lambda pid: None)
    answering(theirs, *replies)
    try:
        yield server
    finally:
        theirs.close()
        server._reader.join(timeout=10)


def forked_then_ended(code: int) -> Callable[[int], list[dict]]:
    """A reply: the fork done (a made-up pid), and that child's end with `code`."""
    return lambda n: [
        {"op": "forked", "id": n, "pid": 10**6 + n},
        {"op": "exited", "pid": 10**6 + n, "code": code},
    ]


def fork_to_its_end(server: ForkServer) -> int:
    """Fork a job; the exit code its process is seen to end with."""
    child, read_end = server.fork("job.pkl", {})
    os.close(read_end)
    return child.wait(timeout=10)


def test_a_forked_job_that_ends_before_fork_returns_is_still_seen_to_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's `exited` read before fork() has taken its answer (its thread descheduled
    on a loaded machine, as the fork soak saw): the process fork() returns is the one that
    ended (the sweep once waited on a new one forever)."""

    class LateTaken(Future):  # type: ignore[type-arg]
        def result(self, timeout: float | None = None) -> object:
            answer = super().result(timeout)
            time.sleep(0.2)  # the reader meanwhile reads the child's end
            return answer

    monkeypatch.setattr(forked_module, "Future", LateTaken)
    with stand_in_server(forked_then_ended(3)) as server:
        assert fork_to_its_end(server) == 3


def test_a_fork_answered_after_the_sweep_gave_up_is_killed_not_run_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fork() gives up after FORK_ANSWER_S (the job then runs cold): a child forked after that
    must not run the job a second time."""
    monkeypatch.setattr(forked_module, "FORK_ANSWER_S", 0.2)
    late = subprocess.Popen(["sleep", "60"], start_new_session=True)  # the late child
    try:
        reply = [{"op": "forked", "id": 1, "pid": late.pid, "sleep": 1.0}]
        with stand_in_server(lambda n: reply) as server:
            with pytest.raises(ForkRefused, match=r"did not answer within 0\.2 s"):
                server.fork("job.pkl", {})
            assert late.wait(timeout=10) == -signal.SIGKILL
    finally:
        late.kill()


def test_a_refusal_after_the_sweep_gave_up_leaves_the_server_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `refused` read for a fork that fork() gave up on is dropped: the reader goes on, and
    the next fork is answered (a late refusal once ended the reader)."""
    monkeypatch.setattr(forked_module, "FORK_ANSWER_S", 0.2)
    late_refusal = [{"op": "refused", "id": 1, "why": "late", "sleep": 1.0}]
    with stand_in_server(lambda n: late_refusal, forked_then_ended(0)) as server:
        with pytest.raises(ForkRefused, match=r"did not answer within 0\.2 s"):
            server.fork("job.pkl", {})
        # The late refusal is sent, so read, before the next fork's answer.
        monkeypatch.setattr(forked_module, "FORK_ANSWER_S", 30.0)
        assert fork_to_its_end(server) == 0
