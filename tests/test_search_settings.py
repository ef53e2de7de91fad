"""The hpsearch sweeper's settings, sampler, pruner and storage: each made as named, each bad
value one line that names it, the rule and a fix."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import optuna
import pytest

from hpsearch_launcher.search.algorithms import make_pruner, make_sampler
from hpsearch_launcher.search.config import HpsearchSweeperConf, SearchSettings
from hpsearch_launcher.search.sampler_config import SAMPLER_CONFIGS
from hpsearch_launcher.search.settings import SearchSettingsError, parse_settings
from hpsearch_launcher.search.study import default_study_name, open_storage, open_study
from hpsearch_launcher.setting_checks import is_whole, nearest, refusal


def sampler(name: str, **fields: Any) -> dict[str, Any]:
    """hydra.sweeper.sampler as Hydra composes `hydra/sweeper/sampler=<name>` with `fields`."""
    import dataclasses

    return dataclasses.asdict(SAMPLER_CONFIGS[name]()) | fields


def test_the_hydra_config_is_the_settings_with_target_first() -> None:
    from dataclasses import fields

    names = [f.name for f in fields(HpsearchSweeperConf)]
    assert names[:3] == ["_target_", "_recursive_", "defaults"]
    assert names[3:] == [f.name for f in fields(SearchSettings)]


@pytest.mark.parametrize(
    ("given", "direction"),
    [
        ({}, ("minimize",)),
        ({"direction": "max"}, ("maximize",)),  # objective.mode's words work too
        ({"direction": ["maximize", "min"]}, ("maximize", "minimize")),
    ],
)
def test_directions(given: dict[str, Any], direction: tuple[str, ...]) -> None:
    assert parse_settings(given).direction == direction


@pytest.mark.parametrize(
    ("given", "mode", "direction"),
    [
        ({}, "max", ("maximize",)),  # the one place the user said it: SweepSummary's mode
        ({}, "min", ("minimize",)),
        ({}, None, ("minimize",)),  # said nowhere: Optuna's default
        ({"direction": "max"}, "max", ("maximize",)),
        ({"direction": "maximize"}, None, ("maximize",)),
        ({"direction": ["maximize", "min"]}, "min", ("maximize", "minimize")),  # not compared
    ],
)
def test_the_direction_follows_the_summary_callbacks_mode(
    given: dict[str, Any], mode: str | None, direction: tuple[str, ...]
) -> None:
    assert parse_settings(given, mode).direction == direction


@pytest.mark.parametrize(("given", "mode"), [("minimize", "max"), ("max", "min")])
def test_a_direction_against_the_summary_callbacks_mode_is_one_line(given: str, mode: str) -> None:
    with pytest.raises(SearchSettingsError) as err:
        parse_settings({"direction": given}, mode)
    other = "min" if mode == "max" else "max"
    assert str(err.value) == (
        f"hydra.sweeper.direction={given!r}: contradicts the SweepSummary callback's "
        f"mode={mode} (the leaderboard would rank the other way): drop "
        f"hydra.sweeper.direction (it follows the callback's mode), or set the callback's "
        f"mode: {other}"
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"n_trials": 0}, "hydra.sweeper.n_trials=0: must be an integer >= 1 (e.g. "),
        ({"n_jobs": True}, "hydra.sweeper.n_jobs=True: must be an integer >= 1"),
        ({"timeout": -1.0}, "hydra.sweeper.timeout=-1: must be a number of seconds > 0, or null"),
        ({"max_failure_rate": 1.5}, "hydra.sweeper.max_failure_rate=1.5: must be a number in"),
        ({"direction": "up"}, "hydra.sweeper.direction='up': must be minimize or maximize"),
        ({"direction": []}, "hydra.sweeper.direction=[]: must be minimize or maximize"),
        # hpsearch's earlier spelling: one line pointing to Hydra's
        ({"sampler": "tpx"}, "hydra.sweeper.sampler='tpx': the sampler is a config group, as"),
        ({"sampler": "randm"}, "choose it with hydra/sweeper/sampler=random (in YAML: - "),
        ({"seed": 3}, "hydra.sweeper.seed: moved to hydra.sweeper.sampler.seed=123"),
        ({"sampler_args": {}}, "hydra.sweeper.sampler_args: moved to hydra.sweeper.sampler."),
        ({"race_at_end": 3}, "hydra.sweeper.race_at_end: moved to hydra.sweeper.race=3"),
        ({"pruner": "medain"}, "(e.g. hydra.sweeper.pruner=median)"),
        ({"sampler": sampler("tpe", seed=-1)}, "hydra.sweeper.sampler.seed=-1: must be an integer"),
        (
            {"sampler": sampler("motpe")},
            "hydra/sweeper/sampler=motpe: Optuna 4 removed MOTPESampler; use "
            "hydra/sweeper/sampler=tpe (TPESampler handles several objectives)",
        ),
        ({"n_jobs": 0}, "hydra.sweeper.n_jobs=0: must be an integer >= 1"),
        ({"custom_search_space": ""}, "hydra.sweeper.custom_search_space='': must be a non-"),
        ({"pruner_args": {"n_warmup_steps": 2}}, "pruner_args={'n_warmup_steps': 2}: given, but"),
        ({"patience": -2}, "hydra.sweeper.patience=-2: must be an integer >= 0"),
        ({"min_delta": -0.1}, "hydra.sweeper.min_delta=-0.1: must be a number >= 0"),
        ({"race": -1}, "hydra.sweeper.race=-1: must be an integer >= 0"),
        (
            {"direction": ["max", "min"], "pruner": "median"},
            "Optuna prunes single-objective searches only, and this one has 2",
        ),
        ({"storage": ""}, "hydra.sweeper.storage='': must be a non-empty string, or null"),
        (
            {"n_trial": 5},
            "hydra.sweeper.n_trial: no such setting; did you mean hydra.sweeper.n_trials?",
        ),
    ],
)
def test_a_bad_setting_is_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(SearchSettingsError) as err:
        parse_settings(given)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ({}, optuna.samplers.TPESampler),
        ({"sampler": sampler("random", seed=3)}, optuna.samplers.RandomSampler),
        ({"sampler": sampler("cmaes")}, optuna.samplers.CmaEsSampler),
        ({"sampler": sampler("nsgaii", population_size=10)}, optuna.samplers.NSGAIISampler),
        ({"sampler": sampler("tpe", n_startup_trials=3)}, optuna.samplers.TPESampler),
        ({"sampler": sampler("tpe", multivariate=True)}, optuna.samplers.TPESampler),
        ({"sampler": sampler("qmc", seed=1)}, optuna.samplers.QMCSampler),
        ({"sampler": sampler("grid")}, optuna.samplers.GridSampler),
        (
            {
                "sampler": sampler(
                    "cmaes", independent_sampler={"_target_": "optuna.samplers.RandomSampler"}
                )
            },
            optuna.samplers.CmaEsSampler,
        ),
    ],
)
def test_samplers(given: dict[str, Any], kind: type) -> None:
    assert type(make_sampler(parse_settings(given), grid={"x": [1, 2]})) is kind


def test_tpe_counts_running_trials_as_bad_guesses_unless_told_otherwise() -> None:
    """Trials run at once, asked as slots free: TPE's constant_liar by default (no warning,
    whatever Optuna calls it), the user's own value kept."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = make_sampler(parse_settings({"sampler": sampler("tpe", seed=1)}))
    assert isinstance(made, optuna.samplers.TPESampler) and made._constant_liar
    told = parse_settings({"sampler": sampler("tpe", constant_liar=False)})
    assert not make_sampler(told)._constant_liar


def test_a_seeded_sampler_repeats_its_choices() -> None:
    def first(seed: int) -> list[float]:
        settings = parse_settings({"sampler": sampler("tpe", seed=seed)})
        study = optuna.create_study(sampler=make_sampler(settings))
        dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
        return [study.ask(dist).params["x"] for _ in range(3)]

    assert first(5) == first(5) != first(6)


def test_gp_needs_pytorch(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(SearchSettingsError) as err:
        make_sampler(parse_settings({"sampler": sampler("gp")}))
    assert str(err.value) == (
        "hydra/sweeper/sampler=gp: Optuna's GPSampler needs the torch package, which is not "
        "installed (pip install torch) (e.g. hydra/sweeper/sampler=tpe)"
    )


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ({}, optuna.pruners.NopPruner),
        ({"pruner": "median", "pruner_args": {"n_warmup_steps": 2}}, optuna.pruners.MedianPruner),
        (
            {"pruner": "percentile", "pruner_args": {"percentile": 25}},
            optuna.pruners.PercentilePruner,
        ),
        ({"pruner": "successive_halving"}, optuna.pruners.SuccessiveHalvingPruner),
        (
            {"pruner": "hyperband", "pruner_args": {"max_resource": 9}},
            optuna.pruners.HyperbandPruner,
        ),
        ({"pruner": "threshold", "pruner_args": {"lower": 0.1}}, optuna.pruners.ThresholdPruner),
        ({"pruner": "median", "patience": 2}, optuna.pruners.PatientPruner),
        ({"patience": 3, "min_delta": 0.01}, optuna.pruners.PatientPruner),
    ],
)
def test_pruners(given: dict[str, Any], kind: type) -> None:
    assert type(make_pruner(parse_settings(given))) is kind


@pytest.mark.parametrize(
    ("given", "warmup"),
    [
        ({"pruner": "median"}, 1),  # Optuna's is 0: a trial judged on its first report
        ({"pruner": "percentile", "pruner_args": {"percentile": 25}}, 1),
        ({"pruner": "median", "pruner_args": {"n_warmup_steps": 0}}, 0),  # the user's wins
        ({"pruner": "median", "pruner_args": {"n_startup_trials": 2}}, 1),
        ({"pruner": "median", "patience": 2}, 1),  # inside the PatientPruner
    ],
)
def test_the_median_pruners_judge_no_trial_on_its_first_report(
    given: dict[str, Any], warmup: int
) -> None:
    """As the grid's prune_warmup=2 reports (test_pruning): step 0, one epoch, is noise."""
    pruner = make_pruner(parse_settings(given))
    pruner = getattr(pruner, "_wrapped_pruner", None) or pruner
    assert pruner._n_warmup_steps == warmup  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"sampler": sampler("random", n_startup=3)},
            "hydra.sweeper.sampler={'n_startup': 3}: RandomSampler (hydra/sweeper/sampler=random)"
            " takes no n_startup; it takes ",
        ),
        (
            {"pruner": "percentile"},
            "hydra.sweeper.pruner_args={}: PercentilePruner (pruner=percentile) refused them: ",
        ),
        (
            {"pruner": "median", "pruner_args": {"n_warmup_steps": -1}},
            "hydra.sweeper.pruner_args={'n_warmup_steps': -1}: MedianPruner (pruner=median) "
            "refused them: Number of warmup steps cannot be negative",
        ),
    ],
)
def test_bad_arguments_are_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(SearchSettingsError) as err:
        settings = parse_settings(given)
        make_sampler(settings)
        make_pruner(settings)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        (None, optuna.storages.InMemoryStorage),
        ("sqlite:///{tmp}/study.db", optuna.storages.RDBStorage),
        ("{tmp}/deeper/journal.log", optuna.storages.JournalStorage),
    ],
)
def test_storages(url: str | None, kind: type, tmp_path: Path) -> None:
    storage = open_storage(url and url.format(tmp=tmp_path))
    assert isinstance(storage, kind)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("study.db", "must be an RDB URL (sqlite:///study.db, postgresql://...) or a journal"),
        ("nosuchdb://x", "cannot be opened: "),
        ("sqlite:////nonexistent/dir/study.db", "cannot be opened: "),
    ],
)
def test_a_bad_storage_is_one_line(url: str, message: str) -> None:
    with pytest.raises(SearchSettingsError) as err:
        open_storage(url)
    assert str(err.value).startswith(f"hydra.sweeper.storage={url!r}: {message}")
    assert "\n" not in str(err.value)


def test_a_stored_study_keeps_its_direction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"

    def study(direction: str) -> optuna.Study:
        settings = parse_settings({"storage": url, "study_name": "s", "direction": direction})
        return open_study(
            settings,
            open_storage(url),
            make_sampler(settings),
            make_pruner(settings),
            tmp_path,
        )

    study("maximize")
    assert study("max").study_name == "s"  # loaded, same direction
    with pytest.raises(SearchSettingsError) as err:
        study("minimize")  # Optuna alone would load it and quietly maximize
    assert str(err.value) == (
        f"hydra.sweeper.direction='minimize': the study 's' in {url} was made to maximize: keep "
        "its direction, or name another study (hydra.sweeper.study_name)"
    )


def test_hydras_plugin_scan_finds_the_sweeper_and_imports_no_optuna() -> None:
    """Every Hydra process scans the plugins: the sweeper is there, Optuna (and its SQLAlchemy)
    only once a search starts."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from hydra.core.plugins import Plugins\n"
        "from hydra.plugins.sweeper import Sweeper\n"
        "assert 'HpsearchSweeper' in [p.__name__ for p in Plugins.instance().discover(Sweeper)]\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted({'optuna', 'sqlalchemy', 'alembic'} & loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]" and out.stderr == ""


@pytest.mark.parametrize(
    ("value", "least", "whole"),
    [(0, 0, True), (3, 1, True), (0, 1, False), (True, 0, False), (2.0, 1, False), ("2", 1, False)],
)
def test_is_whole(value: Any, least: int, whole: bool) -> None:
    assert is_whole(value, least) is whole


def test_a_refusal_names_the_value_as_typed_and_the_fix() -> None:
    assert refusal("sweeper", "timeout", -1.0, "must be >= 0", "timeout=60") == (
        "hydra.sweeper.timeout=-1: must be >= 0 (e.g. hydra.sweeper.timeout=60)"
    )
    assert refusal("launcher", "gpus", 0.5, "no") == "hydra.launcher.gpus=0.5: no"
    assert nearest("n_trails", ["n_trials", "n_jobs"]) == "n_trials"
    assert nearest("zzz", ["n_trials"]) is None


def test_the_nearest_option_sets_case_aside_first() -> None:
    """`CPU` shares no letter with `cpu` for difflib: the option of another case is the one."""
    assert nearest("CPU", ["auto", "cpu", "gpu"]) == "cpu"
    assert nearest("Median", ["none", "median", "percentile"]) == "median"
    assert nearest("N_TRAILS", ["n_trials", "n_jobs"]) == "n_trials"


def test_an_unnamed_study_is_named_after_the_sweep_dir_readably(tmp_path: Path) -> None:
    """Its last two parts and a hash of the whole path: not the absolute path itself (which
    every listing of the storage printed), and two dirs of the same name stay two studies."""
    storage = open_storage(None)
    one = tmp_path / "a" / "2026-12-07" / "10-00-00"
    other = tmp_path / "b" / "2026-12-07" / "10-00-00"
    name = default_study_name(storage, one)
    assert re.fullmatch(r"2026-12-07/10-00-00-[0-9a-f]{8}", name), name
    assert default_study_name(storage, one) == name != default_study_name(storage, other)


def test_a_study_an_earlier_version_named_after_the_absolute_path_is_continued(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    optuna.create_study(storage=url, study_name=str(tmp_path.resolve()))
    assert default_study_name(open_storage(url), tmp_path) == str(tmp_path.resolve())


def first_rung_verdicts(pruner: optuna.pruners.BasePruner, n: int = 4) -> list[bool]:
    """n trials, each worse than the last, judged at step 1 (their second report) while
    none has completed: which are pruned."""
    study = optuna.create_study(direction="maximize", pruner=pruner)
    verdicts = []
    for i in range(n):
        trial = study.ask()
        trial.report(1.0 - i / 10, 0)
        trial.report(1.0 - i / 10, 1)
        verdicts.append(trial.should_prune())
    return verdicts


@pytest.mark.parametrize(
    ("given", "verdicts"),
    [
        # Optuna's "auto" resources: nothing is pruned until a trial completes (issue 49).
        ({"pruner": "successive_halving", "pruner_args": {"min_resource": "auto"}}, [False] * 4),
        ({"pruner": "hyperband", "pruner_args": {"max_resource": "auto"}}, [False] * 4),
        # hpsearch's: the worse ones are pruned at the first rung, from the first trials on.
        ({"pruner": "successive_halving"}, [False, True, True, True]),
        ({"pruner": "hyperband"}, [False, True, True, True]),
    ],
)
def test_the_rung_pruners_judge_before_any_trial_completes(
    given: dict[str, Any], verdicts: list[bool]
) -> None:
    assert first_rung_verdicts(make_pruner(parse_settings(given))) == verdicts


@pytest.mark.parametrize(
    ("args", "brackets"),
    [
        ({}, 1),  # hpsearch's: asynchronous successive halving
        ({"min_resource": 3}, 1),  # max_resource follows min_resource
        ({"max_resource": 27}, 4),  # given: Optuna's brackets, floor(log3(27)) + 1
        ({"max_resource": 27, "reduction_factor": 9}, 2),
    ],
)
def test_hyperband_has_one_bracket_unless_max_resource_is_given(
    args: dict[str, Any], brackets: int
) -> None:
    pruner = make_pruner(parse_settings({"pruner": "hyperband", "pruner_args": args}))
    first_rung_verdicts(pruner, n=1)  # its brackets are counted on its first judgement
    assert pruner._n_brackets == brackets  # type: ignore[attr-defined]
