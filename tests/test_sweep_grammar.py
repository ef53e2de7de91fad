"""The search grammar given to Hydra's basic sweeper (issue 46): `interval()` is refused by
the launcher's setup() in one line naming the value and `hydra/sweeper=hpsearch`, exit status
2, the disk as it was (Hydra's own: a 16-line traceback, exit 1, an empty sweep dir)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Runner
from omegaconf import OmegaConf

from hpsearch_launcher.plan.refusal import LauncherSettingsError
from hpsearch_launcher.sweep_grammar import BASIC_SWEEPER, check_basic_sweep, search_only_value


@pytest.mark.parametrize(
    ("overrides", "found"),
    [
        (["lr=tag(log,interval(1e-4,1e-1))"], "lr=tag(log,interval(1e-4,1e-1))"),
        (["x=1,2", "y=interval(0,1)"], "y=interval(0,1)"),
        (["x=1,2", "y=range(1,3)", "z=choice(a,b)", "w=tag(log,choice(1,2))"], None),
        (["x=3"], None),
        (["x=interval(0"], None),  # Hydra's own parse error, in its own words
    ],
)
def test_search_only_values(overrides: list[str], found: str | None) -> None:
    assert search_only_value(overrides) == found


def config(sweeper: str, *task: str) -> OmegaConf:
    return OmegaConf.create(
        {"hydra": {"sweeper": {"_target_": sweeper}, "overrides": {"task": list(task)}}}
    )


def test_only_the_basic_sweeper_is_refused_the_grammar() -> None:
    with pytest.raises(LauncherSettingsError) as err:
        check_basic_sweep(config(BASIC_SWEEPER, "lr=interval(0,1)"))  # type: ignore[arg-type]
    assert str(err.value).startswith("lr=interval(0,1): interval() is the search grammar")
    assert "hydra/sweeper=hpsearch" in str(err.value)
    target = "hydra_plugins.hpsearch_launcher.hpsearch_sweeper.HpsearchSweeper"
    check_basic_sweep(config(target, "lr=interval(0,1)"))  # type: ignore[arg-type]


LINE = (
    "hpsearch: error: {value}: interval() is the search grammar, which Hydra's basic sweeper "
    "cannot run (it sweeps lists, choice() and range()): search it with hydra/sweeper=hpsearch "
    "(in YAML: - override hydra/sweeper: hpsearch), or give a list of values"
)


@pytest.mark.slow
def test_the_hpsearch_app_refuses_the_grammar_without_the_sweeper(
    runner: Runner, tmp_path: Path
) -> None:
    value = "lr=tag(log,interval(1e-4,1e-1))"
    done = runner.run(["-m", "hpsearch", "--multirun", value, "device=cpu"])
    assert done.returncode == 2, done.stdout
    assert done.stdout.strip() == LINE.format(value=value)
    assert list(tmp_path.rglob("*")) == []


@pytest.mark.slow
def test_any_app_is_refused_the_grammar_without_the_sweeper(
    runner: Runner, tmp_path: Path, marks: Path
) -> None:
    done = runner.run(runner.probe_sweep(marks, "x=interval(0,1)"))
    assert done.returncode == 2, done.stdout
    assert done.stdout.strip() == LINE.format(value="x=interval(0,1)")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["marks"]
