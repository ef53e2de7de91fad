"""Promises an audit's planted bugs got past (issue 21): each test states one, through the
launcher's public seams (LocalBackend, a real sweep, NVML patched as a module attribute), and
fails when the bug is put back."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping

import pytest
from conftest import Runner

from hpsearch_launcher.execute.backend import env_key
from hpsearch_launcher.execute.local import LocalBackend


class SpareStandIn:
    """Stands in for LocalBackend._spawn: a real process that waits (so killing it is real)
    but never imports anything; the test says when each is ready, writing to the pipe end the
    stand-in keeps, as a spare does once its imports are done."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.write_ends: list[int] = []  # one per spare made, in the order they were made

    def __call__(
        self, env: Mapping[str, str], early_log: str, preload: str, ready_fd: int = -1
    ) -> subprocess.Popen[bytes]:
        self.write_ends.append(os.dup(ready_fd))  # the caller closes its own copy
        return subprocess.Popen(
            ["sleep", "600"],
            env=self.runner.env(),
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # as a real spare: its own group, which _kill ends
        )

    @property
    def made(self) -> int:
        return len(self.write_ends)

    def ready(self, n: int) -> None:
        os.write(self.write_ends[n], b"r")

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
    monkeypatch.setattr(backend, "_spawn", spare_stand_in)
    gpu0, gpu1 = {"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}
    wanted = {env_key(gpu0): (gpu0, 2), env_key(gpu1): (gpu1, 2)}  # 4 spares, 2 per GPU
    try:
        backend.prepare(wanted)
        assert spare_stand_in.made == budget
        backend.prepare(wanted)  # none is ready yet: none more
        assert spare_stand_in.made == budget
        for readied in range(1, 5 - budget):
            spare_stand_in.ready(readied - 1)
            backend.prepare(wanted)
            assert spare_stand_in.made == budget + readied  # one more each time, not all
        assert sorted(len(spares) for spares in backend.spares.values()) == [2, 2]
    finally:
        backend.close()
