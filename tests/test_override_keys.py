"""The hpsearch app's keys: a key the trainer never reads is refused in one line with the
nearest known key, before Hydra composes anything (issue 50); keys under `user` are the
user's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpsearch.app import CONFIG_DIR
from hpsearch.errors import ConfigError
from hpsearch.override_keys import check_override_keys
from hpsearch_launcher.api import nearest_key

REFUSED = [
    # The commonest newcomer typo, plain and with the + that Hydra's refusal advises.
    (["--multirun", "learning_rate=1e-3,1e-2"], "learning_rate: no such key; did you mean lr? "),
    (["--multirun", "+learning_rate=1e-3,1e-2"], "learning_rate: no such key; did you mean lr? "),
    (
        ["learning_rate=1e-3"],
        "learning_rate: no such key; did you mean lr? (a key for your own code: "
        "+user.learning_rate=1e-3)",
    ),
    (["batch_size=32"], "batch_size: no such key; did you mean batch? (a key for your own code"),
    (["num_epochs=3"], "num_epochs: no such key; did you mean epochs?"),
    (["model.hiden=[64]"], "model.hiden: no such key; did you mean model.hidden?"),
    (["modle.hidden=[64]"], "modle.hidden: no such key; did you mean model.hidden?"),
    # A key of the model not chosen: cnn has filters, mlp (the default) has not.
    (["model.filters=[8]"], "model.filters: no such key; the keys under model: name, hidden,"),
    (["data=npz", "data.pth=x.npz"], "data.pth: no such key; did you mean data.path?"),
    # A search over a key the config lacks.
    (
        ["--multirun", "hydra/sweeper=hpsearch", "z=interval(0,1)"],
        "z: no such key; the keys: model, data, optimizer, device, lr, batch,",
    ),
    # + on a key the config has: Hydra refuses it only as each job is composed.
    (
        ["--multirun", "+lr=1e-3,1e-2"],
        "+lr: lr is in the config already; set it without +: lr=1e-3,1e-2",
    ),
    (["user.note=a"], "user.note: no such key yet; add a key of your own with +: +user.note=a"),
]


@pytest.mark.parametrize(("args", "message"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_key_the_trainer_never_reads_is_refused(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        check_override_keys(args, Path(CONFIG_DIR))


@pytest.mark.parametrize(
    "args",
    [
        ["--multirun", "lr=1e-3,1e-2", "batch=32,64", "device=cpu"],
        ["model=cnn", "model.filters=[8]"],
        ["--multirun", "model=mlp,cnn", "model.filters=[8]"],  # a key of one of the models
        ["--multirun", "hydra/sweeper=hpsearch", "lr=tag(log,interval(1e-4,1e-1))"],
        ["+user.note=baseline", "+user.run.tag=a", "++user.seen=1"],
        ["hydra.launcher.n_jobs=2", "hydra.job.chdir=false", "+hydra.job.env_set.A=1"],
        ["~data.shape", "data=synthetic"],  # Hydra's own to judge: not key=value
        ["data=synthetic", "data.shape=[28,28]", "data.shape.0=14"],
        ["--help"],
    ],
)
def test_keys_of_the_config_and_of_ones_own_pass(args: list[str]) -> None:
    check_override_keys(args, Path(CONFIG_DIR))


def test_a_config_that_does_not_compose_is_left_to_hydra() -> None:
    check_override_keys(["model=nosuch", "learning_rate=1"], Path(CONFIG_DIR))


@pytest.mark.parametrize(
    ("key", "near"),
    [
        ("learning_rate", "lr"),
        ("batch_size", "batch"),
        ("model.drop_out", "model.dropout"),
        ("optimizer.decay_rates", "optimizer.decay_rate"),
        ("zzz", None),
    ],
)
def test_nearest_key(key: str, near: str | None) -> None:
    known = ["lr", "batch", "model", "model.dropout", "optimizer", "optimizer.decay_rate"]
    assert nearest_key(key, known) == near
