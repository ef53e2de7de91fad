"""Promises an audit's planted bugs got past (issue 21): each test states one, through the
launcher's public seams (LocalBackend, a real sweep, NVML patched as a module attribute), and
fails when the bug is put back."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Mapping

import psutil
import pytest
from conftest import Runner

from hpsearch_launcher.execute.local.backend import LocalBackend
from hpsearch_launcher.execute.local.spare import StatusReader
from hpsearch_launcher.execute.local.spare_pool import env_key


class SpareStandIn:
    """Stands in for SparePool.spawn: a real process that waits (so killing it is real)
    but never imports anything; the test says when each is ready, writing to its status pipe,
    as a spare does once its imports are done."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.write_ends: list[int] = []  # one per spare made, in the order they were made

    def __call__(
        self, env: Mapping[str, str], early_log: str, preload: list[str]
    ) -> tuple[subprocess.Popen[bytes], StatusReader]:
        read_end, write_end = os.pipe()
        self.write_ends.append(write_end)
        proc = subprocess.Popen(
            ["sleep", "600"],
            env=self.runner.env(),
            stdin=subprocess.PIPE,
            start_new_session=True,  # as a real spare: its own group, which SparePool.kill ends
        )
        return proc, StatusReader(read_end)

    @property
    def made(self) -> int:
        return len(self.write_ends)

    def ready(self, n: int) -> None:
        os.write(self.write_ends[n], b"ready\n")

    def close(self) -> None:
        for fd in self.write_ends:
            os.close(fd)


@pytest.fixture
def spare_stand_in(runner: Runner) -> Iterator[SpareStandIn]:
    stand_in = SpareStandIn(runner)
    yield stand_in
    stand_in.close()


@pytest.mark.parametrize("budget", [1, 2])
def test_at_most_max_preparing_spares_import_at_once(
    spare_stand_in: SpareStandIn, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """Never more than `max_preparing` spares still importing, over all environments: more
    would slow the jobs still importing (found necessary on 2 cores). A spare that is ready
    frees its place in the budget for the next one."""
    backend = LocalBackend(b"", max_preparing=budget)
    monkeypatch.setattr(backend.spares, "spawn", spare_stand_in)
    gpu0, gpu1 = {"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}
    wanted = {env_key(gpu0): (gpu0, 2), env_key(gpu1): (gpu1, 2)}  # 4 spares, 2 per GPU
    try:
        backend.spares.refill(wanted)
        assert spare_stand_in.made == budget
        backend.spares.refill(wanted)  # none is ready yet: none more
        assert spare_stand_in.made == budget
        for readied in range(1, 5 - budget):
            spare_stand_in.ready(readied - 1)
            backend.spares.refill(wanted)
            assert spare_stand_in.made == budget + readied  # one more each time, not all
        assert [len(backend.spares.waiting(key)) for key in wanted] == [2, 2]
    finally:
        backend.close()


# A job whose sweep process was SIGKILLed ends within this (measured here: 0.06-0.52 s, with
# the watchdog asking every 0.5 s); generous for a loaded 2-core machine, yet a watchdog that
# asks every 5 s (4.5 s measured) misses it.
ORPHAN_GONE_WITHIN_S = 2.5

WATCHED_CHILD = """
import os, time
from hpsearch_launcher.execute.job.child import start_parent_watchdog
start_parent_watchdog(os.getppid())
print("watching", flush=True)
time.sleep(600)
"""
# Its own session, as every job's process has: the watchdog kills its whole process group.
PARENT_OF_WATCHED = f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", {WATCHED_CHILD!r}], start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # its new parent may not reap
    except psutil.NoSuchProcess:
        return True


def test_a_job_whose_sweep_is_killed_ends_within_seconds(runner: Runner) -> None:
    """An orphaned job goes on holding its GPU memory: the job's watchdog ends it within
    ORPHAN_GONE_WITHIN_S of its parent's SIGKILL, not merely at some point. The parent is
    killed just after the watchdog started, the worst moment for a watchdog that asks rarely."""
    parent = runner.popen(["-c", PARENT_OF_WATCHED])
    assert parent.stdout is not None
    lines = {parent.stdout.readline().strip() for _ in range(2)}  # in either order
    assert "watching" in lines, lines
    (child_pid,) = (int(line) for line in lines if line.isdigit())
    parent.kill()
    killed = time.monotonic()
    parent.wait()
    while not gone(child_pid) and time.monotonic() - killed < 30:
        time.sleep(0.02)
    took = time.monotonic() - killed
    parent.communicate()
    assert took < ORPHAN_GONE_WITHIN_S, f"the orphan lived {took:.2f}s after its parent's SIGKILL"
