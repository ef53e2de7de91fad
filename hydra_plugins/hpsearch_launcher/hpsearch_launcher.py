"""The hpsearch launcher's Hydra plugin: the config registration and a thin Launcher.

Hydra's plugin scan imports this module in every Hydra process, so it stays light: the settings
are declared in `hpsearch_launcher.config` (Hydra's classes made in `launcher_conf`), the work is
in `hpsearch_launcher.launch`, imported in launch().
"""

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hpsearch_launcher import compose_errors
from hpsearch_launcher.hydra_line import store
from hpsearch_launcher.launcher_conf import LAUNCHER_CONFS

# A mistyped hpsearch setting, in any app: one line naming the nearest, not Hydra's six.
compose_errors.install()
# hydra/launcher=hpsearch, and a backend's own option where its section asks for one
# (hpsearch_slurm: hydra-submitit-launcher's keys in hydra.launcher itself).
for _name, _conf in LAUNCHER_CONFS.items():
    store(group="hydra/launcher", name=_name, node=_conf, provider="hpsearch")


class HpsearchLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        # Plain lists and dicts: the settings checks need no OmegaConf.
        self.params = {
            k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in params.items()
        }
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None
        # The sweep's records, opened at the first launch() and kept for the later ones (Optuna
        # launches a batch at a time): results.csv, and the next new job's hydra.job.num.
        self.records: Any = None
        # The sweep dir as it was before the sweeper touched it: put back on a refusal.
        self.sweep_dir_before: Any = None
        # Composes the sweep's jobs (plan.compose.Composer), the sweeper's checks of them too.
        self.composer: Any = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.task_function = task_function
        self.hydra_context = hydra_context
        from hpsearch_launcher import launch as _core
        from hpsearch_launcher.optuna_direction import check_optuna_direction
        from hpsearch_launcher.plan.compose import Composer
        from hpsearch_launcher.sweep_grammar import check_basic_sweep

        # Hydra's sweepers set up the launcher before they make the sweep dir.
        with _core.one_line_errors():
            self.sweep_dir_before = _core.SweepDirBefore.look(config)
        with _core.one_line_errors(self):  # the sweep dir as it was (the summary made it)
            check_basic_sweep(config)
            check_optuna_direction(config)
        self.composer = Composer(hydra_context.config_loader, config)
        # A job config Hydra cannot compose, found by the sweeper's check: one line, the
        # sweep dir as it was (the basic sweeper checks each batch before it launches it).
        self.composer.serve_sweeper_checks(lambda: _core.one_line_errors(self))

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from hpsearch_launcher import launch as _core

        with _core.one_line_errors(self):
            return _core.launch(self, job_overrides, initial_job_idx)

    def stream(
        self,
        source: Any,
        swept_keys: Sequence[str],
        total: int | None = None,
        at_most: tuple[int, str] | None = None,
    ) -> None:
        """Run the jobs a JobSource (hpsearch_launcher.stream) gives, as slots free, until it
        is exhausted and none runs: what an asynchronous sweeper calls instead of launch().
        `at_most`: the most the source lets run at once, and the setting that says so."""
        from hpsearch_launcher import launch as _core

        with _core.one_line_errors(self):  # a job refused: the sweep dir as it was
            _core.stream(self, source, swept_keys, total, at_most)
