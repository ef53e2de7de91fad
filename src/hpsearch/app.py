"""The Hydra entry point: `python -m hpsearch [--multirun] key=value ...` (or `hpsearch ...`)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from hpsearch.errors import ConfigError

log = logging.getLogger("hpsearch")

# conf/ at the repository root, found from a checkout or an editable install.
CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "conf")


def train_task(cfg: DictConfig) -> float:
    """Hydra's task function: train one config in this run's output dir, return the objective.

    A bad setting ends the job with its one-line message (exit status 2), not a traceback.
    """
    from hpsearch.train import run

    output_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        record = run(cfg, output_dir=output_dir)
    except ConfigError as err:
        log.error("%s", err)
        print(f"hpsearch: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    return float(record["objective"]["value"])


_hydra_main = hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")(
    train_task
)


def main() -> None:
    _hydra_main()
