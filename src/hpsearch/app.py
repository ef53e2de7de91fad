"""The Hydra entry point: `python -m hpsearch [--multirun] key=value ...` (or `hpsearch ...`)."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from hpsearch.errors import ConfigError, exit_with
from hpsearch.override_keys import check_override_keys
from hpsearch.overrides import parsed_overrides, swept_values
from hpsearch.preflight import preflight
from hpsearch.settings_help import RESOLVER, settings_help
from hpsearch_launcher import EXECUTION_WHITELIST as launcher_targets
from hpsearch_launcher.api import (
    LauncherSettingsError,
    SearchSettingsError,
    check_launcher_key,
    check_sweeper_key,
    main_options,
    nearest_key,
    register_resolver,
)

# hpsearch/conf: the package's copy of the repository's conf/ in a wheel; in a checkout or an
# editable install, a symlink to conf/ itself.
CONFIG_DIR = str(Path(__file__).resolve().parent / "conf")


def train_task(cfg: DictConfig) -> float:
    """Hydra's task function: train one config in this run's output dir, return the objective.

    A bad setting ends the job with its one-line message (exit status 2), not a traceback.
    """
    from hpsearch.train import run

    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        record = run(cfg, output_dir=output_dir)
    except ConfigError as err:
        exit_with(err)
    if hydra_cfg.mode == RunMode.RUN:  # a sweep's leaderboard names every run dir instead
        print(run_dir_line(output_dir, Path.cwd()), flush=True)
    return float(record["objective"]["value"])


def run_dir_line(output_dir: Path, cwd: Path) -> str:
    """The single run's last line: its dir, relative to where the command ran when inside it."""
    shown = output_dir.relative_to(cwd) if output_dir.is_relative_to(cwd) else output_dir
    return f"hpsearch: run dir {shown}"


train_task.preflight = preflight  # type: ignore[attr-defined]  # run by our launcher
# `hpsearch --help` lists the settings from their declarations (conf/hydra/help/hpsearch.yaml).
register_resolver(RESOLVER, settings_help)

# The targets conf/ names (its callbacks, its job log's handler): what Hydra 1.4 lets it call.
EXECUTION_WHITELIST = [
    *launcher_targets,
    "hpsearch.preflight.RunStartCheck",
    "hpsearch.run_log.RunLogFile",
]
_hydra_main = hydra.main(
    config_path=CONFIG_DIR, config_name="config", **main_options(EXECUTION_WHITELIST)
)(train_task)


def check_group_choices(args: list[str], config_dir: Path) -> None:
    """Reject an unknown config group option (`model=foo`, `model=mlp,foo`) in one line.

    Hydra would say it too, over several lines; this runs first, on the command line alone.
    """
    for override in parsed_overrides(args):
        group = override.key_or_group
        values = swept_values(override)
        if values is None or not (config_dir / group).is_dir():
            continue
        known = sorted(p.stem for p in (config_dir / group).glob("*.yaml"))
        for value in values:
            if value not in known:
                near = nearest_key(value, known) or known[0]
                raise ConfigError(
                    f"{group}={value}: no such {group} (choose from "
                    f"{', '.join(known)}; e.g. {group}={near})"
                )


LAUNCHER_PREFIX = "hydra.launcher."


def check_launcher_keys(args: list[str]) -> None:
    """Reject `hydra.launcher.<key>` (with `+` or without) where hpsearch's launcher has no
    such setting, in one line naming the nearest one. Hydra refuses the plain form over six
    lines without a guess, and the launcher itself sees the `+` form only once the sweep dir
    is made."""
    if _plain_overrides(args).get("hydra/launcher", "hpsearch") != "hpsearch":
        return  # another launcher's settings are its own
    for override in parsed_overrides(args):
        if override.key_or_group.startswith(LAUNCHER_PREFIX):
            check_launcher_key(override.key_or_group.removeprefix(LAUNCHER_PREFIX))


SWEEPER_PREFIX = "hydra.sweeper."


def check_sweeper_keys(args: list[str]) -> None:
    """As check_launcher_keys, for `hydra.sweeper.<key>` with hpsearch's sweeper: one line
    with the nearest setting, before Hydra's six, and before any sweep dir is made."""
    if _plain_overrides(args).get("hydra/sweeper") != "hpsearch":
        return
    for override in parsed_overrides(args):
        if override.key_or_group.startswith(SWEEPER_PREFIX):
            check_sweeper_key(override.key_or_group.removeprefix(SWEEPER_PREFIX))


OPTUNA_DIRECTION = {"max": "maximize", "min": "minimize"}


# The sweepers whose study has a `direction`: Hydra's Optuna sweeper, and hpsearch's own.
OPTUNA_SWEEPERS = ("optuna", "hpsearch")


def optuna_direction(args: list[str], config_dir: Path) -> list[str]:
    """With `hydra/sweeper=optuna` or `hpsearch`, the study's direction follows objective.mode
    (Optuna's own default, minimize, would make it hunt for the *worst* accuracy): added when
    not given, refused in one line when given against it."""
    values = _plain_overrides(args)
    if values.get("hydra/sweeper") not in OPTUNA_SWEEPERS:
        return args
    config = yaml.safe_load((config_dir / "config.yaml").read_text()) or {}
    mode = values.get("objective.mode") or str(config.get("objective", {}).get("mode", "max"))
    metric = values.get("objective.metric") or config.get("objective", {}).get("metric", "")
    wanted = OPTUNA_DIRECTION.get(mode)
    given = values.get("hydra.sweeper.direction")
    if wanted is None or (given is not None and given.startswith("[")):
        return args  # a bad mode is validate_config's to report; a list: several objectives
    if given is None:
        return [*args, f"hydra.sweeper.direction={wanted}"]
    if given != wanted:
        better = "higher" if mode == "max" else "lower"
        other = "min" if mode == "max" else "max"
        raise ConfigError(
            f"hydra.sweeper.direction={given} contradicts objective.mode={mode} ({metric} is "
            f"better {better}): drop hydra.sweeper.direction (it follows objective.mode), or "
            f"set objective.mode={other}"
        )
    return args


def _plain_overrides(args: list[str]) -> dict[str, str]:
    """key -> value of the command line's plain `key=value` overrides (not sweeps)."""
    return {
        o.get_key_element().lstrip("+~"): o.input_line.split("=", 1)[1]
        for o in parsed_overrides(args)
        if not o.is_sweep_override()
    }


def main() -> None:
    args = sys.argv[1:]
    if not any(a.startswith(("--config-dir", "-cd", "--config-path", "-cp")) for a in args):
        try:
            check_group_choices(args, Path(CONFIG_DIR))
            check_override_keys(args, Path(CONFIG_DIR))
            check_launcher_keys(args)
            check_sweeper_keys(args)
            sys.argv[1:] = optuna_direction(args, Path(CONFIG_DIR))
        except (ConfigError, LauncherSettingsError, SearchSettingsError) as err:
            exit_with(err)
    _hydra_main()
