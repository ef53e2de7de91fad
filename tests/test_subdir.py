"""hydra.sweep.subdir set anywhere is the user's choice; only Hydra's untouched default gets run
dirs named from the overrides. In-process compositions, then sweeps of a small app."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, Runner
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.config_search_path import SearchPathQuery
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from hpsearch_launcher.plan.jobs import subdir_is_default

APP = REPO / "tests" / "apps" / "subdir"

# Hydra's default value, so only where it is set can tell.
SETS_SUBDIR = "# @package _global_\nhydra:\n  sweep:\n    subdir: ${hydra.job.num}\n"
PRIMARY = "defaults:\n  - override hydra/launcher: hpsearch\n  - _self_\nx: 0\n"


@pytest.fixture
def extra_dir(tmp_path: Path) -> Path:
    """A --config-dir of the user's own: a group option and a primary config that set the
    subdir, and a primary config whose hydra.searchpath adds a dir with another such option."""
    extra = tmp_path / "extra"
    (extra / "layout").mkdir(parents=True)
    (extra / "layout" / "mine.yaml").write_text(SETS_SUBDIR)
    (extra / "hydra" / "output").mkdir(parents=True)  # a Hydra group option of the user's
    (extra / "hydra" / "output" / "mine.yaml").write_text(
        "# @package hydra\nsweep:\n  dir: sweep\n  subdir: ${hydra.job.num}\n"
    )
    (extra / "own.yaml").write_text(PRIMARY + "hydra:\n  sweep:\n    subdir: ${hydra.job.num}\n")
    (tmp_path / "far" / "layout").mkdir(parents=True)
    (tmp_path / "far" / "layout" / "far.yaml").write_text(SETS_SUBDIR)
    (extra / "searching.yaml").write_text(
        PRIMARY + f"hydra:\n  searchpath:\n    - file://{tmp_path / 'far'}\n"
    )
    return extra


@pytest.fixture
def names_runs(hydra_restore_singletons: None, extra_dir: Path) -> Iterator[Callable[..., bool]]:
    """Whether the launcher would name this sweep's runs from their overrides."""

    def check(config_name: str, *overrides: str) -> bool:
        GlobalHydra.instance().clear()
        search_path = create_config_search_path(str(APP / "conf"))
        search_path.prepend(  # as `--config-dir` adds it
            provider="command-line",
            path=f"file://{extra_dir}",
            anchor=SearchPathQuery(provider="schema"),
        )
        hydra = Hydra.create_main_hydra2(task_name="app", config_search_path=search_path)
        cfg = hydra.compose_config(config_name, list(overrides), run_mode=RunMode.MULTIRUN)
        return subdir_is_default(cfg, hydra.config_loader)

    yield check
    GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    ("config_name", "overrides", "named"),
    [
        ("plain", [], True),
        ("plain", ["x=1,2"], True),
        ("plain", ["+layout=elsewhere"], True),  # the same key under another node
        ("numbered", [], False),  # Hydra's default value, set in the primary config
        ("named", [], False),
        ("grouped", [], False),  # a config group in the defaults list (@package hydra.sweep)
        ("plain", ["+layout=numbered", "x=1,2"], False),  # a group chosen on the command line
        ("plain", ["+layout=mine"], False),  # a group in a --config-dir
        ("own", [], False),  # a primary config in a --config-dir
        ("searching", ["+layout=far"], False),  # a group in a dir of hydra.searchpath
        ("plain", ["hydra.sweep.subdir=${hydra.job.num}"], False),  # the command line
        ("plain", ["hydra/output=mine"], False),  # a Hydra override choosing the user's option
    ],
)
def test_an_explicit_subdir_anywhere_is_the_users(
    names_runs: Callable[..., bool], config_name: str, overrides: list[str], named: bool
) -> None:
    assert names_runs(config_name, *overrides) is named


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "overrides", "dirs"),
    [
        (["--config-name=plain"], [], ["x=1", "x=2"]),
        (["--config-name=numbered"], [], ["0", "1"]),
        (["--config-name=named"], [], ["run0", "run1"]),
        (["--config-name=plain"], ["hydra.sweep.subdir=cli${hydra.job.num}"], ["cli0", "cli1"]),
        (["--config-name=plain", "--config-dir={extra}"], ["+layout=mine"], ["0", "1"]),
    ],
)
def test_run_dirs_as_the_configs_ask(
    runner: Runner,
    tmp_path: Path,
    extra_dir: Path,
    options: list[str],
    overrides: list[str],
    dirs: list[str],
) -> None:
    options = [o.replace("{extra}", str(extra_dir)) for o in options]
    args = [str(APP / "app.py"), "--multirun", *options, "x=1,2", *overrides]
    result = runner.run(args, timeout=120)
    assert result.returncode == 0, result.stdout
    sweep = tmp_path / "sweep"
    frame = pd.read_csv(sweep / "results.csv")
    assert [Path(d).name for d in frame["run_dir"]] == dirs
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == dirs
    assert all((sweep / d / ".hydra" / "config.yaml").exists() for d in dirs)
