"""A small Hydra app for launcher tests: records what each job saw, and fails on demand."""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from hpsearch_launcher import EXECUTION_WHITELIST, report, report_gpu_peak
from hpsearch_launcher.hydra_line import main_options

try:  # run as the script (its directory on sys.path), or imported as tests' apps.probe
    import import_effects
except ImportError:
    from apps import import_effects

if os.environ.get("PROBE_IMPORT_WATCH_OFF"):  # in a job's process: no look at its imports
    # The watcher's own module reads it (a constant set elsewhere would switch nothing off):
    # only the last look, as the task returns, is left.
    from hpsearch_launcher.execute.job import child_status

    child_status.IMPORT_WATCH_S = 3600.0


def probe(cfg: DictConfig) -> float:
    # When a warm spare imported the marker module (hydra.launcher.preload), if one did.
    preloaded_at = getattr(sys.modules.get("preload_marker"), "IMPORTED_AT", None)
    for name in cfg.imports:  # what a task imports itself (and preload: auto learns)
        importlib.import_module(name)
    num = HydraConfig.get().job.num
    marks = Path(cfg.marks)
    started, age = time.time(), _age()
    if cfg.x == cfg.trap_x:  # a job that ignores SIGTERM: only SIGKILL ends it
        signal.signal(signal.SIGTERM, lambda *_: (marks / f"sigterm-{num}").touch())
    sleepers = _hang_grandchildren()  # of earlier jobs: their trees must be gone by now
    # The sweep, or the fork server; renamed into place, so a test never reads it half written.
    (marks / f".start-{num}").write_text(str(os.getppid()))
    os.replace(marks / f".start-{num}", marks / f"start-{num}")
    with open(marks / "starts.log", "a") as f:
        f.write(f"{cfg.x}\n")
    # A hold file (outside the config, so resumed runs keep their identity) parks jobs with
    # x >= hold_from until it is removed.
    while (marks / "hold").exists() and cfg.x >= cfg.hold_from:
        time.sleep(0.05)
    while cfg.wait_for and not (marks / cfg.wait_for).exists():
        time.sleep(0.05)
    while cfg.gate and not (marks / f"go-{num}").exists():
        time.sleep(0.05)
    if cfg.chain and num > 0:  # end in start order: wait for the previous job to end first
        while not (marks / f"end-{num - 1}").exists():
            time.sleep(0.02)
    # A simulated GPU's memory (tests/fake_nvml), held as a framework would allocate it; the
    # job with x == grow_x grows halfway through its sleep.
    grows = bool(cfg.gpu_mb and cfg.grow_to_mb and cfg.x == cfg.grow_x)
    if cfg.gpu_mb:
        import pynvml

        pynvml.allocate(cfg.gpu_mb)
    time.sleep(cfg.sleep / 2 if grows else cfg.sleep)
    if grows:
        pynvml.allocate(cfg.grow_to_mb)
        time.sleep(cfg.sleep / 2)
    if cfg.report_peak:  # as hpsearch's trainer reports TensorFlow's own figure
        report_gpu_peak(max(cfg.gpu_mb, cfg.grow_to_mb if grows else 0))
    for step in range(cfg.steps):  # a learning curve: x * (step + 1) / steps, one per step
        time.sleep(cfg.step_s)
        stop = report(cfg.x * (step + 1) / cfg.steps, step)
        if stop and not os.environ.get("PROBE_IGNORE_STOP"):  # pruned: stop as a task should
            (marks / f"stopped-{num}").write_text(str(step))
            break
    while cfg.x == cfg.trap_x:
        time.sleep(0.05)
    failing = cfg.x == cfg.fail_x or (cfg.fail_mod and cfg.x % cfg.fail_mod == 0)
    first_attempt = not (marks / f"attempted-{cfg.x}").exists()
    (marks / f"attempted-{cfg.x}").touch()
    _fail("hang" if cfg.x == cfg.hang_x else "raise" if failing else cfg.mode, first_attempt, marks)
    if cfg.seed is not None:  # as a task seeds itself (hpsearch's: keras.utils.set_random_seed)
        random.seed(cfg.seed)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(cfg.seed)
    assert import_effects.DONE is not None  # the task needs it: its process imports it
    numpy = sys.modules.get("numpy")  # imported ahead (preload) or by the task (imports)
    record = {
        "num": num,
        "draws": [random.random(), None if numpy is None else float(numpy.random.random())],
        "x": cfg.x,
        "pid": os.getpid(),
        "age": age,
        "ppid": os.getppid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "nice": os.nice(0),
        "stdin_eof": _stdin_at_eof(),
        "watchdog": any(t.name == "hpsearch-parent-watchdog" for t in threading.enumerate()),
        "fds": _open_fds(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "node": _ray_node(),  # the Ray node it ran on (backend=ray), else None
        "fraction": os.environ.get("HPSEARCH_GPU_MEMORY_FRACTION"),
        "jax_fraction": os.environ.get("XLA_CLIENT_MEM_FRACTION"),
        "jax_fraction_old": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),  # deprecated
        "threads": os.environ.get("HPSEARCH_CPU_THREADS"),
        "cap_mb": os.environ.get("HPSEARCH_GPU_MEMORY_LIMIT_MB"),
        "gpu_mb": cfg.gpu_mb,
        "cwd": os.getcwd(),
        "preloaded_at": preloaded_at,
        "output_dir": HydraConfig.get().runtime.output_dir,
        "start": started,
        "sleepers_at_start": sleepers,
        "end": time.time(),
    }
    with open(marks / "records.jsonl", "a") as f:  # one write per line: no torn lines
        f.write(json.dumps(record) + "\n")
    (marks / f"end-{num}").touch()
    print(f"probe job {num} stdout")
    print(f"probe job {num} stderr", file=sys.stderr)
    if cfg.mode == "close_stdio":  # a progress line left unflushed, both fds closed; it returns
        print("probe progress 100%", end="")
        print("probe progress 100%", end="", file=sys.stderr)
        os.close(1)
        os.close(2)
    return float(cfg.x)


def _fail(mode: str, first_attempt: bool, marks: Path) -> None:
    if mode.endswith("_once"):  # fail on the first attempt only: a retry succeeds
        if not first_attempt:
            return
        mode = mode.removesuffix("_once")
    if mode == "raise":
        raise ValueError("probe asked to raise")
    if mode == "exit":
        sys.exit(3)
    if mode == "keyboard_interrupt":  # the task's own, not the sweep's Ctrl-C
        raise KeyboardInterrupt
    if mode == "hard_exit":
        os._exit(7)
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hog":  # host memory, 64 MB at a time, every page touched, until killed
        while True:
            _KEPT.append(bytearray(64 << 20))
    if mode == "unclosed":  # a file never closed, an atexit handler: both must still land
        _KEPT.append(open(marks / f"unclosed-{os.getpid()}.txt", "w"))  # noqa: SIM115
        _KEPT[-1].write("written, never flushed or closed\n")
        atexit.register((marks / f"atexit-{os.getpid()}").touch)
    if mode == "stderr_oom":  # only the job's stderr says why: the OOM retry must read it
        print("CUDA error: out of memory (cudaErrorMemoryAllocation)", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    if mode == "cuda_oom":  # PyTorch's wording
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB)")
    if mode == "tf_oom":  # TensorFlow's own exception, as a GPU job raises it
        import tensorflow as tf

        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    if mode == "flood":  # far more output than any pipe buffer
        line = "x" * 1023 + "\n"
        for _ in range(20_000):
            sys.stdout.write(line)
            sys.stderr.write(line)
    if mode == "hang_after_return":  # the task returns, then its process hangs on its way out
        atexit.register(time.sleep, 600)
    if mode == "leave":  # returns, leaving 2 sleepers: one in its own group, one a daemon
        _leave_sleepers(marks)
    if mode == "hang":
        # A grandchild too: the whole tree must go when the job is ended. Its command names
        # the marks dir: a test tells its own sweep's grandchildren from other tests'.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(marks)])
        time.sleep(600)


def _leave_sleepers(marks: Path) -> None:
    """Start two processes that outlive this job unless someone ends them: a child in its own
    process group and session (start_new_session), and a daemon that double-forks (setsid
    between): each sleeps 600 s, with the marks dir in its command line, as `hang`'s does."""
    sleep = [sys.executable, "-c", "import time; time.sleep(600)", str(marks)]
    subprocess.Popen(sleep, start_new_session=True)
    if os.fork() == 0:  # the daemon: fork, setsid, fork again, the middle one exits at once
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, sleep)
        os._exit(0)
    time.sleep(0.2)  # both started (the middle process has exited: the daemon is an orphan)


def _age() -> float:
    """How long this process has existed (s): a fork server's may have made it before its job
    came. Both ends counted from boot (/proc), in the kernel's clock ticks."""
    with open("/proc/self/stat") as f:
        started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")


def _stdin_at_eof() -> bool:
    """Whether the job's stdin has nothing to wait for (at its end, as /dev/null or a closed
    pipe is), not an open pipe nothing writes to. Asked of select: nothing is read or changed
    (a basic-launcher run's stdin may be its test runner's channel)."""
    return bool(select.select([0], [], [], 0)[0])


def _open_fds() -> list[str]:
    """What the process holds open, each fd by its kind (pipe, socket, a file's path)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own fd, closed since
            continue
        held.append(target.split(":")[0] if target.startswith(("pipe:", "socket:")) else target)
    return sorted(held)


def _ray_node() -> str | None:
    ray = sys.modules.get("ray")  # a Ray worker has it imported; the probe never imports it
    return ray.get_runtime_context().get_node_id() if ray and ray.is_initialized() else None


_KEPT: list = []  # files the `unclosed` mode leaves open until the process ends


def _hang_grandchildren() -> int:
    """Processes of this sweep left by a `hang` job (their command says sleep(600))."""
    import psutil

    tag, count = os.environ.get("HPS_TEST_TAG"), 0
    for proc in psutil.process_iter():
        try:
            if "time.sleep(600)" in " ".join(proc.cmdline()) and (
                proc.environ().get("HPS_TEST_TAG") == tag
            ):
                count += proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            continue
    return count


# As an app that runs on both Hydra lines writes it: on 1.4 the targets its config names
# (the launcher's callback) whitelisted, on 1.3 version_base 1.3.
main = hydra.main(config_path="conf", config_name="probe", **main_options(EXECUTION_WHITELIST))(
    probe
)

if __name__ == "__main__":
    main()
