"""One sweep per sweep dir: the lock module against other processes, then two real sweeps into
one dir, and a SIGKILLed sweep's dir taken by the next run."""

from __future__ import annotations

import errno
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest
from conftest import Runner, wait_no_tagged

from hpsearch_launcher.record import lock as lock_module
from hpsearch_launcher.record.lock import LOCK_FILE, Holder, SweepDirLocked, hold_sweep_dir

HOST = socket.gethostname()

# A process that takes the sweep dir in argv[1], says so, and holds it until stdin closes;
# one that cannot take it prints the refusal and exits 2.
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hpsearch_launcher.record.lock import SweepDirLocked, hold_sweep_dir
    try:
        lock = hold_sweep_dir(Path(sys.argv[1]))
    except SweepDirLocked as err:
        print(err, flush=True)
        sys.exit(2)
    print("held", flush=True)
    sys.stdin.read()
    """
)


class Holders:
    """Processes started by a test, each ended when it is done."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, sweep_dir: Path) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(sweep_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def take(self, sweep_dir: Path) -> subprocess.Popen[str]:
        """A process that holds the dir (or the test fails)."""
        proc = self.start(sweep_dir)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "held\n"
        return proc

    def refusal(self, sweep_dir: Path) -> str | None:
        """What a process that tries to take the dir prints; None if it took it."""
        proc = self.start(sweep_dir)
        out, _ = proc.communicate(input="", timeout=60)
        return None if proc.returncode == 0 else out

    def sleeper(self) -> psutil.Process:
        """A live process of this host that holds nothing."""
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], text=True)
        self.procs.append(proc)
        return psutil.Process(proc.pid)

    def end(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.communicate()


@pytest.fixture
def holders() -> Iterator[Holders]:
    h = Holders()
    yield h
    h.end()


def write_holder(sweep_dir: Path, pid: int, host: str, started: float, heartbeat: float) -> None:
    line = {"pid": pid, "host": host, "started": started, "heartbeat": heartbeat}
    (sweep_dir / LOCK_FILE).write_text(json.dumps(line) + "\n")


def written(sweep_dir: Path) -> Holder | None:
    return Holder.parse((sweep_dir / LOCK_FILE).read_text())


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path, holders: Holders) -> None:
    first = holders.take(tmp_path)
    with pytest.raises(SweepDirLocked) as refused:
        hold_sweep_dir(tmp_path)
    message = str(refused.value)
    assert f"sweep dir {tmp_path} is in use: pid {first.pid} on host {HOST}" in message
    assert f"stop it (kill {first.pid} on {HOST})" in message
    assert "another hydra.sweep.dir" in message and "\n" not in message
    assert (written(tmp_path) or pytest.fail("no holder written")).pid == first.pid


def test_the_flock_alone_keeps_a_second_sweep_out(
    tmp_path: Path, holders: Holders, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with its file emptied (or not yet written) the holder's flock refuses the next."""
    monkeypatch.setattr(lock_module, "NAMED_WITHIN_S", 0.3)
    holders.take(tmp_path)
    (tmp_path / LOCK_FILE).write_text("")
    with pytest.raises(SweepDirLocked, match=r"another sweep holds it \(it has not written"):
        hold_sweep_dir(tmp_path)


def test_a_refusal_waits_for_the_holder_to_name_itself(tmp_path: Path, holders: Holders) -> None:
    """Met between the holder's flock and its line (the CI saw it once), the refusal still
    names the pid: the line is waited for."""
    first = holders.take(tmp_path)
    (tmp_path / LOCK_FILE).write_text("")
    line = {"pid": first.pid, "host": HOST, "started": time.time(), "heartbeat": time.time()}
    writer = threading.Timer(0.5, lambda: (tmp_path / LOCK_FILE).write_text(json.dumps(line)))
    writer.start()
    try:
        with pytest.raises(SweepDirLocked, match=f"is in use: pid {first.pid} on host {HOST}"):
            hold_sweep_dir(tmp_path)
    finally:
        writer.join()


def test_released_on_close_and_when_no_one_keeps_it(tmp_path: Path, holders: Holders) -> None:
    lock = hold_sweep_dir(tmp_path)
    assert hold_sweep_dir(tmp_path) is lock  # the same process takes its dir again
    assert (written(tmp_path) or pytest.fail("no holder written")).pid == os.getpid()
    assert f"pid {os.getpid()} on host {HOST}" in (holders.refusal(tmp_path) or "")
    lock.close()
    assert not (tmp_path / LOCK_FILE).exists()  # removed: no empty file left behind
    assert holders.refusal(tmp_path) is None

    kept = hold_sweep_dir(tmp_path)
    assert holders.refusal(tmp_path) is not None
    del kept
    gc.collect()
    assert holders.refusal(tmp_path) is None


def test_a_taker_whose_file_its_holder_removed_opens_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder lets go, removing the file, between a taker's open and its flock (and a
    third made the file anew): the taker's flock on the removed file keeps no one out, so it
    opens the file at the path again, and its line is in that one."""
    real = lock_module._flock
    opened: list[int] = []

    def flock_after_the_holder_let_go(fd: int, path: Path) -> bool | None:
        if not opened:
            path.unlink()
            path.write_text("")
        opened.append(fd)
        return real(fd, path)

    (tmp_path / LOCK_FILE).write_text("")
    monkeypatch.setattr(lock_module, "_flock", flock_after_the_holder_let_go)
    lock = hold_sweep_dir(tmp_path)
    assert len(opened) == 2
    assert (written(tmp_path) or pytest.fail("its line is not at the path")).pid == os.getpid()
    lock.close()


def test_a_sigkilled_holder_leaves_no_block(tmp_path: Path, holders: Holders) -> None:
    killed = holders.take(tmp_path)
    killed.kill()
    killed.wait()
    assert (written(tmp_path) or pytest.fail("no holder written")).pid == killed.pid  # left
    lock = hold_sweep_dir(tmp_path)
    assert (written(tmp_path) or pytest.fail("no holder written")).pid == os.getpid()
    lock.close()


# What a lock file can say when flock itself is free (as where a network filesystem does not
# share flock between clients): whether it still keeps a second sweep out.
HOLDER_LINES: list[tuple[str, Callable[[Holders], tuple[int, str, float, float]], bool]] = [
    (
        "a dead pid of this host",
        lambda h: (_dead_pid(h), HOST, time.time() - 5, time.time()),
        False,
    ),
    (
        "a live pid, reused",
        lambda h: (h.sleeper().pid, HOST, time.time() - 3600, time.time()),
        False,
    ),
    ("a live process of this host", lambda h: _live(h.sleeper()), True),
    ("another host, heard from lately", lambda h: (1, "elsewhere", 0.0, time.time() - 5), True),
    ("another host, not for minutes", lambda h: (1, "elsewhere", 0.0, time.time() - 600), False),
]


def _dead_pid(holders: Holders) -> int:
    proc = holders.sleeper()
    proc.kill()
    proc.wait()
    return proc.pid


def _live(proc: psutil.Process) -> tuple[int, str, float, float]:
    return proc.pid, HOST, proc.create_time(), time.time() - 600  # pid decides, not heartbeat


@pytest.mark.parametrize("no_flock", [False, True], ids=["flock", "no-flock"])
@pytest.mark.parametrize(("what", "line", "blocks"), HOLDER_LINES, ids=[c[0] for c in HOLDER_LINES])
def test_the_written_holder_without_flock(
    tmp_path: Path,
    holders: Holders,
    monkeypatch: pytest.MonkeyPatch,
    what: str,
    line: Callable[[Holders], tuple[int, str, float, float]],
    blocks: bool,
    no_flock: bool,
) -> None:
    if no_flock:  # a filesystem without locks: only the written holder counts

        def no_locks(fd: int, op: int) -> None:
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

        monkeypatch.setattr(lock_module.fcntl, "flock", no_locks)
    pid, host, started, heartbeat = line(holders)
    write_holder(tmp_path, pid, host, started, heartbeat)
    if not blocks:
        hold_sweep_dir(tmp_path).close()
        return
    with pytest.raises(SweepDirLocked) as refused:
        hold_sweep_dir(tmp_path)
    assert f"pid {pid} on host {host}" in str(refused.value)
    if host != HOST:
        assert "heartbeat is 5 s old: if elsewhere is down, the dir is free once it is 60 s" in (
            str(refused.value)
        )


def test_the_holder_refreshes_its_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_module, "HEARTBEAT_S", 0.05)
    lock = hold_sweep_dir(tmp_path)
    first = written(tmp_path) or pytest.fail("no holder written")
    deadline = time.monotonic() + 10
    while (now := written(tmp_path)) is None or now.heartbeat == first.heartbeat:
        assert time.monotonic() < deadline, "no heartbeat"
        time.sleep(0.02)
    assert now.pid == first.pid and now.started == first.started
    lock.close()


class Beats(threading.Event):
    """A stop event that notes how long the heartbeat waits each time; set after `beats`."""

    def __init__(self, beats: int) -> None:
        super().__init__()
        self.beats = beats
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return len(self.waits) > self.beats


def test_a_live_holder_beats_every_10_s_well_within_the_stale_age(tmp_path: Path) -> None:
    """docs/resume.md's promise: rewritten every 10 s, judged gone only at 60 s old, so a live
    sweep on another host is never taken for a dead one (a beat or more may be late)."""
    path = tmp_path / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    holder = Holder(os.getpid(), "elsewhere", 1.0, heartbeat=1.0)
    try:
        stop = Beats(2)
        lock_module._heartbeat(fd, holder, stop)
    finally:
        os.close(fd)
    assert stop.waits == [10.0, 10.0, 10.0]
    assert lock_module.STALE_AFTER_S > 10.0 * 5  # 5 beats may be missed
    now = Holder.parse(path.read_text())
    assert now is not None and now.heartbeat > holder.heartbeat and now.pid == holder.pid


# End to end: real sweeps of the probe app.


def started_xs(marks: Path) -> list[int]:
    path = marks / "starts.log"
    return sorted(int(x) for x in path.read_text().split()) if path.exists() else []


@pytest.mark.slow
def test_two_sweeps_into_one_dir_one_runs(runner: Runner, marks: Path, tmp_path: Path) -> None:
    """Both start at once; the winner's jobs wait (marks/hold) until the other has given up,
    so the other meets a live holder whichever one wins."""
    args = runner.probe_sweep(marks, "x=0,1,2,3", "hydra.launcher.n_jobs=2")
    (marks / "hold").touch()
    sweeps = [runner.popen(args), runner.popen(args)]
    deadline = time.monotonic() + 120
    while all(s.poll() is None for s in sweeps):
        assert time.monotonic() < deadline, "neither sweep was refused"
        time.sleep(0.1)
    loser = next(s for s in sweeps if s.poll() is not None)
    winner = next(s for s in sweeps if s is not loser)
    refused, _ = loser.communicate()
    (marks / "hold").unlink()
    out, _ = winner.communicate(timeout=120)
    assert winner.returncode == 0, out
    assert loser.returncode == 2, refused
    sweep_dir = tmp_path / "sweep"
    errors = [line for line in refused.splitlines() if line.startswith("hpsearch: error: ")]
    assert len(errors) == 1, refused
    assert errors[0].startswith(
        f"hpsearch: error: sweep dir {sweep_dir} is in use: pid {winner.pid} on host {HOST}, "
        "running since "
    ), errors
    assert errors[0].endswith(
        f"wait for that sweep to end, stop it (kill {winner.pid} on {HOST}), or run this one "
        "with another hydra.sweep.dir"
    ), errors
    assert "Traceback" not in refused and " jobs on " not in refused  # before any job
    assert started_xs(marks) == [0, 1, 2, 3]  # every job once: none from the refused sweep
    frame = pd.read_csv(sweep_dir / "results.csv")
    assert sorted(frame["x"]) == [0, 1, 2, 3] and frame["job"].is_unique
    assert set(frame["status"]) == {"completed"} and frame["run_dir"].is_unique
    assert not (sweep_dir / LOCK_FILE).exists()  # let go at the end, the file removed


@pytest.mark.slow
def test_a_sigkilled_sweeps_dir_is_taken_by_the_next(
    runner: Runner, marks: Path, tmp_path: Path
) -> None:
    args = runner.probe_sweep(marks, "x=0,1,2,3", "hold_from=2", "hydra.launcher.n_jobs=2")
    results = tmp_path / "sweep" / "results.csv"
    (marks / "hold").touch()
    sweep = runner.popen(args)
    deadline = time.monotonic() + 120
    while started_xs(marks) != [0, 1, 2, 3] or len(_rows(results)) < 2:
        assert time.monotonic() < deadline, "jobs 0 and 1 never finished, 2 and 3 never started"
        time.sleep(0.1)
    os.kill(sweep.pid, signal.SIGKILL)
    sweep.communicate(timeout=30)
    assert wait_no_tagged(runner.tag, within=10) == [], "the killed sweep's jobs outlived it"
    left = written(tmp_path / "sweep") or pytest.fail("the lock file names no holder")
    assert left.pid == sweep.pid  # the file stays: only the kernel's flock went with it

    (marks / "hold").unlink()
    again = runner.run(args)
    assert again.returncode == 0, again.stdout
    frame = pd.read_csv(results)
    live = frame[frame["status"] != "superseded"]
    assert dict(zip(live["x"], live["status"], strict=True)) == {
        0: "completed",
        1: "completed",
        2: "completed",
        3: "completed",
    }


def _rows(results: Path) -> list[dict[str, str]]:
    if not results.exists():
        return []
    frame = pd.read_csv(results)
    return frame[frame["status"] == "completed"].to_dict("records")
