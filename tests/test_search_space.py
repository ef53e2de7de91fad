"""The hpsearch sweeper's search space: hydra-optuna-sweeper's grammar -> Optuna distributions,
a trial's values -> the job's overrides, a results.csv cell -> a trial's value."""

from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from hpsearch_launcher.hydra_line import RANGE_STOP_INCLUDED as STOP
from hpsearch_launcher.search.space import GRAMMAR, SearchSpaceError, grid_of, parse_space


@pytest.mark.parametrize(
    ("override", "distribution"),
    [
        ("lr=interval(0.1,0.5)", FloatDistribution(0.1, 0.5)),
        ("lr=interval(1,10)", FloatDistribution(1.0, 10.0)),  # Hydra's interval is a float one
        ("n=int(interval(1,8))", IntDistribution(1, 8)),
        ("lr=tag(log,interval(1e-4,1e-1))", FloatDistribution(1e-4, 1e-1, log=True)),
        ("n=tag(log,int(interval(1,64)))", IntDistribution(1, 64, log=True)),
        # range: as the line's hydra-optuna-sweeper searches it, stop included on 1.3 only.
        ("x=range(0,50)", IntDistribution(0, 50 if STOP else 49)),
        ("x=range(0,50,10)", IntDistribution(0, 50 if STOP else 40, step=10)),
        ("x=range(0,45,10)", IntDistribution(0, 40, step=10)),  # stop off the step
        ("x=range(10,0,-3)", IntDistribution(1, 10, step=3)),
        ("x=range(10,1,-3)", IntDistribution(1 if STOP else 4, 10, step=3)),
        ("x=range(0,1,0.25)", FloatDistribution(0.0, 1.0 if STOP else 0.75, step=0.25)),
        ("x=range(0.1,1.0,0.1)", FloatDistribution(0.1, 1.0 if STOP else 0.9, step=0.1)),
        ("x=range(0,1,0.3)", FloatDistribution(0.0, 0.9, step=0.3)),
        ("x=range(-5.5,5.5,step=0.5)", FloatDistribution(-5.5, 5.5 if STOP else 5.0, step=0.5)),
        ("batch=choice(32,64,128)", CategoricalDistribution([32, 64, 128])),
        ("batch=32,64,128", CategoricalDistribution([32, 64, 128])),
        ("model=choice(mlp,cnn)", CategoricalDistribution(["mlp", "cnn"])),
        ("flag=choice(true,false)", CategoricalDistribution([True, False])),
        ("mix=choice(1,0.5,a)", CategoricalDistribution([1, 0.5, "a"])),
        ("x=shuffle(range(3))", None),  # its values, in any order
    ],
)
def test_each_form_gives_its_distribution(override: str, distribution: object | None) -> None:
    space = parse_space(None, [override])
    (param,) = space.params.values()
    if distribution is None:
        assert isinstance(param.distribution, CategoricalDistribution)
        assert sorted(param.distribution.choices) == [0, 1, 2]  # type: ignore[type-var]
    else:
        assert param.distribution == distribution
    assert space.fixed == ()


def test_fixed_values_params_and_the_command_line_together() -> None:
    space = parse_space(
        {"lr": "tag(log, interval(1e-4, 1e-1))", "epochs": 3, "model": "choice(mlp, cnn)"},
        ["model=cnn", "+extra=choice(a,b)", "seed=7", "~gone"],
    )
    # The command line wins: model is fixed there; the fixed overrides keep their text.
    assert list(space.params) == ["lr", "extra"]
    assert space.fixed == ("epochs=3", "model=cnn", "seed=7", "~gone")
    assert space.params["extra"].key == "+extra"  # the job's override needs the +
    overrides = space.overrides({"lr": 0.001, "extra": "b"})
    assert overrides == ("epochs=3", "model=cnn", "seed=7", "~gone", "lr=0.001", "+extra=b")


@pytest.mark.parametrize(
    ("override", "value", "text"),
    [
        ("x=choice('a b','x=y',c)", "a b", r"x=a\ b"),  # escaped: Hydra reads it back as one value
        ("x=choice('a b','x=y',c)", "x=y", r"x=x\=y"),
        ("x=choice([1,2],3)", "[1,2]", "x=[1,2]"),  # a list option is its override text
        ("x=choice(1,2)", 2, "x=2"),
        ("x=interval(0,1)", 0.25, "x=0.25"),
        ("x=tag(log,interval(1e-6,1))", 1e-05, "x=1e-05"),
    ],
)
def test_a_value_becomes_an_override_hydra_reads_back(
    override: str, value: object, text: str
) -> None:
    (param,) = parse_space(None, [override]).params.values()
    assert param.override(value) == text
    # results.csv keeps the override's text after `=`: it reads back as the same value.
    assert param.value_of(text.partition("=")[2]) == value


@pytest.mark.parametrize(
    ("override", "cell"),
    [
        ("x=range(0,10)", "11"),  # outside the range
        ("x=range(0,10,2)", "3"),  # not on its step
        ("x=interval(0,1)", "1.5"),
        ("x=interval(0,1)", "abc"),
        ("x=choice(a,b)", "c"),
        ("x=int(interval(1,4))", "2.5"),
    ],
)
def test_a_cell_outside_the_space_is_no_value(override: str, cell: str) -> None:
    (param,) = parse_space(None, [override]).params.values()
    assert param.value_of(cell) is None


@pytest.mark.parametrize(
    ("where", "text", "problem"),
    [
        ("cli", "x=range(5,0)", "range(5,0,1) holds no value"),
        ("cli", "x=interval(5,1)", "`low <= high` must hold"),
        ("cli", "x=tag(log,interval(0,1))", "`low > 0` must hold for `log=True`"),
        ("cli", "x=tag(log,range(1,5))", "a log scale is for interval(...)"),
        ("cli", "x=tag(log,choice(1,2))", "a log scale is for interval(...)"),
        ("cli", "x=tag(foo,choice(1,2))", "unknown tag foo (only log is known)"),
        ("cli", "x=choice(1,1)", "1 is given twice"),
        ("cli", "x=choice(", "no viable alternative"),
        ("cli", "x=glob(*)", "glob(...) is not a sweep this sweeper knows"),
        ("params", "x=interval(1,0)", "`low <= high` must hold"),
    ],
)
def test_a_bad_value_is_one_line_naming_it_and_the_grammar(
    where: str, text: str, problem: str
) -> None:
    key, _, value = text.partition("=")
    with pytest.raises(SearchSpaceError) as err:
        if where == "cli":
            parse_space(None, [text])
        else:
            parse_space({key: value}, [])
    message = str(err.value)
    place = "on the command line" if where == "cli" else "in hydra.sweeper.params"
    assert message.startswith(f"{text} ({place}): {problem}")
    assert message.endswith(f"; a searched value is one of {GRAMMAR}")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("override", "grid"),
    [
        # docs/search.md: range(a,b) includes b on Hydra 1.3, as the line's
        # hydra-optuna-sweeper searches it; on 1.4 it does not, as Hydra's range.
        ("x=range(1,3)", [1, 2, 3] if STOP else [1, 2]),
        ("x=range(1,7,3)", [1, 4, 7] if STOP else [1, 4]),
        ("x=range(0,1,0.25)", [0.0, 0.25, 0.5, 0.75, 1.0][: None if STOP else -1]),
        ("x=choice(a,b)", ["a", "b"]),
        ("x=int(interval(2,4))", [2, 3, 4]),
    ],
)
def test_the_grid_samplers_grid_is_each_ranges_values(override: str, grid: list) -> None:
    assert grid_of(parse_space(None, [override])) == {"x": grid}
