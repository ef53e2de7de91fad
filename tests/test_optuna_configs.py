"""Search configs written for Hydra's Optuna sweeper, in the shapes users copy (issue 45;
tests/apps/migrate), run after one word changes (`override hydra/sweeper: hpsearch`), or are
refused in one line naming the file: Hydra's OptunaSweeper spelled out in `hydra.sweeper._target_`
(lightning-hydra-template), an app-level `hydra/sweeper/optuna.yaml`, a TPE config with every
field, a grid, a storage and study name from interpolations, a group added with `+hparams_search=`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, Runner
from hydra_optuna_venv import hydra_optuna_python  # noqa: F401 - the venv's fixture
from omegaconf import OmegaConf

from hpsearch_launcher.hydra_line import HAS_EXECUTION_WHITELIST
from hpsearch_launcher.migrate_cli import main as migrate_main
from hpsearch_launcher.search.config import TARGET, HpsearchSweeperConf
from hpsearch_launcher.search.hydra_optuna import OPTUNA_TARGET, target_line, unread_sweeper_file
from hpsearch_launcher.search.sweeper_target import adopted

APP = REPO / "tests" / "apps" / "migrate"
SEARCHES = ["template", "tpe_all", "grid", "storage"]


def one_word_changed(tmp_path: Path) -> Path:
    """The app, copied, with `optuna` changed to `hpsearch` in every sweeper override (and in
    extends/'s own sweeper file's defaults list)."""
    app = tmp_path / "app"
    shutil.copytree(APP, app)
    for path in app.rglob("*.yaml"):
        text = path.read_text()
        text = text.replace("/hydra/sweeper: optuna", "/hydra/sweeper: hpsearch")
        text = text.replace("hydra/sweeper: optuna", "hydra/sweeper: hpsearch")
        path.write_text(text.replace("\n  - optuna\n", "\n  - hpsearch\n"))  # extends/
    return app


def run(
    runner: Runner, app: Path, *args: str, python: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(python or runner.python),
            str(app / "app.py"),
            "--multirun",
            "--config-name",
            "config",
            *args,
        ],
        cwd=runner.tmp_path,
        env=runner.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def search_runs(runner: Runner, app: Path, search: str) -> str:
    """`+hparams_search=SEARCH` from the app's conf/: 3 trials and the best one written; its
    output."""
    sweep = runner.tmp_path / "sweep"
    done = run(
        runner,
        app,
        "--config-dir",
        str(app / "conf"),
        f"+hparams_search={search}",
        f"hydra.sweep.dir={sweep}",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out
    assert sorted(p.name for p in sweep.iterdir() if p.name.isdigit()) == ["0", "1", "2"]
    assert (sweep / "optimization_results.yaml").exists()
    return out


def config(sweeper: dict[str, object], typed: bool = True, **hydra: object) -> object:
    node = OmegaConf.merge(OmegaConf.structured(HpsearchSweeperConf), sweeper) if typed else sweeper
    return OmegaConf.create({"hydra": {"sweeper": node, **hydra}})


@pytest.mark.parametrize(
    ("typed", "target", "changed"),
    [
        (True, OPTUNA_TARGET, True),  # hydra/sweeper=hpsearch, Hydra's class spelled out
        (True, TARGET, False),  # hpsearch's own
        (False, OPTUNA_TARGET, False),  # hydra/sweeper=optuna: Hydra's sweeper, as chosen
    ],
)
def test_hydras_class_is_adopted_only_on_hpsearchs_node(
    typed: bool, target: str, changed: bool
) -> None:
    cfg = config({"_target_": target, "n_trials": 3}, typed=typed)
    node = adopted(cfg)
    assert (node is not None) == changed
    if node is not None:
        assert node._target_ == TARGET and node.n_trials == 3
        assert cfg.hydra.sweeper._target_ == OPTUNA_TARGET  # Hydra 1.4 compares it with jobs'


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (f"    _target_: {OPTUNA_TARGET}", True),
        (f"  _target_: '{OPTUNA_TARGET}'  # Hydra's", True),
        (f"# _target_: {OPTUNA_TARGET}", False),
        ("    _target_: optuna.samplers.TPESampler", False),
    ],
)
def test_the_target_line_is_found(line: str, found: bool) -> None:
    assert target_line(f"hydra:\n  sweeper:\n{line}\n") == (3 if found else None)


def test_an_app_level_optuna_yaml_is_named_with_its_fix(tmp_path: Path) -> None:
    (tmp_path / "hydra" / "sweeper").mkdir(parents=True)
    (tmp_path / "hydra" / "sweeper" / "optuna.yaml").write_text("n_trials: 3\n")
    sources = [{"path": str(tmp_path), "schema": "file", "provider": "main"}]
    chosen = config(
        {}, runtime={"choices": {"hydra/sweeper": "hpsearch"}, "config_sources": sources}
    )
    line = unread_sweeper_file(chosen)
    assert line is not None and line.startswith(f"{tmp_path}/hydra/sweeper/optuna.yaml: ")
    assert "hydra/sweeper/search.yaml" in line and "defaults: [hpsearch, _self_]" in line
    # A config of the app's own that extends hpsearch's is chosen: the file is left alone.
    own = config({}, runtime={"choices": {"hydra/sweeper": "search"}, "config_sources": sources})
    assert unread_sweeper_file(own) is None


@pytest.mark.slow
@pytest.mark.parametrize("search", SEARCHES)
def test_each_search_runs_with_one_word_changed(
    search: str, runner: Runner, tmp_path: Path
) -> None:
    app = one_word_changed(tmp_path)
    out = search_runs(runner, app, search)
    warned = [line for line in out.splitlines() if "names Hydra's OptunaSweeper" in line]
    if search == "template":  # one warning line, naming the file and its line
        path = app / "conf" / "hparams_search" / "template.yaml"
        assert len(warned) == 1 and f"{path}:{target_line(path.read_text())}:" in warned[0]
    else:
        assert not warned
    if search == "storage":
        assert (tmp_path / "sweep" / "optuna.db").exists()


@pytest.mark.slow
def test_an_app_level_optuna_yaml_is_refused_in_one_line(runner: Runner, tmp_path: Path) -> None:
    app = one_word_changed(tmp_path)
    sweep = tmp_path / "sweep"
    done = run(runner, app, "--config-dir", str(app / "app_level"), f"hydra.sweep.dir={sweep}")
    assert done.returncode == 2
    path = app / "app_level" / "hydra" / "sweeper" / "optuna.yaml"
    said = [line for line in done.stderr.splitlines() if line.startswith("hpsearch:")]
    assert said == [done.stderr.strip().splitlines()[-1]]  # one line (Hydra 1.4 warns first)
    assert said[0].startswith(f"hpsearch: error: {path}: hydra/sweeper=hpsearch does not read")
    assert not sweep.exists()


def trials(sweep: Path) -> list[dict[str, str]]:
    """Each numbered run's searched parameters (x, y, z), as its overrides.yaml gives them."""
    runs = sorted((p for p in sweep.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    said = [yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) for run in runs]
    return [dict(o.split("=", 1) for o in overrides if o[0] in "xyz") for overrides in said]


@pytest.mark.slow
@pytest.mark.parametrize("search", ["template", "tpe_all", "storage", "extends", "app_level"])
def test_the_same_startup_trials_as_hydras_sweeper(
    search: str,
    runner: Runner,
    tmp_path: Path,
    hydra_optuna_python: Path,  # noqa: F811
) -> None:
    """Hydra's sweeper on the configs as written; hpsearch's on them with the one word changed
    (an app-level hydra/sweeper/optuna.yaml, refused that way, after `hpsearch-migrate --write`;
    Hydra's sweeper reads it as extends/ writes it, the form Hydra's own advice gives since
    1.1: its schema matching refuses optuna.yaml). Each config's 3 trials are its seeded
    sampler's random start-up ones: the same, value for value. (The grid has none: Hydra's
    Optuna 2 grid visits its points in an unseeded random order.)"""
    theirs_app = tmp_path / "theirs"
    shutil.copytree(APP, theirs_app)
    if HAS_EXECUTION_WHITELIST:  # Hydra's sweeper 1.4 refuses the 1.3 field search_space
        tpe_all = theirs_app / "conf" / "hparams_search" / "tpe_all.yaml"
        tpe_all.write_text(tpe_all.read_text().replace("    search_space: null\n", ""))
    if search in ("extends", "app_level"):
        theirs_source, ours_app = ["--config-dir", str(theirs_app / "extends")], tmp_path / "app"
        if search == "app_level":
            shutil.copytree(APP, ours_app)
            assert migrate_main([str(ours_app / "app_level"), "--write"]) == 0
        else:
            ours_app = one_word_changed(tmp_path)
        ours_source = ["--config-dir", str(ours_app / search)]
    else:
        ours_app = one_word_changed(tmp_path)
        group = f"+hparams_search={search}"
        theirs_source = ["--config-dir", str(theirs_app / "conf"), group]
        ours_source = ["--config-dir", str(ours_app / "conf"), group]
    (tmp_path / "optuna").mkdir()  # Hydra's sweeper opens a storage before its sweep dir exists
    swept = f"hydra.sweep.dir={tmp_path / 'optuna'}"
    theirs = run(runner, theirs_app, *theirs_source, swept, python=hydra_optuna_python)
    ours = run(runner, ours_app, *ours_source, f"hydra.sweep.dir={tmp_path / 'hpsearch'}")
    assert theirs.returncode == 0 and ours.returncode == 0, theirs.stderr + ours.stderr
    their_trials = trials(tmp_path / "optuna")
    assert len(their_trials) == 3 and their_trials == trials(tmp_path / "hpsearch")
