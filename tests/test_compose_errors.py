"""A mistyped hpsearch setting in any app (issue 46, item 4): Hydra composes hydra.launcher and
hydra.sweeper before either plugin runs, and its refusal advised `+` for a typo; hpsearch's
words come instead, in one line. A plain key under a mapping setting is added, not refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, Runner
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException

from hpsearch_launcher.compose_errors import install
from hpsearch_launcher.plan.refusal import LauncherSettingsError
from hpsearch_launcher.search.refusal import SearchSettingsError

FOREIGN = REPO / "tests" / "apps" / "foreign"
APP_CONFIG = """\
defaults:
  - override hydra/launcher: {launcher}
  - override hydra/sweeper: hpsearch
  - _self_
x: 1.0
hydra:
  sweep:
    dir: sweep
{hydra}"""


@pytest.fixture
def config_dir(tmp_path: Path) -> Iterator[Path]:
    install()  # the plugin's scan does it in any Hydra process; said here for the reader
    GlobalHydra.instance().clear()
    yield tmp_path
    GlobalHydra.instance().clear()


def composed(config_dir: Path, overrides: list[str], launcher: str = "hpsearch", hydra: str = ""):
    (config_dir / "config.yaml").write_text(APP_CONFIG.format(launcher=launcher, hydra=hydra))
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose("config", overrides, return_hydra_config=True)


REFUSED = [
    (
        ["hydra.launcher.n_job=2"],
        "hydra.launcher.n_job: no such setting; did you mean hydra.launcher.n_jobs?",
    ),
    (
        ["hydra.launcher.jobs_per_gpus=2"],
        "hydra.launcher.jobs_per_gpus: no such setting; did you mean hydra.launcher.jobs_per_gpu?",
    ),
    (
        ["hydra.sweeper.n_trial=2"],
        "hydra.sweeper.n_trial: no such setting; did you mean hydra.sweeper.n_trials?",
    ),
    (
        ["hydra.launcher.n_jobs=two"],
        "hydra.launcher.n_jobs='two': must be an integer, or null (e.g. hydra.launcher.n_jobs=2)",
    ),
    (
        ["hydra.launcher.allow_growth=maybe"],
        "hydra.launcher.allow_growth='maybe': must be true "
        "or false (e.g. hydra.launcher.allow_growth=true)",
    ),
    (
        ["hydra.sweeper.sampler.seed=x"],
        "hydra.sweeper.sampler.seed='x': must be an integer, or "
        "null (e.g. hydra.sweeper.sampler.seed=2)",
    ),
]


@pytest.mark.parametrize(("overrides", "words"), REFUSED, ids=[o[0] for o, _ in REFUSED])
def test_a_mistyped_setting_on_the_command_line_gets_hpsearchs_words(
    config_dir: Path, overrides: list[str], words: str
) -> None:
    with pytest.raises((LauncherSettingsError, SearchSettingsError), match=f"^{re.escape(words)}$"):
        composed(config_dir, overrides)


@pytest.mark.parametrize(
    ("hydra", "words"),
    [
        (
            "  launcher:\n    n_job: 2\n",
            "hydra.launcher.n_job: no such setting; did you mean hydra.launcher.n_jobs?",
        ),
        (
            "  sweeper:\n    n_trial: 2\n",
            "hydra.sweeper.n_trial: no such setting; did you mean hydra.sweeper.n_trials?",
        ),
        ("  launcher:\n    n_jobs: two\n", "hydra.launcher.n_jobs='two': must be an integer"),
    ],
)
def test_a_mistyped_setting_in_the_apps_yaml_gets_hpsearchs_words(
    config_dir: Path, hydra: str, words: str
) -> None:
    with pytest.raises((LauncherSettingsError, SearchSettingsError), match=f"^{re.escape(words)}"):
        composed(config_dir, [], hydra=hydra)


def test_a_key_under_a_mapping_setting_needs_no_plus(config_dir: Path) -> None:
    """The keys of pruner_args and env are the user's: Hydra's struct mode wanted a `+`."""
    cfg = composed(
        config_dir,
        ["hydra.sweeper.pruner_args.n_warmup_steps=2", "hydra.launcher.env.FOO=1", "x=2"],
    )
    assert cfg.hydra.sweeper.pruner_args == {"n_warmup_steps": 2}
    assert cfg.hydra.launcher.env.FOO == "1"
    assert cfg.x == 2


def test_another_launchers_settings_keep_hydras_words(config_dir: Path) -> None:
    with pytest.raises(ConfigCompositionException, match="To append to your config use"):
        composed(config_dir, ["hydra.launcher.n_job=2"], launcher="basic")


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("hydra.launcher.jobs_per_gpus=2", "did you mean hydra.launcher.jobs_per_gpu?"),
        ("hydra.launcher.n_jobs=two", "hydra.launcher.n_jobs='two': must be an integer"),
    ],
)
def test_a_foreign_apps_mistyped_setting_is_refused_in_one_line(
    runner: Runner, tmp_path: Path, typed: str, words: str
) -> None:
    """End to end: the line, exit status 2, and no sweep dir made."""
    result = runner.run([str(FOREIGN / "app.py"), "--multirun", "alpha=0.1,0.2", typed])
    assert result.returncode == 2, result.stdout
    said = [ln for ln in result.stdout.splitlines() if ln.startswith("hpsearch:")]
    assert said == result.stdout.splitlines()[-1:]  # one line, the last (Hydra 1.4 warns first)
    [line] = said
    assert line.startswith(f"hpsearch: error: {typed.split('=')[0]}") and words in line
    assert not (tmp_path / "sweep").exists()
