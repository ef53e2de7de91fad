"""The local backend's warm spares, per environment (`EnvKey`): made ahead
of need, asked for the modules learned since, handed over one at a time, dropped when dead or
stuck (and so replaced), killed when nobody needs them. A spare has no job to lose.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from ...plan.slots import spare_counts
from ..backend import Ahead
from ..job.wire import more_line
from .job_process import KILL_WAIT_S
from .spare import Preloads, Spare, StatusReader

EnvKey = tuple[tuple[str, str], ...]
# Per environment: the environment and how many spares to keep waiting for it.
Wanted = Mapping[EnvKey, tuple[Mapping[str, str], int]]

MAX_SPARE_DEATHS = 3  # spares of one environment that died waiting: then no more are made
log = logging.getLogger("hpsearch.launcher")

# A fresh process waiting for its job: (its environment, its early log, the modules to import
# ahead) -> the process and its status pipe.
Spawn = Callable[[Mapping[str, str], str, list[str]], tuple[subprocess.Popen[bytes], StatusReader]]


def env_key(env: Mapping[str, str]) -> EnvKey:
    """An environment as a dict key: a warm spare is matched to a job by it."""
    return tuple(sorted(env.items()))


def spares_for(ahead: Ahead) -> Wanted:
    """The spares each slot group wants (plan.slots.spare_counts) for the jobs still to start,
    by environment (that of the group's next job)."""
    spares: dict[EnvKey, tuple[Mapping[str, str], int]] = {}
    for group, count in spare_counts(ahead.pool, ahead.left):
        env = ahead.env_for(group)
        spares[env_key(env)] = (env, count)
    return spares


class SparePool:
    """The waiting spares per environment, made by `spawn` (which tests stand in for), their
    logs in `dir`, at most `max_preparing` of them importing at once."""

    def __init__(self, dir: Path, preloads: Preloads, max_preparing: int, spawn: Spawn) -> None:
        self.dir = dir
        self.preloads = preloads
        # Spares importing at once: more would slow the jobs that are still importing (the
        # first round, on a box with few cores) more than it gains.
        self.max_preparing = max_preparing
        self.spawn = spawn
        self._spares: dict[EnvKey, list[Spare]] = {}
        self._made = 0  # spares made so far: names their logs
        self._deaths: dict[EnvKey, int] = {}  # spares that died waiting, per environment

    def refill(self, wanted: Wanted) -> None:
        """Keep `count` waiting spares for each environment in `wanted`, none for others:
        dead or stuck spares are dropped (and so replaced), surplus ones killed, missing ones
        made, waiting ones asked for the modules learned since they were made."""
        ready = self._trim(wanted)
        budget = self.max_preparing - sum(not r for r in ready.values())
        modules = self.preloads.modules()
        for spares in self._spares.values():
            for spare in spares:
                missing = [m for m in modules if m not in spare.has]
                if missing and (budget > 0 or not ready[id(spare)]):
                    budget -= ready[id(spare)]
                    self._ask_more(spare, missing)
        for key, (env, count) in wanted.items():
            have = self._spares.setdefault(key, [])
            if self._deaths.get(key, 0) >= MAX_SPARE_DEATHS:
                continue  # they die at start: that slot's jobs start cold, and meet the error
            while len(have) < count and budget > 0:
                budget -= 1
                self._made += 1
                path = self.dir / f"spare-{self._made}.log"
                proc, status = self.spawn(env, str(path), modules)
                have.append(Spare(proc, path, status, set(modules)))

    def _trim(self, wanted: Wanted) -> dict[int, bool]:
        """Drop the dead and stuck spares, kill the surplus; whether each kept one (by its
        id) is ready, done importing."""
        ready: dict[int, bool] = {}
        for key in list(self._spares):
            alive = []
            for spare in self._spares[key]:
                if self._alive(spare, key) and self.preloads.stuck(spare):
                    self.kill(spare)
                elif spare.proc.returncode is None:
                    alive.append(spare)
            count = wanted[key][1] if key in wanted else 0
            for spare in alive[count:]:
                self.kill(spare)
            self._spares[key] = alive[:count]
            ready.update((id(s), self.preloads.read(s)) for s in self._spares[key])
        return ready

    def _ask_more(self, spare: Spare, modules: list[str]) -> None:
        """Have a waiting spare import `modules` too (learned since it was made)."""
        assert spare.proc.stdin is not None
        try:
            spare.proc.stdin.write(more_line(modules))
            spare.proc.stdin.flush()
        except OSError:  # it died: the next refill drops it
            return
        spare.has.update(modules)
        spare.batches += 1

    def take(self, key: EnvKey) -> Spare | None:
        """A live spare for this environment, no longer the pool's; None if none waits."""
        spares = self._spares.get(key, [])
        while spares:
            spare = spares.pop(0)
            if self._alive(spare, key):
                self.preloads.read(spare)  # what it imports now: its job's watcher goes on
                return spare
        return None

    def waiting(self, key: EnvKey) -> list[Spare]:
        """The spares waiting for this environment, oldest first (as last refilled)."""
        return list(self._spares.get(key, []))

    def _alive(self, spare: Spare, key: EnvKey) -> bool:
        code = spare.proc.poll()
        if code is None:
            return True
        self._deaths[key] = self._deaths.get(key, 0) + 1
        self.preloads.died(spare, code)  # importing a module ahead: that one goes
        how = f"exit status {code}" if code >= 0 else f"signal {-code}"
        log.warning(
            "hpsearch: a spare process (pid %d) died while waiting for a job (%s); "
            "it is replaced, and no job was given to it: see %s",
            spare.proc.pid,
            how,
            spare.log,
        )
        spare.status.close()
        return False

    @staticmethod
    def kill(spare: Spare) -> None:
        """A spare has no job to lose: killed at once, its whole group."""
        spare.status.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(spare.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spare.proc.wait(timeout=KILL_WAIT_S)
        if spare.proc.stdin is not None:
            spare.proc.stdin.close()

    def close(self) -> None:
        """Kill the spares nobody used."""
        for spares in self._spares.values():
            for spare in spares:
                self.kill(spare)
        self._spares.clear()
