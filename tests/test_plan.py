"""The sweep plan: round-robin slots, devices, job environments. Pure, fake GPU ids."""

from __future__ import annotations

import pytest

from hpsearch_launcher.plan.env import job_env
from hpsearch_launcher.plan.settings import LauncherSettingsError, parse_settings
from hpsearch_launcher.plan.slots import (
    CPU,
    SlotPool,
    device_label,
    gpu_settings_unused,
    slots_per_device,
    sweep_devices,
    visible_gpus,
)


def replay(devices: list[str], slots: int, events: list[str]) -> list[str]:
    """Run a script of 'start' and 'end N' (N = the job number) through a pool; return each
    job's device in start order."""
    pool, placed = SlotPool(devices, slots), []
    for event in events:
        if event == "start":
            placed.append(pool.acquire())
        else:
            pool.release(placed[int(event.split()[1])])
    return placed


@pytest.mark.parametrize(
    ("devices", "slots", "events", "expected"),
    [
        pytest.param(["0", "1", "2"], 1, ["start"] * 3, ["0", "1", "2"], id="one-each"),
        pytest.param(["0", "1", "2"], 2, ["start"] * 6, ["0", "1", "2"] * 2, id="two-slots"),
        pytest.param(
            ["0", "1"],
            1,
            ["start", "start", "end 0", "start", "end 1", "start"],
            ["0", "1", "0", "1"],
            id="in-order-ends",
        ),
        # Job 1 ends before job 0: job 2 goes to the idle GPU 1, not to i % n = 0.
        pytest.param(
            ["0", "1"],
            1,
            ["start", "start", "end 1", "start"],
            ["0", "1", "1"],
            id="out-of-order-end-takes-the-idle-gpu",
        ),
        # After GPU 1 frees, the cursor is past it: the next free slot in order is taken.
        pytest.param(
            ["0", "1", "2"],
            2,
            ["start"] * 6 + ["end 4", "start", "end 0", "start", "end 2", "start"],
            ["0", "1", "2", "0", "1", "2", "1", "0", "2"],
            id="cursor-moves-on",
        ),
        # Every job on GPUs 1 and 2 ends first: the next two go one to each, not both to GPU 1
        # (the cursor moves past the device it gave, not one step from where it was).
        pytest.param(
            ["0", "1", "2"],
            2,
            ["start"] * 6 + ["end 1", "end 4", "end 2", "end 5", "start", "start"],
            ["0", "1", "2", "0", "1", "2", "1", "2"],
            id="out-of-order-ends-spread-over-the-idle-gpus",
        ),
        pytest.param(
            ["3", "7"],
            2,
            ["start"] * 4 + ["end 1", "end 3", "start", "start"],
            ["3", "7", "3", "7", "7", "7"],
            id="only-free-gpu-twice",
        ),
        pytest.param([CPU], 3, ["start"] * 3 + ["end 1", "start"], [CPU] * 4, id="cpu-slots"),
    ],
)
def test_round_robin_over_free_slots(
    devices: list[str], slots: int, events: list[str], expected: list[str]
) -> None:
    assert replay(devices, slots, events) == expected


def test_twelve_equal_jobs_fifo_ends_give_four_per_gpu() -> None:
    pool = SlotPool(["0", "1", "2"], 2)
    placed = [pool.acquire() for _ in range(6)]
    for done in range(6):  # each end is followed by the next start
        pool.release(placed[done])
        placed.append(pool.acquire())
    assert placed == ["0", "1", "2"] * 4


def test_pool_never_exceeds_slots_and_refuses_misuse() -> None:
    pool = SlotPool(["0", "1"], 2)
    for _ in range(4):
        pool.acquire()
    assert not pool.has_free() and pool.busy == {"0": 2, "1": 2}
    with pytest.raises(RuntimeError, match="every slot busy"):
        pool.acquire()
    pool.release("1")
    assert pool.acquire() == "1"
    with pytest.raises(RuntimeError, match="without a slot"):
        SlotPool(["0"], 1).release("0")


@pytest.mark.parametrize(
    ("environ", "nvml", "expected"),
    [
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, ["0", "1", "2", "3"], ("2", "3")),
        ({"CUDA_VISIBLE_DEVICES": ""}, ["0"], ()),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, ["0"], ()),
        ({"CUDA_VISIBLE_DEVICES": "1,-1,2"}, ["0", "1", "2"], ("1",)),
        ({"CUDA_VISIBLE_DEVICES": "GPU-abc"}, [], ("GPU-abc",)),
        ({}, ["0", "1"], ("0", "1")),
        ({}, [], ()),
    ],
)
def test_visible_gpus(environ: dict[str, str], nvml: list[str], expected: tuple[str, ...]) -> None:
    assert visible_gpus(environ, lambda: nvml) == expected


@pytest.mark.parametrize(
    ("params", "environ", "nvml", "devices", "slots"),
    [
        ({"gpus": "auto", "jobs_per_gpu": 2}, {}, ["0", "1"], ("0", "1"), 2),
        ({"gpus": "auto", "n_jobs": 3}, {}, [], (CPU,), 3),
        ({"gpus": [], "n_jobs": 4}, {"CUDA_VISIBLE_DEVICES": "0"}, ["0"], (CPU,), 4),
        ({"gpus": [0, 1, 2]}, {}, ["0", "1", "2"], ("0", "1", "2"), 1),
        # No NVML: auto takes CUDA_VISIBLE_DEVICES at its word.
        ({"gpus": "auto"}, {"CUDA_VISIBLE_DEVICES": "0"}, [], ("0",), 1),
        ({"gpus": [1]}, {}, ["0", "1"], ("1",), 1),
    ],
)
def test_sweep_devices(
    params: dict, environ: dict, nvml: list[str], devices: tuple, slots: int
) -> None:
    settings = parse_settings(params)
    got = sweep_devices(settings, environ, lambda: nvml)
    assert got == devices
    assert slots_per_device(settings, got) == slots


@pytest.mark.parametrize(
    ("params", "devices", "said"),
    [
        ({"gpus": [], "jobs_per_gpu": 2, "n_jobs": 3}, (CPU,), "jobs_per_gpu=2 does nothing here"),
        ({"jobs_per_gpu": "auto"}, (CPU,), "jobs_per_gpu=auto does nothing here"),
        ({"memory_fraction": 0.3}, (CPU,), "memory_fraction=0.3 does nothing here"),
        ({"jobs_per_gpu": 2}, ("0",), None),  # a GPU: they do what they say
        ({"gpus": [], "n_jobs": 3}, (CPU,), None),  # nothing set for a GPU
    ],
)
def test_gpu_settings_on_the_cpu_are_said_to_do_nothing(
    params: dict, devices: tuple, said: str | None
) -> None:
    """A GPU setting where the jobs run on the CPU: one line, not silence (and no refusal:
    a GPU machine's config still runs on a laptop)."""
    line = gpu_settings_unused(parse_settings(params), devices)
    if said is None:
        assert line is None
        return
    assert line is not None and said in line and "\n" not in line
    assert line.startswith("hpsearch: warning: hydra.launcher.")
    assert "the jobs run on the CPU" in line
    if params.get("gpus") == []:
        assert "(gpus=[]), n_jobs=3 at a time" in line


def test_gpu_that_nvml_does_not_have_fails_before_any_job() -> None:
    with pytest.raises(LauncherSettingsError, match=r"no GPU 5 on this machine \(NVML sees 0, 1\)"):
        sweep_devices(parse_settings({"gpus": [0, 5]}), {}, lambda: ["0", "1"])


@pytest.mark.parametrize(
    ("gpus", "environ", "shown"),
    [
        (
            [7],
            {},
            "gpus=[7]: no NVIDIA driver or GPU found here (NVML does not answer), so no GPU 7",
        ),
        ([0, 1], {"CUDA_VISIBLE_DEVICES": "0,1"}, "gpus=[0,1]: no NVIDIA driver or GPU"),
        (["GPU-1a2b"], {}, "gpus=[GPU-1a2b]: no NVIDIA driver or GPU found here"),
    ],
)
def test_listed_gpus_without_an_nvidia_driver_fail_before_any_job(
    gpus: list, environ: dict, shown: str
) -> None:
    """Without a driver there is no GPU to give a job: each would fail seconds in."""
    with pytest.raises(LauncherSettingsError) as err:
        sweep_devices(parse_settings({"gpus": gpus}), environ, lambda: [])
    message = str(err.value)
    assert message.startswith(f"hydra.launcher.{shown}") and "\n" not in message
    assert message.endswith(
        "use gpus=[] (the CPU), or gpus=auto (the GPUs CUDA_VISIBLE_DEVICES names, else the CPU)"
    )


def test_job_env_on_gpu() -> None:
    settings = parse_settings({"gpus": [0, 1], "jobs_per_gpu": 2, "env": {"MY_VAR": 1}})
    env = job_env("1", settings, slots=2, parent_pid=42, memory_total_mb=80_000, cpu_count=16)
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["HPSEARCH_GPU_MEMORY_FRACTION"] == "0.45"
    assert env["XLA_CLIENT_MEM_FRACTION"] == "0.45"  # what JAX reads now
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.45"  # deprecated, read by older JAX
    assert env["HPSEARCH_GPU_MEMORY_LIMIT_MB"] == "36000"
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert env["HPSEARCH_PARENT_PID"] == "42"
    assert env["MY_VAR"] == "1"
    assert "HPSEARCH_CPU_THREADS" not in env


def test_job_env_on_cpu_hides_gpus_and_splits_cores() -> None:
    settings = parse_settings({"gpus": [], "n_jobs": 4, "memory_fraction": 0.2})
    env = job_env(CPU, settings, slots=4, parent_pid=1, memory_total_mb=None, cpu_count=8)
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["HPSEARCH_CPU_THREADS"] == env["OMP_NUM_THREADS"] == "2"
    assert "HPSEARCH_GPU_MEMORY_FRACTION" not in env
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in env


def test_user_env_wins_where_the_launcher_does_not_own_the_variable() -> None:
    settings = parse_settings({"gpus": [], "n_jobs": 2, "env": {"OMP_NUM_THREADS": "7"}})
    env = job_env(CPU, settings, slots=2, parent_pid=1, memory_total_mb=None, cpu_count=8)
    assert env["OMP_NUM_THREADS"] == "7"
    assert env["HPSEARCH_CPU_THREADS"] == "4"  # TensorFlow's pools: the launcher's share


@pytest.mark.parametrize("allow", [True, False])
def test_allow_growth_reaches_the_job_environment(allow: bool) -> None:
    settings = parse_settings({"gpus": [0], "allow_growth": allow})
    env = job_env("0", settings, slots=1, parent_pid=1, memory_total_mb=None, cpu_count=1)
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == ("true" if allow else "false")
    assert "HPSEARCH_GPU_MEMORY_LIMIT_MB" not in env  # no NVML total: the job asks NVML itself


def test_torch_tasks_cap_their_allocator_at_the_launchers_fraction(monkeypatch) -> None:
    """PyTorch reads no variable for a cap: the helper a torch task calls applies it."""
    import sys
    import types

    from hpsearch_launcher.contract import cap_torch_memory

    calls = []
    cuda = types.SimpleNamespace(
        is_available=lambda: True, set_per_process_memory_fraction=lambda f, d: calls.append((f, d))
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.delenv("HPSEARCH_GPU_MEMORY_FRACTION", raising=False)
    assert cap_torch_memory() is None and calls == []  # not launched by hpsearch: no cap
    monkeypatch.setenv("HPSEARCH_GPU_MEMORY_FRACTION", "0.45")
    assert cap_torch_memory() == 0.45
    assert calls == [(0.45, 0)]  # device 0: the only one CUDA_VISIBLE_DEVICES leaves visible


def test_in_turn_is_the_order_the_round_robin_offers_devices() -> None:
    pool = SlotPool(["0", "1", "2"], slots=1)
    assert pool.in_turn() == ["0", "1", "2"]
    pool.acquire()
    assert pool.in_turn() == ["1", "2", "0"]
    pool.acquire()
    assert pool.in_turn() == ["2", "0", "1"]


def test_a_job_alone_waits_for_its_device_to_drain_then_holds_every_slot() -> None:
    pool = SlotPool(["0", "1"], slots=2)
    assert [pool.acquire(), pool.acquire()] == ["0", "1"]
    assert pool.acquire_whole("0") is False  # a job still runs there: reserved meanwhile
    assert pool.acquire() == "1"  # GPU 0 takes no new job while it drains
    assert not pool.has_free()
    pool.release("0")
    assert pool.acquire_whole("0") is True
    assert pool.busy["0"] == 2 and "0" not in pool.reserved
    pool.release("0", whole=True)
    assert pool.busy["0"] == 0 and pool.acquire() == "0"


@pytest.mark.parametrize(("cpus", "slots", "threads"), [(1, 2, "1"), (8, 8, "1"), (8, 2, "4")])
def test_cpu_jobs_get_their_share_of_the_cores_and_at_least_one(
    cpus: int, slots: int, threads: str
) -> None:
    settings = parse_settings({"gpus": [], "n_jobs": slots})
    env = job_env(CPU, settings, slots=slots, parent_pid=1, memory_total_mb=None, cpu_count=cpus)
    assert env["HPSEARCH_CPU_THREADS"] == threads and env["HPSEARCH_GPU"] == ""


def test_a_gpu_job_is_told_its_gpu() -> None:
    settings = parse_settings({"gpus": ["GPU-8a1b"]})
    env = job_env("GPU-8a1b", settings, slots=1, parent_pid=1, memory_total_mb=None, cpu_count=4)
    assert env["HPSEARCH_GPU"] == env["CUDA_VISIBLE_DEVICES"] == "GPU-8a1b"


def test_device_labels() -> None:
    assert (device_label(CPU), device_label("1")) == ("cpu", "gpu 1")


def test_a_pool_needs_devices_and_slots() -> None:
    for devices, slots in (([], 1), (["0"], 0)):
        with pytest.raises(ValueError, match="SlotPool needs groups and slots >= 1"):
            SlotPool(devices, slots)


def test_releasing_what_was_not_taken_is_a_bug() -> None:
    pool = SlotPool(["0"], slots=1)
    for device in ("0", "9"):
        with pytest.raises(RuntimeError, match="without a slot taken"):
            pool.release(device)


def test_round_robin_over_four_devices_skips_the_busy_one_forwards() -> None:
    pool = SlotPool(["0", "1", "2", "3"], slots=1)
    assert [pool.acquire() for _ in range(2)] == ["0", "1"]
    pool.release("0")
    assert pool.acquire() == "2"  # forwards from where it stopped, not back to the free 0
    assert pool.acquire() == "3"
    assert pool.acquire() == "0"  # all four busy again; the turn is back at 1
    pool.release("1")
    pool.release("3")
    pool.release("0")
    pool.acquire()  # 1
    assert pool.acquire() == "3"  # 2 is busy: the next free one forwards, not 0 behind


def test_releasing_one_of_three_slots() -> None:
    pool = SlotPool(["0"], slots=3)
    for _ in range(3):
        pool.acquire()
    pool.release("0")
    assert pool.busy["0"] == 2


def test_a_pool_grows_with_its_cluster_and_never_shrinks() -> None:
    pool = SlotPool(["ray:0"], slots=2)
    assert [pool.acquire(), pool.acquire()] == ["ray:0", "ray:0"] and not pool.has_free()
    pool.grow(["ray:0", "ray:1"], slots=2)  # a node with one more GPU joined
    assert pool.groups == ("ray:0", "ray:1") and pool.busy == {"ray:0": 2, "ray:1": 0}
    assert [pool.acquire(), pool.acquire()] == ["ray:1", "ray:1"] and not pool.has_free()
    pool.grow(["ray:0"], slots=1)  # a node left: the jobs placed keep their slots
    assert pool.groups == ("ray:0", "ray:1") and pool.slots == 2
    cpu = SlotPool(["cpu"], slots=2)
    cpu.grow(["cpu"], slots=6)  # a CPU cluster: more CPUs, more slots on its one device
    assert cpu.slots == 6 and cpu.groups == ("cpu",)
