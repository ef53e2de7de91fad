"""What a new user trips over (issue 20): a mistyped launcher key, GPUs this machine does not
have, an output dir that cannot be made, and the dirs a refused run left behind. Each is
refused in one line, `hpsearch: error: ...`, exit status 2, with nothing made on disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Runner, simulated_gpus_env
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from hpsearch.app import check_launcher_keys
from hpsearch.preflight import device_problem
from hpsearch_launcher.output_dir import OutputDirError, dirs_to_make, remove_made
from hpsearch_launcher.plan.settings import LauncherSettingsError

# ---- a mistyped launcher key, with `+` or without ------------------------------------------


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        (
            "hydra.launcher.jobs_per_gpus=2",
            "jobs_per_gpus: no such setting; did you mean hydra.launcher.jobs_per_gpu?",
        ),
        (
            "+hydra.launcher.jobs_per_gpus=2",
            "jobs_per_gpus: no such setting; did you mean hydra.launcher.jobs_per_gpu?",
        ),
        ("++hydra.launcher.n_job=2", "n_job: no such setting; did you mean hydra.launcher.n_jobs?"),
        (
            "hydra.launcher.ray.adress=auto",
            "ray.adress: no such setting; did you mean hydra.launcher.ray.address?",
        ),
    ],
)
def test_a_mistyped_launcher_key_is_refused_with_the_nearest_name(arg: str, message: str) -> None:
    with pytest.raises(LauncherSettingsError) as err:
        check_launcher_keys(["--multirun", "lr=1e-3,1e-2", arg])
    assert str(err.value) == f"hydra.launcher.{message}"


def test_launcher_keys_that_are_settings_pass() -> None:
    check_launcher_keys(
        [
            "hydra.launcher.gpus=[0]",
            "hydra.launcher.jobs_per_gpu=2",
            "+hydra.launcher.env.MY_VAR=1",  # below a mapping setting: the user's own keys
            "+hydra.launcher.ray.init.num_gpus=2",
            "hydra.launcher.ray.address=auto",
            "hydra.launcher._target_=x",
            "hydra.launcher.jobs_per_gpu=1,2",  # Hydra's to refuse (no sweeps of hydra.*)
        ]
    )


def test_another_launchers_keys_are_its_own() -> None:
    check_launcher_keys(["hydra/launcher=basic", "hydra.launcher.jobs_per_gpus=2"])


# ---- the device a run asks for, against the GPUs it could get ---------------------------


def config(
    device: str,
    gpus: object = "auto",
    *,
    mode: RunMode = RunMode.MULTIRUN,
    backend: str = "local",
    env_set: dict[str, str] | None = None,
) -> DictConfig:
    """A job's config as the preflight sees it, hydra node included: only what it reads."""
    hydra = {"mode": mode, "launcher": {"gpus": gpus, "backend": backend}, "job": {}}
    hydra["job"] = {"env_set": env_set or {}}
    return OmegaConf.create({"device": {"type": device}, "hydra": hydra})


NO_DRIVER = "device=gpu: no GPU found here (no NVIDIA driver answers, and CUDA_VISIBLE_DEVICES"
DEVICE_CASES = [
    # config, environ, NVML's GPUs, the refusal (None: fine)
    (config("cpu", [7]), {}, ["7"], "device=cpu with hydra.launcher.gpus=[7]: each job would"),
    (config("cpu", [0, 1]), {}, ["0", "1"], "device=cpu with hydra.launcher.gpus=[0,1]"),
    (config("cpu", []), {}, ["0"], None),
    (config("cpu"), {}, ["0"], None),  # auto: the job hides the GPU
    (config("gpu"), {}, [], NO_DRIVER),
    (
        config("gpu"),
        {"CUDA_VISIBLE_DEVICES": ""},
        ["0"],
        "device=gpu: CUDA_VISIBLE_DEVICES='' hides every",
    ),
    (
        config("gpu"),
        {"CUDA_VISIBLE_DEVICES": "-1"},
        ["0"],
        "device=gpu: CUDA_VISIBLE_DEVICES='-1' hides",
    ),
    (config("gpu"), {}, ["0"], None),
    (config("gpu"), {"CUDA_VISIBLE_DEVICES": "0"}, [], None),  # no NVML: taken at its word
    (config("gpu", []), {}, ["0"], "device=gpu with hydra.launcher.gpus=[]: the launcher runs"),
    (config("gpu", [3]), {}, [], None),  # listed: the launcher checks them against NVML
    (config("gpu", backend="ray"), {}, [], None),  # the cluster's GPUs, not this machine's
    (config("auto", [7]), {}, [], None),
    # A single run: no launcher; this process's GPUs, with the job's env_set.
    (config("gpu", mode=RunMode.RUN), {}, [], NO_DRIVER),
    (config("gpu", mode=RunMode.RUN, env_set={"CUDA_VISIBLE_DEVICES": "1"}), {}, [], None),
    (config("cpu", [7], mode=RunMode.RUN), {}, [], None),
]


@pytest.mark.parametrize(("cfg", "environ", "gpus", "refusal"), DEVICE_CASES)
def test_a_device_the_run_cannot_get_is_refused_before_it_starts(
    cfg: DictConfig, environ: dict[str, str], gpus: list[str], refusal: str | None
) -> None:
    problem = device_problem(cfg, environ, lambda: gpus)
    if refusal is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(refusal) and "\n" not in problem


# ---- output dirs: made only where they can be, removed only where this run made them ----


def test_dirs_to_make_lists_the_missing_dirs_outermost_first(tmp_path: Path) -> None:
    assert dirs_to_make(tmp_path, "hydra.sweep.dir") == []
    assert dirs_to_make(tmp_path / "a" / "b", "hydra.sweep.dir") == [
        tmp_path / "a",
        tmp_path / "a" / "b",
    ]
    assert list(tmp_path.iterdir()) == []  # the probe of the parent left nothing


def unmakeable(tmp_path: Path) -> list[tuple[Path, str]]:
    """Dirs that cannot be made, as root too (root passes every mode bit)."""
    (tmp_path / "afile").write_text("")
    return [
        (tmp_path / "afile" / "sub", f"cannot make it: {tmp_path / 'afile'} is not a directory"),
        (
            Path("/proc/hpsearch-test/sweep"),
            "cannot make it: cannot write in /proc (it takes no new entries: a kernel "
            "filesystem such as /proc or /sys)",
        ),
    ]


def test_a_dir_that_cannot_be_made_is_refused_in_one_line(tmp_path: Path) -> None:
    for path, reason in unmakeable(tmp_path):
        with pytest.raises(OutputDirError) as err:
            dirs_to_make(path, "hydra.sweep.dir")
        message = str(err.value)
        assert message.startswith(f"hydra.sweep.dir={path}: {reason}"), message
        assert message.endswith("set hydra.sweep.dir to a directory you can write in")


@pytest.fixture
def immutable(tmp_path: Path):
    """A dir no one, root included, may write in (`chattr +i`); skipped where chattr fails."""
    path = tmp_path / "immutable"
    path.mkdir()
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i: {done.stderr.decode().strip()}")
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_immutable_dir_is_refused(immutable: Path) -> None:
    with pytest.raises(OutputDirError, match="cannot write in it \\(Operation not permitted\\)"):
        dirs_to_make(immutable, "hydra.sweep.dir")
    with pytest.raises(OutputDirError, match=f"cannot make it: cannot write in {immutable} "):
        dirs_to_make(immutable / "sweep", "hydra.sweep.dir")


def test_remove_made_takes_only_what_this_run_made(tmp_path: Path) -> None:
    litter = {"multirun.yaml"}.__contains__
    made = dirs_to_make(tmp_path / "outputs" / "day" / "time", "hydra.sweep.dir")
    made[-1].mkdir(parents=True)
    (made[-1] / "multirun.yaml").write_text("x")
    assert remove_made(made, lambda p: litter(str(p)))
    assert list(tmp_path.iterdir()) == []  # the dirs above it that it made went too

    made[-1].mkdir(parents=True)
    (made[-1] / "results.csv").write_text("job\n")  # not the refused run's: all stays
    assert not remove_made(made, lambda p: litter(str(p)))
    assert (made[-1] / "results.csv").exists()

    (made[-1] / "results.csv").unlink()
    (made[1] / "other-time").mkdir()  # another run's dir beside it: that one, and above, stay
    assert remove_made(made, lambda p: litter(str(p)))
    assert not made[-1].exists() and (made[1] / "other-time").is_dir()


# ---- end to end: refused in one line, and the working dir as it was -----------------------


def listing(root: Path) -> dict[str, bytes | None]:
    """Everything under `root`: each file's bytes, each dir (None)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        found[rel] = None if path.is_dir() else path.read_bytes()
    return found


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command printed (its whole output), checked as such."""
    assert result.returncode == 2, result.stdout
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("hpsearch: error: ")
    return lines[0]


SWEEP = ["-m", "hpsearch", "--multirun", "lr=0.001,0.01", "epochs=1"]
RUN = ["-m", "hpsearch", "epochs=1"]
NONE = simulated_gpus_env({"HPS_FAKE_GPUS": "none"})  # no NVIDIA driver, on any machine
TWO = simulated_gpus_env({"HPS_FAKE_GPUS": "2"})
NOT_MLPS = ["model=cnn,mlp", "model.filters=[8],[16]", "device=cpu"]
HYDRAS = "Could not override 'model.filters'. To append to your config use +model.filters=[8]"
TYPO = "learning_rate: no such key; did you mean lr? (a key for your own code: +user.learning_"
REFUSED = [
    # item 1: a mistyped launcher key, plain (Hydra's six lines before) and with `+`
    (
        [*SWEEP, "device=cpu", "hydra.launcher.jobs_per_gpus=2"],
        None,
        "hydra.launcher.jobs_per_gpus: no such setting; did you mean hydra.launcher.jobs_per_gpu?",
    ),
    (
        [*SWEEP, "device=cpu", "+hydra.launcher.jobs_per_gpus=2"],
        None,
        "hydra.launcher.jobs_per_gpus: no such setting; did you mean hydra.launcher.jobs_per_gpu?",
    ),
    # item 2: GPUs this machine does not have
    ([*SWEEP, "hydra.launcher.gpus=[7]"], NONE, "hydra.launcher.gpus=[7]: no NVIDIA driver or"),
    ([*SWEEP, "hydra.launcher.gpus=[7]"], TWO, "hydra.launcher.gpus=[7]: no GPU 7 on this"),
    (
        [*SWEEP, "device=cpu", "hydra.launcher.gpus=[1]"],
        TWO,
        "job 0 (lr=0.001): device=cpu with hydra.launcher.gpus=[1]: each job would take a GPU",
    ),
    ([*SWEEP, "device=gpu"], NONE, f"job 0 (lr=0.001): {NO_DRIVER}"),
    ([*RUN, "device=gpu"], NONE, NO_DRIVER),
    # item 3: an output dir that cannot be made (as root too)
    (
        [*SWEEP, "device=cpu", "hydra.sweep.dir=afile/sub"],
        None,
        "hydra.sweep.dir=afile/sub: cannot make it: {tmp}/afile is not a directory",
    ),
    (
        [*SWEEP, "device=cpu", "hydra.sweep.dir=/proc/hpsearch/sweep"],
        None,
        "hydra.sweep.dir=/proc/hpsearch/sweep: cannot make it: cannot write in /proc",
    ),
    (
        [*RUN, "device=cpu", "hydra.run.dir=afile/sub"],
        None,
        "hydra.run.dir=afile/sub: cannot make it: {tmp}/afile is not a directory",
    ),
    # item 4: refused by a launcher setting, by an app value, a single run
    (
        [*SWEEP, "device=cpu", "hydra.launcher.jobs_per_gpu=0"],
        None,
        "hydra.launcher.jobs_per_gpu=0: must be an integer >= 1",
    ),
    (["-m", "hpsearch", "--multirun", "lr=-1,1e-3", "device=cpu"], None, "job 0 (lr=-1): lr=-1"),
    ([*RUN, "lr=-1", "device=cpu"], None, "lr=-1: must be > 0 (e.g. lr=1e-3)"),
    # item 5 (issue 50): a key the trainer never reads, in the words of the nearest one; Hydra's
    # own refusal of a swept one left multirun.yaml behind, and its advice (+) was let through.
    ([*SWEEP, "device=cpu", "learning_rate=1e-3,1e-2"], None, TYPO),
    ([*SWEEP, "device=cpu", "+learning_rate=1e-3,1e-2"], None, TYPO),
    ([*RUN, "device=cpu", "learning_rate=1e-3"], None, TYPO),
    (
        ["-m", "hpsearch", "--multirun", "+epochs=1,2", "device=cpu"],
        None,
        "+epochs: epochs is in the config already; set it without +: epochs=1,2",
    ),
    (
        ["-m", "hpsearch", "--multirun", "hydra/sweeper=hpsearch", "z=interval(0,1)"],
        None,
        "z: no such key; the keys: model, data,",
    ),
    # Hydra's own refusal of a job's config (a key of one model, swept over both), one line.
    (["-m", "hpsearch", "--multirun", *NOT_MLPS], None, HYDRAS),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "message"), REFUSED, ids=[" ".join(a[3:]) for a, _, _ in REFUSED]
)
def test_refused_in_one_line_with_nothing_made(
    runner: Runner, tmp_path: Path, args: list[str], env: dict[str, str] | None, message: str
) -> None:
    (tmp_path / "afile").write_text("a file where a dir would go\n")
    before = listing(tmp_path)
    line = refusal(runner.run(args, env=env, timeout=120))
    assert line.startswith(f"hpsearch: error: {message.format(tmp=tmp_path)}"), line
    assert listing(tmp_path) == before  # no outputs/, no multirun.yaml, no .hydra/


@pytest.mark.slow
def test_a_job_config_hydra_cannot_compose_is_refused_in_any_app(
    runner: Runner, tmp_path: Path, marks: Path
) -> None:
    before = listing(tmp_path)
    line = refusal(runner.run(runner.probe_sweep(marks, "nosuch=1,2"), timeout=120))
    assert line == (
        "hpsearch: error: Could not override 'nosuch'. To append to your config use +nosuch=1"
    )
    assert listing(tmp_path) == before  # no sweep/, no multirun.yaml


@pytest.mark.slow
def test_the_console_script_refuses_a_typo_the_same_way(runner: Runner, tmp_path: Path) -> None:
    script = str(Path(sys.executable).parent / "hpsearch")
    result = runner.run([script, "--multirun", "learning_rate=1e-3,1e-2"], timeout=120)
    assert refusal(result).startswith(f"hpsearch: error: {TYPO}")
    assert listing(tmp_path) == {}


@pytest.mark.slow
def test_a_key_of_ones_own_goes_through_under_user(runner: Runner) -> None:
    """The documented way through: +user.<key> reaches the job's config, untouched."""
    result = runner.run(["-m", "hpsearch", "+user.note=baseline", "--cfg", "job"], timeout=120)
    assert result.returncode == 0, result.stdout
    assert "user:\n  note: baseline\n" in result.stdout


@pytest.mark.slow
def test_an_immutable_sweep_dir_is_refused_in_one_line(
    runner: Runner, immutable: Path, tmp_path: Path
) -> None:
    result = runner.run([*SWEEP, "device=cpu", f"hydra.sweep.dir={immutable}/sweep"], timeout=120)
    assert f"cannot make it: cannot write in {immutable} (Operation not" in refusal(result)


def earlier_sweep(sweep: Path) -> None:
    """A sweep dir as an earlier sweep of lr=1e-3 left it."""
    (sweep / "lr=1e-3" / ".hydra").mkdir(parents=True)
    (sweep / "lr=1e-3" / "metrics.json").write_text('{"status": "completed"}\n')
    (sweep / "multirun.yaml").write_text("hydra:\n  mode: MULTIRUN\n# the earlier sweep's\n")
    (sweep / "results.csv").write_text(
        "job,lr,status,objective,run_dir,config_hash\n0,1e-3,completed,0.9,lr=1e-3,ab12\n"
    )
    # No .hpsearch-lock: a sweep that let go of its dir removed it.


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lr=-1,1e-3"], "job 1 (lr=-1): lr=-1: must be > 0"),
        (["lr=-1,1e-3", "hydra.launcher.resume=false"], "job 0 (lr=-1): lr=-1"),
        (["lr=1e-3,1e-2", "hydra.launcher.jobs_per_gpu=0"], "hydra.launcher.jobs_per_gpu=0"),
        (NOT_MLPS[:2], HYDRAS),
    ],
)
def test_a_refusal_leaves_an_earlier_sweep_dir_as_it_was(
    runner: Runner, tmp_path: Path, args: list[str], message: str
) -> None:
    """Not even its multirun.yaml, which the sweeper rewrites before the launcher is called,
    nor its results.csv, which resume=false would set aside."""
    earlier_sweep(tmp_path / "sweep")
    before = listing(tmp_path)
    command = ["-m", "hpsearch", "--multirun", *args, "device=cpu", "hydra.sweep.dir=sweep"]
    assert refusal(runner.run(command, timeout=120)).startswith(f"hpsearch: error: {message}")
    assert listing(tmp_path) == before


@pytest.mark.slow
def test_a_sweep_into_an_existing_empty_dir_leaves_it_empty(runner: Runner, tmp_path: Path) -> None:
    (tmp_path / "sweep").mkdir()
    command = [*SWEEP[:3], "lr=-1,1e-3", "device=cpu", "hydra.sweep.dir=sweep"]
    refusal(runner.run(command, timeout=120))
    assert os.listdir(tmp_path / "sweep") == []
