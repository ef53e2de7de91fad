"""Job configs composed from a template per set of group overrides are exactly Hydra's own,
at no composition or copy per job."""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from hpsearch.app import CONFIG_DIR
from hpsearch_launcher.plan import compose as compose_module
from hpsearch_launcher.plan.compose import Composer, _plain
from hpsearch_launcher.plan.jobs import compose_jobs


@pytest.fixture
def hydra(hydra_restore_singletons: None) -> Iterator[Hydra]:
    GlobalHydra.instance().clear()
    yield Hydra.create_main_hydra2(
        task_name="hpsearch", config_search_path=create_config_search_path(CONFIG_DIR)
    )
    GlobalHydra.instance().clear()


def composer_for(hydra: Hydra, *given: str) -> Composer:
    """A Composer for a sweep with these overrides for all its jobs (Hydra's master config
    holds them too), besides epochs=3 and n_jobs=2."""
    overrides = ["epochs=3", "hydra.launcher.n_jobs=2", *given]
    master = hydra.compose_config("config", overrides=overrides, run_mode=RunMode.MULTIRUN)
    return Composer(hydra.config_loader, master)


@pytest.mark.parametrize(
    "overrides",
    [
        ["lr=0.01", "batch=32"],
        ["model=cnn", "lr=0.01"],
        ["model=cnn", "model.filters=[8,16]"],
        ["optimizer=sgd", "optimizer.momentum=0.5", "lr=0.2"],
        # A `# @package _global_` group, setting hydra.launcher.gpus: given for the whole
        # sweep, as a job may not change the launcher.
        ["device=cpu", "lr=0.3"],
        ["+extra=1", "lr=0.1"],
        ["++lr=0.5"],
        ["~save_model"],
        ["tf_log_level=${seed}"],
        ["+tag='a b, c'"],
        ["data=synthetic", "data.shape=[4,4]", "model=mlp"],
    ],
)
def test_composed_like_hydra(hydra: Hydra, overrides: list[str]) -> None:
    composer = composer_for(hydra, *[o for o in overrides if o.startswith("device=")])
    for _ in range(2):  # the first is checked against Hydra, the second comes from the template
        ours = composer.compose(overrides)
        theirs = hydra.config_loader.load_sweep_config(composer.master, overrides)
        assert _plain(ours) == _plain(theirs)
        assert OmegaConf.to_container(ours.hydra.overrides.task) == overrides
    assert composer.fast, "the template path was abandoned"


@pytest.mark.parametrize("fast", [True, False])
def test_a_job_may_not_change_the_launcher(hydra: Hydra, fast: bool) -> None:
    """`--multirun device=cpu,auto`: the cpu job's config sets hydra.launcher.gpus=[], which
    the sweep, started with gpus=auto, would not apply. Hydra 1.4 refuses it; so does 1.3
    through the composer, by either path, in 1.4's words."""
    composer = composer_for(hydra)
    composer.fast = fast
    composer.compose(["device=auto", "lr=0.1"])
    with pytest.raises(ConfigCompositionException, match=r"'hydra\.launcher' must be configured"):
        composer.compose(["device=cpu", "lr=0.1"])


def test_one_template_per_set_of_group_overrides(hydra: Hydra) -> None:
    composer = composer_for(hydra)
    for lr in (0.1, 0.2, 0.3):
        for model in ("mlp", "cnn"):
            composer.compose([f"lr={lr}", f"model={model}", "batch=16"])
    assert sorted(composer.templates) == [("model=cnn",), ("model=mlp",)]
    assert composer.fast


def test_any_difference_from_hydra_falls_back_to_hydra(
    hydra: Hydra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template copy that comes out wrong (here: seed changed) is caught on the template's
    first job, and every job is then composed by Hydra itself."""
    wrong = SimpleNamespace(loads=lambda data: OmegaConf.merge(pickle.loads(data), {"seed": 9}))
    monkeypatch.setattr(compose_module, "pickle", wrong)
    composer = composer_for(hydra)
    cfg = composer.compose(["lr=0.7"])
    assert not composer.fast
    assert (cfg.lr, cfg.seed) == (0.7, 0)


def test_a_job_costs_no_composition_and_no_copy_of_its_config(
    hydra: Hydra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What kept the sweep's CPU per job high (issue 19): Hydra composing every job, a deep copy
    of each job's config, HydraConfig.set_config's copy of its Hydra node. Now Hydra composes
    twice per set of group overrides (the template and its check), and a job copies nothing;
    `${hydra:...}` still resolves in each job's own config while it is checked."""
    calls: Counter[str] = Counter()
    composing = []  # Hydra's composition copies as it likes: counted are the copies outside it

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            # A copy of a job's config, or set_config's of its Hydra node, copies that node.
            if not any(composing) and (name != "copy" or args[0]._key() == "hydra"):
                calls[name] += 1
            composing.append(name == "compose")
            try:
                return real(*args, **kwargs)
            finally:
                composing.pop()

        return call

    loader = hydra.config_loader
    monkeypatch.setattr(loader, "load_sweep_config", counted("compose", loader.load_sweep_config))
    monkeypatch.setattr(DictConfig, "__deepcopy__", counted("copy", DictConfig.__deepcopy__))
    seen = []

    def preflight(cfg: DictConfig) -> None:
        seen.append((HydraConfig.get().job.num, cfg.hydra.job.num, cfg.hydra.job.override_dirname))

    master = composer_for(hydra).master
    jobs = [[f"lr={lr}", f"model={model}"] for lr in (0.1, 0.2, 0.3) for model in ("mlp", "cnn")]
    made = compose_jobs(master, loader, preflight, jobs, 0, {})
    assert dict(calls) == {"compose": 4}
    assert [num for num, _, _ in seen] == [job.num for job in made] == list(range(6))
    assert all(ours == num for num, ours, _ in seen)
    assert seen[5][2] == "lr=0.3,model=cnn"
