"""Bad launcher settings fail before any job starts, in one line naming the value and the fix."""

from __future__ import annotations

import pytest

from hpsearch_launcher.plan.settings import LauncherSettingsError, parse_settings


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"jobs_per_gpu": 0},
            "jobs_per_gpu=0: must be an integer >= 1, or auto "
            "(e.g. hydra.launcher.jobs_per_gpu=auto)",
        ),
        ({"jobs_per_gpu": 1.5}, "jobs_per_gpu=1.5: must be an integer >= 1"),
        ({"jobs_per_gpu": True}, "jobs_per_gpu=True: must be an integer >= 1"),
        ({"jobs_per_gpu": "Auto"}, "jobs_per_gpu='Auto': must be an integer >= 1, or auto"),
        (
            {"jobs_per_gpu": "auto", "memory_fraction": 0.2},
            "memory_fraction=0.2: is set by jobs_per_gpu=auto",
        ),
        ({"memory_keys": ["model"]}, "memory_keys=['model']: is read only with jobs_per_gpu=auto"),
        (
            {"jobs_per_gpu": "auto", "memory_keys": ["a b"]},
            "memory_keys=['a b']: 'a b' is not a config key",
        ),
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


@pytest.mark.parametrize(
    ("name", "use"),
    [
        ("CUDA_VISIBLE_DEVICES", "use hydra.launcher.gpus instead"),
        ("HPSEARCH_GPU_MEMORY_FRACTION", "use hydra.launcher.memory_fraction instead"),
        ("TF_FORCE_GPU_ALLOW_GROWTH", "use hydra.launcher.allow_growth instead"),
        ("XLA_CLIENT_MEM_FRACTION", "use hydra.launcher.memory_fraction instead"),
        ("XLA_PYTHON_CLIENT_MEM_FRACTION", "use hydra.launcher.memory_fraction instead"),
        ("HPSEARCH_ANYTHING", "reserved for the launcher's contract"),
    ],
)
def test_env_may_not_set_what_the_launcher_owns(name: str, use: str) -> None:
    """`env.CUDA_VISIBLE_DEVICES=3` once put every job on GPU 3 while the console said 0, 1."""
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings({"gpus": [0, 1], "env": {name: "3"}})
    text = str(err.value)
    assert text.startswith(f"hydra.launcher.env.{name}: ") and use in text and "\n" not in text


def test_defaults_come_from_the_config_dataclass() -> None:
    """One source: the parser reads the dataclass's defaults, and they agree with Hydra's."""
    from hpsearch_launcher.launcher_conf import HpsearchLauncherConf
    from hpsearch_launcher.plan.settings import cpu_count, defaults

    declared = defaults()
    assert declared["gpus"] == HpsearchLauncherConf.gpus == "auto"
    settings = parse_settings({})
    assert (
        settings.gpus is None and settings.max_oom_retries == HpsearchLauncherConf.max_oom_retries
    )
    assert settings.n_jobs == cpu_count() >= 1
    assert set(declared) == {
        f for f in HpsearchLauncherConf.__dataclass_fields__ if f != "_target_"
    }


@pytest.mark.parametrize("key", ["resume", "allow_growth"])
def test_flags_must_be_booleans(key: str) -> None:
    with pytest.raises(LauncherSettingsError, match=f"hydra.launcher.{key}='no': must be true or"):
        parse_settings({key: "no"})


def test_the_fraction_advice_names_the_numbers() -> None:
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings({"gpus": [0], "jobs_per_gpu": 3, "memory_fraction": 0.5})
    assert "use at most 0.333 (e.g. hydra.launcher.memory_fraction=0.3)" in str(err.value)


def test_the_whole_gpu_is_a_valid_fraction() -> None:
    assert parse_settings({"memory_fraction": 1.0}).fraction == 1.0


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("auto", None),  # None: learn what the jobs import
        (None, ()),
        ([], ()),
        ("json", ("json",)),
        (["os.path", "json"], ("os.path", "json")),
    ],
)
def test_preload(value: object, names: tuple | None) -> None:
    assert parse_settings({"preload": value}).preload == names


def test_preload_is_learned_by_default() -> None:
    assert parse_settings({}).preload is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["no_such_module_xyz.sub"], "'no_such_module_xyz' here"),
        (["not a name"], "'not a name' is not a module name"),
        (["pycuda.autoinit"], "'pycuda.autoinit' takes a GPU when imported"),
        ("theano", "'theano' takes a GPU when imported"),
    ],
)
def test_bad_preload(value: list, message: str) -> None:
    with pytest.raises(LauncherSettingsError, match=message):
        parse_settings({"preload": value})


@pytest.mark.parametrize(
    ("value", "parsed"),
    [(True, "fork"), ("fork", "fork"), ("spawn", "spawn"), (False, "off")],
)
def test_warm_start(value: object, parsed: str) -> None:
    settings = parse_settings({"warm_start": value})
    assert (settings.warm_start, settings.warm) == (parsed, parsed != "off")


@pytest.mark.parametrize("value", ["forkserver", "off", 1, None])
def test_bad_warm_start(value: object) -> None:
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings({"warm_start": value})
    assert str(err.value) == (
        f"hydra.launcher.warm_start={value!r}: must be true, false, fork (true) or spawn "
        "(e.g. hydra.launcher.warm_start=fork)"
    )


def test_warm_start_and_free_memory_waits_are_on_by_default() -> None:
    settings = parse_settings({})
    assert settings.warm_start == "fork" and settings.wait_for_free_memory is True


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"jobs_per_gpus": 2},
            "hydra.launcher.jobs_per_gpus: no such setting; "
            "did you mean hydra.launcher.jobs_per_gpu?",
        ),
        (
            {"ray": {"num_cpu": 2}},
            "hydra.launcher.ray.num_cpu: no such setting; "
            "did you mean hydra.launcher.ray.num_cpus?",
        ),
        ({"zzz": 1}, "hydra.launcher.zzz: no such setting; settings: gpus, jobs_per_gpu, "),
    ],
)
def test_a_key_that_is_no_setting_is_refused_with_the_nearest_name(
    given: dict, message: str
) -> None:
    """`+hydra.launcher.jobs_per_gpus=2` gets past Hydra: silently ignored, the user would
    believe they run 2 jobs per GPU."""
    with pytest.raises(LauncherSettingsError) as err:
        parse_settings(given)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_hydra_config_is_derived_from_the_settings_field_by_field() -> None:
    """One declaration: Hydra's config class has every setting, its type and default."""
    import dataclasses

    from omegaconf import OmegaConf
    from omegaconf.errors import ValidationError

    from hpsearch_launcher.config import LauncherSettings, user_fields
    from hpsearch_launcher.launcher_conf import HpsearchLauncherConf
    from hpsearch_launcher.plan.backends import SECTIONS

    conf = {f.name: (f.type, f.default) for f in dataclasses.fields(HpsearchLauncherConf)}
    assert next(iter(conf)) == "_target_"
    for f in user_fields(LauncherSettings):
        assert conf[f.name] == (f.type, f.default), f.name
    assert "sections" not in conf  # filled by the sweep, no user's key
    # Each section from the backend table, as its own config class, field by field too.
    for name, section in SECTIONS.items():
        nested = {f.name: (f.type, f.default) for f in dataclasses.fields(conf[name][0])}
        declared = dataclasses.fields(section.settings)
        assert nested == {f.name: (f.type, f.default) for f in declared}, name
    node = OmegaConf.structured(HpsearchLauncherConf)
    with pytest.raises(ValidationError):
        node.max_retries = "two"
    with pytest.raises(ValidationError):
        node.ray.num_cpus = "many"
