"""Job configs composed from a template per set of group overrides are exactly Hydra's own,
at no composition or copy per job."""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import cloudpickle
import pytest
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from hydra.plugins.sweeper import Sweeper
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

    composer = composer_for(hydra)
    jobs = [[f"lr={lr}", f"model={model}"] for lr in (0.1, 0.2, 0.3) for model in ("mlp", "cnn")]
    made = compose_jobs(composer, preflight, jobs, 0, {})
    assert dict(calls) == {"compose": 4}
    assert [num for num, _, _ in seen] == [job.num for job in made] == list(range(6))
    assert all(ours == num for num, ours, _ in seen)
    assert seen[5][2] == "lr=0.3,model=cnn"


def test_the_sweepers_check_is_composed_once_and_each_job_takes_its_config(
    hydra: Hydra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hydra's sweepers compose every job of a batch to check it (validate_batch_is_legal)
    before launch() composes it again: through the launcher's Composer, Hydra composes only
    the templates and their checks, each job gets the config the check composed (a repeated
    job its own), and a config that is not the sweep's still goes to Hydra."""
    composed: list[list[str]] = []
    hydras = hydra.config_loader.load_sweep_config

    def counted(master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        composed.append(list(sweep_overrides))
        return hydras(master_config, sweep_overrides)

    monkeypatch.setattr(hydra.config_loader, "load_sweep_config", counted)
    composer = composer_for(hydra)
    composer.serve_sweeper_checks()
    batch = [[f"lr={lr}", f"model={m}"] for lr in (0.1, 0.2) for m in ("mlp", "cnn")]
    batch.append(batch[0])
    sweeper = SimpleNamespace(hydra_context=SimpleNamespace(config_loader=hydra.config_loader))
    sweeper.config = composer.master
    payload = len(cloudpickle.dumps(hydra.config_loader))
    Sweeper.validate_batch_is_legal(sweeper, batch)  # type: ignore[arg-type]
    checked = [cfg for cfgs in composer._checked.values() for cfg in cfgs]
    assert len(composed) == 4 and len(checked) == 5
    # The loader goes to every job's process (Hydra's context): without what was checked.
    assert len(cloudpickle.dumps(hydra.config_loader)) == payload
    restored = pickle.loads(cloudpickle.dumps(hydra.config_loader))
    assert restored.load_sweep_config.__func__ is type(restored).load_sweep_config
    made = compose_jobs(composer, None, batch, 0, {})
    assert len(composed) == 4, "a job was composed again after the sweeper's check"
    assert sorted(map(id, checked)) == sorted(id(job.config) for job in made)
    assert [job.config.hydra.job.num for job in made] == list(range(5))
    assert (made[0].config.lr, made[-1].config.lr) == (0.1, 0.1)
    assert composer._checked == {}
    other = hydra.compose_config("config", overrides=[], run_mode=RunMode.MULTIRUN)
    assert hydra.config_loader.load_sweep_config(other, ["lr=0.5"]).lr == 0.5
    assert len(composed) == 5 and composer._checked == {}
    assert Composer(hydra.config_loader, other)._load == counted, "Hydra's, not the hook"


def test_a_resumed_job_keeps_its_rows_number_and_the_new_ones_go_on_without_gaps(
    hydra: Hydra,
) -> None:
    """lr=0.2 finished in an earlier run as job 7: it keeps 7 (its hydra.job.num too); the
    others are numbered on from 8, the resumed one taking no number between them."""
    batch = [["lr=0.1"], ["lr=0.2"], ["lr=0.3"]]
    digest = compose_jobs(composer_for(hydra), None, batch, 0, {})[1].config_hash
    finished = {digest: [{"job": "7", "status": "completed", "return": "0.9"}]}
    made = compose_jobs(composer_for(hydra), None, batch, 8, finished)
    assert [job.num for job in made] == [8, 7, 9]
    assert [job.config.hydra.job.num for job in made] == [8, 7, 9]
    assert made[1].previous is not None and made[0].previous is None
