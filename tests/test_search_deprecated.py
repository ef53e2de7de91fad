"""hydra-optuna-sweeper 1.1's `search_space` (search/deprecated.py): each entry searches the
values its `type` says: an int entry ints, a float entry floats, on the scale and step given."""

from __future__ import annotations

from typing import Any

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from hpsearch_launcher.search.deprecated import params_of_search_space
from hpsearch_launcher.search.space import SearchSpaceError, parse_space


@pytest.mark.parametrize(
    ("entry", "distribution"),
    [
        ({"type": "int", "low": 1, "high": 4}, IntDistribution(1, 4)),
        ({"type": "int", "low": 1, "high": 9, "step": 2}, IntDistribution(1, 9, step=2)),
        ({"type": "int", "low": 1, "high": 8, "log": True}, IntDistribution(1, 8, log=True)),
        ({"type": "int", "low": 1.0, "high": 4.0}, IntDistribution(1, 4)),  # YAML's 1.0
        ({"type": "float", "low": 1, "high": 4}, FloatDistribution(1.0, 4.0)),
        (
            {"type": "float", "low": 0.0, "high": 1.0, "step": 0.25},
            FloatDistribution(0, 1, step=0.25),
        ),
        (
            {"type": "float", "low": 1e-4, "high": 0.1, "log": True},
            FloatDistribution(1e-4, 0.1, log=True),
        ),
        ({"type": "categorical", "choices": [32, "a"]}, CategoricalDistribution([32, "a"])),
    ],
)
def test_each_entry_searches_its_types_values(entry: dict[str, Any], distribution: Any) -> None:
    space = parse_space(params_of_search_space({"x": entry}), [])
    got = space.params["x"].distribution
    assert got == distribution
    if isinstance(distribution, IntDistribution):  # ints, not floats that equal them
        assert all(type(v) is int for v in (got.low, got.high, got.step))


def test_an_entry_without_a_known_type_is_one_line() -> None:
    with pytest.raises(SearchSpaceError) as err:
        params_of_search_space({"x": {"type": "double", "low": 0, "high": 1}})
    assert str(err.value).startswith("hydra.sweeper.search_space.x={'type': 'double'")
    assert "\n" not in str(err.value)
