"""The Hydra entry point: `python -m hpsearch [--multirun] key=value ...` (or `hpsearch ...`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from hpsearch.errors import ConfigError
from hpsearch.validate import validate_config

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
        _exit_with(err)
    if hydra_cfg.mode == RunMode.RUN:  # a sweep's leaderboard names every run dir instead
        print(run_dir_line(output_dir, Path.cwd()), flush=True)
    return float(record["objective"]["value"])


def run_dir_line(output_dir: Path, cwd: Path) -> str:
    """The single run's last line: its dir, relative to where the command ran when inside it."""
    shown = output_dir.relative_to(cwd) if output_dir.is_relative_to(cwd) else output_dir
    return f"hpsearch: run dir {shown}"


train_task.preflight = validate_config  # type: ignore[attr-defined]  # run by our launcher

_hydra_main = hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")(
    train_task
)


def check_group_choices(args: list[str], config_dir: Path) -> None:
    """Reject an unknown config group option (`model=foo`, `model=mlp,foo`) in one line.

    Hydra would say it too, over several lines; this runs first, on the command line alone.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            override = parser.parse_overrides([arg])[0]
            group = override.key_or_group
            values = (
                list(override.sweep_string_iterator())
                if override.is_sweep_override()
                else [override.get_value_element_as_str()]
            )
        except Exception:  # not ours to judge: Hydra reports its own syntax errors
            continue
        if not (config_dir / group).is_dir():
            continue
        known = sorted(p.stem for p in (config_dir / group).glob("*.yaml"))
        for value in values:
            if value not in known:
                raise ConfigError(
                    f"{group}={value}: no such {group} (choose from "
                    f"{', '.join(known)}; e.g. {group}={known[0]})"
                )


def main() -> None:
    args = sys.argv[1:]
    if not any(a.startswith(("--config-dir", "-cd", "--config-path", "-cp")) for a in args):
        try:
            check_group_choices(args, Path(CONFIG_DIR))
        except ConfigError as err:
            _exit_with(err)
    _hydra_main()


def _exit_with(err: ConfigError) -> NoReturn:
    print(f"hpsearch: error: {err}", file=sys.stderr)
    raise SystemExit(2) from None
