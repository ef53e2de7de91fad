"""Runs a Hydra app with the hpsearch launcher, printing when launch() is called and how much
CPU the sweep process had used by then (bench/launchers.py's scale figures)."""

from __future__ import annotations

import resource
import runpy
import sys
import time

from hpsearch_launcher import launch as _core

_launch = _core.launch


def launch(*args: object, **kwargs: object) -> object:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"LAUNCH_AT {time.time():.3f}", flush=True)
    print(f"CPU_AT_LAUNCH {usage.ru_utime + usage.ru_stime:.3f}", flush=True)
    return _launch(*args, **kwargs)  # type: ignore[arg-type]


_core.launch = launch  # type: ignore[assignment]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
