"""Bad launcher settings fail before any job starts, in one line naming the value and the fix."""

from __future__ import annotations

import pytest

from hydra_plugins.hpsearch_launcher._settings import LauncherSettingsError, parse_settings


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"jobs_per_gpu": 0},
            "jobs_per_gpu=0: must be an integer >= 1 (e.g. hydra.launcher.jobs_per_gpu=2)",
        ),
        ({"jobs_per_gpu": 1.5}, "jobs_per_gpu=1.5: must be an integer >= 1"),
        ({"jobs_per_gpu": True}, "jobs_per_gpu=True: must be an integer >= 1"),
        ({"memory_fraction": 1.5}, "memory_fraction=1.5: must be a number in (0, 1] or null"),
        ({"memory_fraction": 0}, "memory_fraction=0: must be a number in (0, 1] or null"),
        ({"memory_fraction": "half"}, "memory_fraction='half': must be a number in (0, 1]"),
        (
            {"jobs_per_gpu": 3, "memory_fraction": 0.5},
            "memory_fraction=0.5: jobs_per_gpu x memory_fraction = 3 x 0.5 = 1.5 > 1",
        ),
        ({"gpus": [-1]}, "gpus=[-1]: -1 is not a GPU id"),
        ({"gpus": ["cuda:0"]}, "gpus=['cuda:0']: 'cuda:0' is not a GPU id"),
        ({"gpus": [0, 1, 0]}, "gpus=[0, 1, 0]: GPU 0 listed twice; use jobs_per_gpu"),
        ({"gpus": "all"}, "gpus='all': 'all' is not a GPU id"),
        ({"timeout": -5}, "timeout=-5: must be a number of seconds > 0, or null for none"),
        ({"timeout": 0}, "timeout=0: must be a number of seconds > 0"),
        ({"n_jobs": 0}, "n_jobs=0: must be an integer >= 1 (e.g. hydra.launcher.n_jobs=4)"),
    ],
)
def test_bad_settings(params: dict, message: str) -> None:
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings(params)
    text = str(err.value)
    assert text.startswith("hydra.launcher.")
    assert message in text
    assert "\n" not in text and "(e.g. hydra.launcher." in text


@pytest.mark.parametrize(
    ("params", "gpus", "fraction"),
    [
        ({}, None, 0.9),
        ({"gpus": [0, 1], "jobs_per_gpu": 2}, ("0", "1"), 0.45),
        ({"gpus": [0], "jobs_per_gpu": 3}, ("0",), 0.3),
        (
            {"gpus": ["1", "GPU-8a1b"], "jobs_per_gpu": 4, "memory_fraction": 0.25},
            ("1", "GPU-8a1b"),
            0.25,
        ),
        ({"gpus": 2}, ("2",), 0.9),
        ({"gpus": []}, (), 0.9),
    ],
)
def test_good_settings(params: dict, gpus: tuple | None, fraction: float) -> None:
    settings = parse_settings(params)
    assert settings.gpus == gpus
    assert settings.fraction == pytest.approx(fraction)
    assert settings.jobs_per_gpu * settings.fraction <= 1
