"""Hostile input across the launcher and the train config: a clear error before any job
starts, or a safe run whose directory stays inside the sweep dir. No traceback walls."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Runner, read_records

pytestmark = pytest.mark.slow

SAFE_VALUES = [
    pytest.param("x/../../../evil", "x%2F..%2F..%2F..%2Fevil", id="path-escape"),
    pytest.param("..", "..", id="dotdot"),
    pytest.param("a b", "a%20b", id="space"),
    pytest.param('a"=0"', "a%22=0%22", id="double-quotes"),
    pytest.param("a; echo foo", "a%3B%20echo%20foo", id="semicolon"),
    pytest.param("$(touch pwned)", "%24%28touch%20pwned%29", id="shell"),
    pytest.param("naïve😀", "naïve%F0%9F%98%80", id="unicode"),
    pytest.param("", "", id="empty"),
    # Cut to fit a path component, then "~" and a hash of the whole name (test_naming.py).
    pytest.param("y" * 300, "y" * 226 + "~", id="300-chars"),
]


@pytest.mark.parametrize(("value", "escaped"), SAFE_VALUES)
def test_hostile_values_run_safely_inside_the_sweep_dir(
    runner: Runner, marks: Path, tmp_path: Path, value: str, escaped: str
) -> None:
    quoted = "'" + value.replace("'", "\\'") + "'"
    result = runner.run(runner.probe_sweep(marks, f"+tag=plain,{quoted}"))
    assert result.returncode == 0, result.stdout
    assert len(read_records(marks)) == 2
    sweep = (tmp_path / "sweep").resolve()
    dirs = [p for p in sweep.iterdir() if p.is_dir()]
    assert len(dirs) == 2 and all(d.resolve().parent == sweep for d in dirs)
    names = {d.name for d in dirs}
    assert "tag=plain" in names
    if escaped.endswith("~"):  # cut: the head, then a 12-digit hash
        (cut,) = names - {"tag=plain"}
        assert cut.startswith(f"tag={escaped}") and len(cut) == len(f"tag={escaped}") + 12
    else:
        assert f"tag={escaped}" in names
    assert all(len(n.encode()) <= 255 for n in names)
    assert not (tmp_path / "pwned").exists()
    assert not list(tmp_path.glob("**/evil"))


PROBE_ERRORS = [
    (["hydra.launcher.gpus=[-1]"], "hydra.launcher.gpus=[-1]: -1 is not a GPU id"),
    (["hydra.launcher.gpus=[0,0]"], "hydra.launcher.gpus=[0, 0]: GPU 0 listed twice"),
    (["hydra.launcher.gpus=[gpu0]"], "'gpu0' is not a GPU id"),
    (["hydra.launcher.memory_fraction=1.5"], "hydra.launcher.memory_fraction=1.5: must be"),
    (["hydra.launcher.memory_fraction=-0.1"], "hydra.launcher.memory_fraction=-0.1: must be"),
    (
        [
            "hydra.launcher.gpus=[0]",
            "hydra.launcher.jobs_per_gpu=3",
            "hydra.launcher.memory_fraction=0.5",
        ],
        "3 x 0.5 = 1.5 > 1",
    ),
    (["hydra.launcher.jobs_per_gpu=0"], "hydra.launcher.jobs_per_gpu=0: must be an integer >= 1"),
    (["hydra.launcher.timeout=-1"], "hydra.launcher.timeout=-1: must be a number of seconds > 0"),
    (["hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs=0: must be an integer >= 1"),
    (["hydra.launcher.max_retries=-2"], "hydra.launcher.max_retries=-2: must be an integer >= 0"),
    (["nosuchkey=1"], "Could not override 'nosuchkey'"),
    # hpsearch's words for any app's mistyped setting, not Hydra's `+` hint (issue 46).
    (["hydra.launcher.bogus=1"], "hydra.launcher.bogus: no such setting; did you mean"),
    (["hydra/launcher=nosuch"], "Could not find 'hydra/launcher/nosuch'"),
    (["hydra.launcher.jobs_per_gpu=1,2"], "Sweeping over Hydra's configuration is not supported"),
]


@pytest.mark.parametrize(("args", "message"), PROBE_ERRORS, ids=[a[0] for a, _ in PROBE_ERRORS])
def test_bad_launcher_input_fails_before_any_job(
    runner: Runner, marks: Path, args: list[str], message: str
) -> None:
    result = runner.run(runner.probe_sweep(marks, "x=0,1", *args))
    hydras = ("Could not", "Sweeping over Hydra's configuration")
    if not message.startswith(hydras):  # the launcher's own check
        assert result.returncode == 2, result.stdout
        line = next(x for x in result.stdout.splitlines() if message in x)
        assert line.startswith("hpsearch: error: hydra.launcher.")
        assert "HYDRA_FULL_ERROR" not in result.stdout
    else:  # Hydra's
        assert result.returncode == 1, result.stdout
    assert message in result.stdout
    assert "Traceback" not in result.stdout
    assert not (marks / "starts.log").exists(), "a job started"


APP_ERRORS = [
    (["model=nosuch"], 2, "hpsearch: error: model=nosuch: no such model"),
    (["lr=-1,1e-3"], 2, "hpsearch: error: job 0 (lr=-1): lr=-1: must be > 0 (e.g. lr=1e-3)"),
    (["batch=abc,32"], 2, "hpsearch: error: job 0 (batch=abc): batch='abc': must be an integer"),
    (
        ["data=npz", "data.path=/no/such.npz", "lr=1e-3,1e-2"],
        2,
        "data.path='/no/such.npz': no such file",
    ),
    (
        ["data=synthetic", "data.shape=[28,-1]", "lr=1e-3,1e-2"],
        2,
        "data.shape=[28, -1]: must be 1 or 2 positive integers",
    ),
    (["objective.metric=f1", "lr=1e-3,1e-2"], 2, "objective.metric='f1': must be one of"),
]


@pytest.mark.parametrize(
    ("args", "code", "message"), APP_ERRORS, ids=[a[0] for a, _, _ in APP_ERRORS]
)
def test_bad_train_config_fails_before_any_job(
    runner: Runner, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    result = runner.run(
        ["-m", "hpsearch", "--multirun", *args, "device=cpu", "hydra.sweep.dir=sweep"]
    )
    assert result.returncode == code, result.stdout
    assert message in result.stdout
    assert "Traceback" not in result.stdout
    assert " start " not in result.stdout, "a job started"
