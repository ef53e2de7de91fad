"""Config composition of every group, and the checks that run before any training."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import VERSION_BASE
from hydra import compose, initialize_config_dir

from hpsearch.app import CONFIG_DIR, check_group_choices, run_dir_line
from hpsearch.errors import ConfigError
from hpsearch.validate import validate_config
from hpsearch_launcher.config import LauncherSettings
from hpsearch_launcher.plan.ray_settings import RaySettings
from hpsearch_launcher.plan.slurm_settings import SlurmSettings
from hpsearch_launcher.search.config import SearchSettings


def test_defaults(make_cfg) -> None:
    cfg = make_cfg()
    assert (cfg.model.name, cfg.data.name, cfg.optimizer.name, cfg.device.type) == (
        "mlp",
        "digits",
        "adam",
        "auto",
    )
    assert (cfg.lr, cfg.batch, cfg.seed) == (1e-3, 64, 0)
    validate_config(cfg)


@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ("model=cnn", "model.filters", [32, 64]),
        ("model=mlp", "model.hidden", [256, 128]),
        ("data=synthetic", "data.shape", [28, 28]),
        ("optimizer=sgd", "optimizer.momentum", 0.9),
        ("optimizer=adam", "optimizer.decay_rate", 0.95),
        ("device=cpu", "device.type", "cpu"),
        ("device=gpu", "device.type", "gpu"),
        ("lr=1e-2", "lr", 0.01),
        ("batch=32", "batch", 32),
    ],
)
def test_each_group_composes(make_cfg, override: str, key: str, value: object) -> None:
    cfg = make_cfg(override)
    node = cfg
    for part in key.split("."):
        node = node[part]
    assert node == value
    validate_config(cfg)


def test_the_launcher_is_hpsearch_and_job_name_is_set(make_cfg, hydra_restore_singletons) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=["device=cpu"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith("HpsearchLauncher")
    assert cfg.hydra.job.name == "hpsearch"
    assert list(cfg.hydra.launcher.gpus) == []  # device=cpu: no GPU for the launcher either


def test_help_says_what_hpsearch_is_and_its_launcher_settings() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hpsearch", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hpsearch: train a TensorFlow model")
    for text in ("hpsearch-report [SWEEP_DIR]", "jobs_per_gpu", "max_oom_retries", "warm_start"):
        assert text in done.stdout
    # Every setting of the launcher and of the search, from their one declaration.
    listed = re.findall(r"^  (\S+) +\(default ", done.stdout, flags=re.M)
    sections = {"ray": RaySettings, "slurm": SlurmSettings}
    launcher = [f.name for f in dataclasses.fields(LauncherSettings) if f.name != "sections"]
    nested = [f"{n}.{f.name}" for n, cls in sections.items() for f in dataclasses.fields(cls)]
    search = [f.name for f in dataclasses.fields(SearchSettings)]
    assert listed == [*launcher, *nested, *search]
    for text in ('or "auto": as many as their measured memory fits', "memory_keys", "prune "):
        assert text in done.stdout
    assert "== Search settings (with hydra/sweeper=hpsearch: hydra.sweeper.KEY=VALUE) ==" in (
        done.stdout
    )
    assert "model: cnn, mlp" in done.stdout  # Hydra's $APP_CONFIG_GROUPS, filled in
    assert "lr: 0.001" in done.stdout  # and $CONFIG
    assert "Traceback" not in done.stdout + done.stderr


def test_help_install_hints_work_from_a_wheel_install() -> None:
    """`pip install ".[ray]"` works only in a checkout; a wheel user needs the package's name."""
    help_text = (Path(CONFIG_DIR) / "hydra" / "help" / "hpsearch.yaml").read_text()
    targets = re.findall(r"pip install\s+(\S+)", help_text)
    assert targets
    # The install target is the package's name, whatever punctuation follows it in the text.
    assert all(re.fullmatch(r"['\"]?hpsearch\[[a-z,]+\]['\"]?[),;]?", t) for t in targets), targets


@pytest.mark.parametrize(
    ("output_dir", "cwd", "line"),
    [
        ("/home/a/outputs/runs/2026-12-01/10-00-00", "/home/a", "outputs/runs/2026-12-01/10-00-00"),
        ("/scratch/runs/x", "/home/a", "/scratch/runs/x"),  # outside: the absolute path
        ("/home/ab/run", "/home/a", "/home/ab/run"),  # a sibling with a common prefix
    ],
)
def test_a_single_run_names_its_run_dir(output_dir: str, cwd: str, line: str) -> None:
    assert run_dir_line(Path(output_dir), Path(cwd)) == f"hpsearch: run dir {line}"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["lr=-1"], "lr=-1: must be > 0 (e.g. lr=1e-3)"),
        (["lr=0"], "lr=0: must be > 0"),
        (["tensorboard=maybe"], "tensorboard='maybe': must be true or false"),
        (["lr=fast"], "lr='fast': must be a number (e.g. lr=1e-3)"),
        (["batch=0"], "batch=0: must be > 0 (e.g. batch=32)"),
        (["batch=1.5"], "batch=1.5: must be an integer (e.g. batch=32)"),
        (["epochs=0"], "epochs=0: must be > 0"),
        (["split.val=0.6", "split.test=0.5"], "split.val + split.test = 1.1: must be < 1"),
        (["objective.metric=f1"], "objective.metric='f1': must be one of train_loss"),
        (["objective.mode=up"], "objective.mode='up': must be one of max, min"),
        (["model.dropout=1.0"], "model.dropout=1.0: must be in [0, 1)"),
        (["model.hidden=[]"], "model.hidden=[]: needs at least one layer"),
        (["model=cnn", "model.filters=[32,-1]"], "model.filters=-1: must be > 0"),
        (["optimizer.decay_rate=0"], "optimizer.decay_rate=0: must be in (0, 1]"),
        (["optimizer=sgd", "optimizer.momentum=1.5"], "optimizer.momentum=1.5: must be in [0, 1)"),
        (["data=synthetic", "data.n=5"], "data.n=5: needs at least 2 samples per class"),
        (["data=synthetic", "data.shape=[28,0]"], "data.shape=[28, 0]: must be 1 or 2 positive"),
        (["data=npz"], "data.path is not set: data=npz needs the file"),
        (
            ["data=npz", "data.path=/nonexistent/mnist.npz"],
            "data.path='/nonexistent/mnist.npz': no such file",
        ),
    ],
)
def test_bad_values_name_the_value_and_the_fix(
    make_cfg, overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(make_cfg(*overrides))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["model=foo"], "model=foo: no such model (choose from cnn, mlp; e.g. model=cnn)"),
        (["--multirun", "model=mlp,bogus"], "model=bogus: no such model"),
        (["optimizer=rmsprop"], "optimizer=rmsprop: no such optimizer (choose from adam, sgd"),
        (["device=tpu"], "device=tpu: no such device (choose from auto, cpu, gpu"),
        # The right spelling, not the first option: difflib sees no letter of CPU in cpu.
        (
            ["device=CPU"],
            "device=CPU: no such device (choose from auto, cpu, gpu; e.g. device=cpu)",
        ),
        (["model=MLP"], "model=MLP: no such model (choose from cnn, mlp; e.g. model=mlp)"),
        (
            ["optimizer=adm"],
            "optimizer=adm: no such optimizer (choose from adam, sgd; e.g. optimizer=adam)",
        ),
    ],
)
def test_unknown_group_options(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_group_choices(args, Path(CONFIG_DIR))


def test_known_group_options_and_other_keys_pass() -> None:
    check_group_choices(
        [
            "--multirun",
            "model=mlp,cnn",
            "data=digits",
            "lr=1e-3,1e-2",
            "hydra.launcher.n_jobs=2",
            "+extra=1",
        ],
        Path(CONFIG_DIR),
    )


def good_npz(**changes: np.ndarray) -> dict[str, np.ndarray]:
    """A tiny valid MNIST-like layout, with some arrays replaced or (None) left out."""
    arrays = {
        "x_train": np.zeros((30, 4, 4), dtype=np.uint8),
        "y_train": np.arange(30) % 3,
        "x_test": np.zeros((3, 4, 4), dtype=np.uint8),
        "y_test": np.arange(3),
    }
    return {k: v for k, v in (arrays | changes).items() if v is not None}


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (good_npz(x_test=None, y_test=None), "missing keys x_test, y_test"),
        (
            {"images": np.zeros((4, 2))},
            "missing keys x_train, y_train, x_test, y_test (found images",
        ),
        (good_npz(x_train=np.zeros(30)), "x_train has shape (30,): must be (n, features)"),
        (good_npz(x_test=np.zeros((3, 1, 4, 4, 1))), "x_test has shape (3, 1, 4, 4, 1): must be"),
        (good_npz(y_train=np.zeros((30, 1))), "y_train has shape (30, 1): must be 1-D"),
        (good_npz(y_train=np.zeros((30, 3))), "or y_train.argmax(axis=1) for one-hot labels"),
        (good_npz(y_train=np.arange(29)), "x_train has 30 samples but y_train has 29 labels"),
        (good_npz(y_test=np.arange(4)), "x_test has 3 samples but y_test has 4 labels"),
        (
            good_npz(x_test=np.zeros((3, 4, 5))),
            "x_test's samples have shape (4, 5) but x_train's (4, 4)",
        ),
        (good_npz(x_train=np.full((30, 4, 4), "a")), "x_train has dtype <U1: must hold numbers"),
        (good_npz(y_test=np.array([0.0, 1.5, 2.0])), "y_test holds 1.5, not a class index"),
        (good_npz(y_test=np.array([0.0, np.nan, 2.0])), "y_test holds nan, not a class index"),
        (good_npz(y_train=np.arange(30) - 1), "y_train holds -1: labels must be integers >= 0"),
    ],
)
@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_bad_npz_is_one_line_before_training(
    make_cfg, tmp_path: Path, arrays: dict, message: str, save
) -> None:
    path = tmp_path / "bad.npz"
    save(path, **arrays)
    with pytest.raises(ConfigError) as err:
        validate_config(make_cfg("data=npz", f"data.path={path}"))
    assert f"data.path='{path}': " in str(err.value)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda path: path.write_text("not numpy"), r"not a readable \.npz"),
        (lambda path: np.save(path.open("wb"), np.zeros(3)), r"a single array, not an \.npz"),
    ],
)
def test_npz_that_is_not_an_archive(make_cfg, tmp_path: Path, write, message: str) -> None:
    path = tmp_path / "file.npz"
    write(path)
    with pytest.raises(ConfigError, match=message):
        validate_config(make_cfg("data=npz", f"data.path={path}"))


@pytest.mark.parametrize(
    ("arrays", "model"),
    [
        (good_npz(), "cnn"),
        (good_npz(y_train=np.arange(30.0) % 3), "mlp"),  # whole-number float labels
        (good_npz(x_train=np.zeros((30, 16)), x_test=np.zeros((3, 16))), "mlp"),
        (good_npz(x_train=np.zeros((30, 4, 4, 3)), x_test=np.zeros((3, 4, 4, 3))), "cnn"),
    ],
)
def test_good_npz_passes_and_loads(make_cfg, tmp_path: Path, arrays: dict, model: str) -> None:
    from hpsearch.data import load_datasets

    path = tmp_path / "good.npz"
    np.savez(path, **arrays)
    cfg = make_cfg("data=npz", f"data.path={path}", f"model={model}")
    validate_config(cfg)
    assert load_datasets(cfg).input_shape == arrays["x_train"].shape[1:]


def test_cnn_needs_images(make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "flat.npz"
    np.savez(path, **good_npz(x_train=np.zeros((30, 16)), x_test=np.zeros((3, 16))))
    with pytest.raises(ConfigError, match=re.escape("(16,): model=cnn needs images")):
        validate_config(make_cfg("data=npz", f"data.path={path}", "model=cnn"))


def test_npz_headers_are_read_not_the_images(make_cfg, tmp_path: Path, monkeypatch) -> None:
    """The check reads the labels, never x: a 60000-image file costs no image decoding."""
    import numpy.lib.format as npy_format

    path = tmp_path / "mnist.npz"
    np.savez(path, **good_npz())
    read = []
    real = npy_format.read_array
    monkeypatch.setattr(
        npy_format, "read_array", lambda f, **kw: read.append(f.name) or real(f, **kw)
    )
    validate_config(make_cfg("data=npz", f"data.path={path}", "lr=0.5"))
    assert read == ["y_train.npy", "y_test.npy"]


def test_a_changed_npz_is_checked_again(make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    np.savez(path, **good_npz())
    cfg = make_cfg("data=npz", f"data.path={path}")
    validate_config(cfg)
    np.savez(path, **good_npz(y_test=np.arange(3) - 5))
    with pytest.raises(ConfigError, match="y_test holds -5"):
        validate_config(cfg)
