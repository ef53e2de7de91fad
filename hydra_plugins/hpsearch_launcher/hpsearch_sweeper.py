"""The hpsearch sweeper's Hydra plugin (`hydra/sweeper=hpsearch`): the config registration and
a thin Sweeper. An Optuna search asked and told one trial at a time: with the hpsearch
launcher, a new trial starts the moment a slot frees.

Hydra's plugin scan imports this module in every Hydra process, so it stays light: the settings
are declared in `hpsearch_launcher.search.config`; the work, and Optuna, are imported in sweep().
"""

from collections.abc import Sequence
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hpsearch_launcher.hydra_line import store
from hpsearch_launcher.search.config import HpsearchSweeperConf
from hpsearch_launcher.search.sampler_config import store_samplers
from hpsearch_launcher.search.sweeper_target import install

# Hydra's OptunaSweeper in `hydra.sweeper._target_` with hydra/sweeper=hpsearch: hpsearch runs.
install()

store(group="hydra/sweeper", name="hpsearch", node=HpsearchSweeperConf, provider="hpsearch")
store_samplers()  # hydra/sweeper/sampler: tpe, random, ... as Hydra's Optuna sweeper has them


class HpsearchSweeper(Sweeper):
    def __init__(self, **params: Any) -> None:
        # Plain lists and dicts: the settings checks need no OmegaConf.
        self.params = {
            k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in params.items()
        }
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.sweep_dir_before: Any = None  # put back on a refusal before the first trial

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hpsearch_launcher.search.refusal import sweep_dir_before

        self.config = config
        self.sweep_dir_before = sweep_dir_before(config)  # before the launcher's setup looks
        self.launcher = Plugins.instance().instantiate_launcher(
            config=config, hydra_context=hydra_context, task_function=task_function
        )

    def sweep(self, arguments: Sequence[str]) -> None:
        from hpsearch_launcher.search.refusal import one_line_errors

        with one_line_errors(self.sweep_dir_before):
            from hpsearch_launcher.search import sweeper as _core  # Optuna: the search extra

            _core.sweep(self, arguments)
