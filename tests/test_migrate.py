"""`hpsearch-migrate CONFIG_DIR [--write]`: configs of every shape in issue 45 (tests/apps/migrate)
and Hydra's own examples (tests/apps/hydra_optuna, put back in Hydra's words) shown as a diff,
changed only with --write, and run with hpsearch afterwards."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib
from conftest import REPO, Runner
from test_optuna_configs import APP, SEARCHES, run, search_runs

from hpsearch_launcher.migrate_cli import main
from hpsearch_launcher.search.hydra_optuna import OPTUNA_TARGET
from hpsearch_launcher.search.migration import (
    extends_optuna,
    migrate_app_sweeper_file,
    migrate_config,
    migrate_sweeper_extension,
)

HYDRAS_EXAMPLES = REPO / "tests" / "apps" / "hydra_optuna"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("  - override /hydra/sweeper: optuna\n", "  - override /hydra/sweeper: hpsearch\n"),
        (
            "  - override hydra/sweeper: optuna.yaml  # x\n",
            "  - override hydra/sweeper: hpsearch  # x\n",
        ),
        (
            f"  sweeper:\n    _target_: {OPTUNA_TARGET}\n    n_trials: 3\n",
            "  sweeper:\n    n_trials: 3\n",
        ),
        (
            "# python app.py -m hydra/sweeper=optuna\n",
            "# python app.py -m hydra/sweeper=hpsearch\n",
        ),
        (
            "  - override /hydra/sweeper/sampler: tpe\n",
            "  - override /hydra/sweeper/sampler: tpe\n",
        ),
    ],
)
def test_a_config_is_rewritten_line_by_line(before: str, after: str) -> None:
    assert migrate_config(before).text == after


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("  - override /hydra/sweeper/sampler: motpe", "the motpe sampler is not converted"),
        ("  mode: MULTIRUN", "refused by Hydra 1.4"),
    ],
)
def test_what_cannot_be_converted_is_said(line: str, said: str) -> None:
    (note,) = migrate_config(f"hydra:\n{line}\n").notes
    assert note.startswith("line 2: ") and said in note


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("n_trials: 3\n", "defaults:\n  - hpsearch\n  - _self_\nn_trials: 3\n"),
        (
            f"# mine\n_target_: {OPTUNA_TARGET}\ndefaults:\n  - sampler: random\nn_trials: 3\n",
            "# mine\ndefaults:\n  - hpsearch\n  - override sampler: random\n  - _self_\n"
            "n_trials: 3\n",
        ),
    ],
)
def test_an_app_level_sweeper_file_extends_hpsearchs(before: str, after: str) -> None:
    assert migrate_app_sweeper_file(before).text == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "defaults:\n  - optuna  # Hydra's\n  - override sampler: random\n  - _self_\n",
            "defaults:\n  - hpsearch  # Hydra's\n  - override sampler: random\n  - _self_\n",
        ),
        (
            f"defaults: [optuna.yaml, _self_]\n_target_: {OPTUNA_TARGET}\nn_trials: 3\n",
            "defaults: [hpsearch, _self_]\nn_trials: 3\n",
        ),
    ],
)
def test_a_sweeper_file_extending_hydras_extends_hpsearchs(before: str, after: str) -> None:
    assert extends_optuna(before)
    assert migrate_sweeper_extension(before).text == after


def test_optuna_elsewhere_than_a_sweeper_file_is_left_alone(tmp_path: Path) -> None:
    """`- optuna` in a defaults list outside hydra/sweeper/ names a config of some other group;
    hydra/sweeper/app_optuna.yaml is the only file that extends Hydra's node."""
    shutil.copytree(APP / "extends", tmp_path / "conf")
    (tmp_path / "conf" / "model").mkdir()
    (tmp_path / "conf" / "model" / "big.yaml").write_text("defaults:\n  - optuna\n")
    assert main([str(tmp_path / "conf"), "--write"]) == 0
    assert (tmp_path / "conf" / "model" / "big.yaml").read_text() == "defaults:\n  - optuna\n"
    sweeper = (tmp_path / "conf" / "hydra" / "sweeper" / "app_optuna.yaml").read_text()
    assert "  - hpsearch\n  - override sampler: random\n" in sweeper


def test_it_shows_the_diff_and_changes_nothing_without_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(APP / "app_level", tmp_path / "conf")
    before = {p: p.read_text() for p in (tmp_path / "conf").rglob("*.yaml")}
    assert main([str(tmp_path / "conf")]) == 0
    out = capsys.readouterr().out
    assert "+++ b/hydra/sweeper/search.yaml" in out and "+  - override hydra/sweeper: search" in out
    assert out.strip().endswith("2 file(s) would change (run again with --write)")
    assert {p: p.read_text() for p in (tmp_path / "conf").rglob("*.yaml")} == before


def test_hydras_examples_become_the_ones_hpsearch_runs(tmp_path: Path) -> None:
    """Hydra's example configs as Hydra ships them, migrated: byte for byte the copies that
    tests/test_hydra_optuna_port.py runs with hpsearch."""
    theirs = tmp_path / "hydra_optuna"
    shutil.copytree(HYDRAS_EXAMPLES, theirs, ignore=shutil.ignore_patterns("*.py"))
    for path in theirs.rglob("*.yaml"):
        path.write_text(path.read_text().replace("sweeper: hpsearch", "sweeper: optuna"))
    assert main([str(theirs), "--write"]) == 0
    for path in theirs.rglob("*.yaml"):
        assert path.read_text() == (HYDRAS_EXAMPLES / path.relative_to(theirs)).read_text()


def test_the_command_is_installed_as_hpsearch_migrate() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["hpsearch-migrate"] == "hpsearch_launcher.migrate_cli:main"


def migrated(runner: Runner, tmp_path: Path, config_dir: str) -> Path:
    app = tmp_path / "app"
    shutil.copytree(APP, app)
    done = subprocess.run(
        [runner.python, "-m", "hpsearch_launcher.migrate_cli", str(app / config_dir), "--write"],
        env=runner.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "optuna" not in "".join(
        line
        for p in (app / config_dir).rglob("*.yaml")
        for line in p.read_text().splitlines()
        if "override" in line
    )
    return app


@pytest.mark.slow
@pytest.mark.parametrize("search", SEARCHES)
def test_each_migrated_search_runs_with_hpsearch(
    search: str, runner: Runner, tmp_path: Path
) -> None:
    out = search_runs(runner, migrated(runner, tmp_path, "conf"), search)
    assert "OptunaSweeper" not in out  # nothing left to warn about


@pytest.mark.slow
def test_a_migrated_app_level_sweeper_file_runs_with_hpsearch(
    runner: Runner, tmp_path: Path
) -> None:
    app = migrated(runner, tmp_path, "app_level")
    assert not (app / "app_level" / "hydra" / "sweeper" / "optuna.yaml").exists()
    sweep = tmp_path / "sweep"
    done = run(runner, app, "--config-dir", str(app / "app_level"), f"hydra.sweep.dir={sweep}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RandomSampler" in done.stdout + done.stderr  # its own sampler entry kept
    assert (sweep / "optimization_results.yaml").exists()
