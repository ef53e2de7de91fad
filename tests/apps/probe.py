"""A small Hydra app for launcher tests: records what each job saw, and fails on demand."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def probe(cfg: DictConfig) -> float:
    num = HydraConfig.get().job.num
    marks = Path(cfg.marks)
    started = time.time()
    (marks / f"start-{num}").touch()
    if cfg.chain and num > 0:  # end in start order: wait for the previous job to end first
        while not (marks / f"end-{num - 1}").exists():
            time.sleep(0.02)
    time.sleep(cfg.sleep)
    _fail(cfg.mode)
    record = {
        "num": num,
        "x": cfg.x,
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "fraction": os.environ.get("HPSEARCH_GPU_MEMORY_FRACTION"),
        "jax_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
        "threads": os.environ.get("HPSEARCH_CPU_THREADS"),
        "cwd": os.getcwd(),
        "output_dir": HydraConfig.get().runtime.output_dir,
        "start": started,
        "end": time.time(),
    }
    with open(marks / "records.jsonl", "a") as f:  # one write per line: no torn lines
        f.write(json.dumps(record) + "\n")
    (marks / f"end-{num}").touch()
    print(f"probe job {num} stdout")
    print(f"probe job {num} stderr", file=sys.stderr)
    return float(cfg.x)


def _fail(mode: str) -> None:
    if mode == "raise":
        raise ValueError("probe asked to raise")
    if mode == "exit":
        sys.exit(3)
    if mode == "hard_exit":
        os._exit(7)
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        # A grandchild too: the whole tree must go when the job is ended.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        time.sleep(600)


main = hydra.main(version_base="1.3", config_path="conf", config_name="probe")(probe)

if __name__ == "__main__":
    main()
