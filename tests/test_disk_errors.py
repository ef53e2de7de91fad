"""The disk says no mid-sweep (full, read-only): the sweep stops in one line naming the file and
the error, with the command that resumes; no traceback, no process left, nothing recorded
lost; and that command, once the disk takes writes again, finishes the sweep without running
a recorded job again.

The sweep dir is a tmpfs (mounting needs root: elsewhere these skip). A filler file fills it;
a read-only bind mount of it on itself makes it read-only for every path opened from then on
(`mount -o remount,ro` is refused while a process holds a file open for writing there, as a
running sweep always does: its lock file)."""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import Runner, wait_no_tagged, wait_until

from hpsearch_launcher.disk_errors import CannotWrite, cannot_write
from hpsearch_launcher.record import journal
from hpsearch_launcher.record.journal import Journal


@pytest.mark.parametrize(
    ("err", "path"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/s/results.csv"), "/s/results.csv"),
        (OSError(errno.EROFS, "Read-only file system", "/s/x=1"), "/s/x=1"),
        (
            PermissionError(errno.EACCES, "Permission denied", "/s/.hpsearch-lock"),
            "/s/.hpsearch-lock",
        ),
        (OSError(errno.ENOSPC, "No space left on device"), None),  # names no file: not said so
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "/s/a"), None),
        (ValueError("a bug"), None),
    ],
)
def test_a_disk_error_naming_its_file_is_cannot_write(err: BaseException, path: str | None) -> None:
    found = cannot_write(err)
    assert (found and found.path) == path
    if found is not None:
        assert str(found).startswith(f"cannot write {path}: [Errno {err.errno}] ")  # type: ignore[attr-defined]


def test_an_append_the_disk_refuses_is_cut_off_and_the_next_starts_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "results.jsonl"
    record = Journal(path)
    record.append([{"job": "0", "status": "completed"}], [])
    kept = path.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(journal.os, "fsync", full)
        with pytest.raises(CannotWrite, match=f"cannot write {path}: \\[Errno 28\\] No space"):
            record.append([{"job": "1", "status": "completed"}], [])
    assert path.read_bytes() == kept  # the refused line is gone: nothing half-written stays
    record.append([{"job": "2", "status": "completed"}], [])
    record.close()
    assert list(Journal.read(path).rows) == [0, 2]


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs as the sweep dir, unmounted (every layer) after the test."""
    path = tmp_path / "sweep"
    path.mkdir()
    try:
        _mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path))
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or err
        pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): {detail}")
    try:
        yield path
    finally:
        while os.path.ismount(path):
            subprocess.run(["umount", str(path)], check=False)


def fill(sweep: Path) -> None:
    with open(sweep / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC


def make_room(sweep: Path) -> None:
    (sweep / "filler").unlink()


def read_only(sweep: Path) -> None:
    """A read-only bind mount of the sweep dir on itself. mount(8) binds, then makes the bind
    read-only: a file the running sweep opens for writing in between (it writes all the time)
    makes the second step fail (EBUSY). Then the rw bind it left is taken off, and again."""
    layers = _layers(sweep)
    for _ in range(50):
        try:
            _mount("--bind", "-o", "ro", str(sweep), str(sweep))
            return
        except subprocess.CalledProcessError:
            while _layers(sweep) > layers:
                subprocess.run(["umount", str(sweep)], check=False)
            time.sleep(0.02)
    raise AssertionError(f"{sweep}: no read-only bind mount in 50 tries")


def _layers(path: Path) -> int:
    """How many mounts are stacked on `path`."""
    with open("/proc/self/mountinfo") as f:
        return sum(line.split()[4] == str(path) for line in f)


def writable(sweep: Path) -> None:
    subprocess.run(["umount", str(sweep)], check=True)


def completed(sweep: Path) -> set[str]:
    """The x of each job the sweep's record holds as completed."""
    rows = Journal.read(sweep / "results.jsonl").rows.values()
    return {r["x"] for r in rows if r["status"] == "completed"}


# What goes wrong, what mends it, and how the error reads.
ROWS: dict[str, tuple[Callable[[Path], None], Callable[[Path], None], str]] = {
    "full": (fill, make_room, "[Errno 28] No space left on device"),
    "read-only": (read_only, writable, "[Errno 30] Read-only file system"),
}


@pytest.mark.slow
@pytest.mark.parametrize("warm_start", ["fork", "spawn"])
@pytest.mark.parametrize("row", list(ROWS))
def test_the_disk_saying_no_mid_sweep_stops_it_in_one_line_and_its_command_resumes(
    runner: Runner, marks: Path, tmpfs: Path, row: str, warm_start: str
) -> None:
    breaks, mends, said = ROWS[row]
    args = runner.probe_sweep(
        marks,
        "x=0,1,2,3,4,5",
        "sleep=1",
        "hydra.launcher.n_jobs=2",
        f"hydra.launcher.warm_start={warm_start}",
        f"hydra.sweep.dir={tmpfs}",
    )
    sweep = runner.popen(args)
    wait_until(lambda: len(completed(tmpfs)) >= 2, 60, "two jobs recorded")  # two more run
    breaks(tmpfs)
    out, _ = sweep.communicate(timeout=120)
    assert sweep.returncode == 1, out
    assert "Traceback" not in out and "could not record" not in out, out
    errors = [line for line in out.splitlines() if "hpsearch: error" in line]
    assert len(errors) == 1, out
    line = errors[0]
    assert line.startswith(f"hpsearch: error: cannot write {tmpfs}/"), line
    assert f": {said}; the sweep stopped" in line, line
    assert wait_no_tagged(runner.tag, within=10) == [], "a job's process outlived the sweep"

    mends(tmpfs)
    done = completed(tmpfs)  # what the stop left recorded
    assert len(done) >= 2, done
    command = shlex.split(line.partition("(jobs that finished are not run again), run: ")[2])
    assert command[0] == runner.python, line
    final = runner.run(command[1:])
    assert final.returncode == 0, final.stdout
    rows = pd.read_csv(tmpfs / "results.csv")
    live = rows[rows["status"] != "superseded"]
    assert sorted(live["x"]) == list(range(6)) and set(live["status"]) == {"completed"}
    starts = (marks / "starts.log").read_text().split()
    assert all(starts.count(x) == 1 for x in done), starts  # a recorded job never ran again
