"""A Hydra app whose search configs were written for Hydra's Optuna sweeper, in the shapes
users copy (issue 45): run with `--config-dir` (conf/ or app_level/) and `--config-name config`."""

import hydra
from omegaconf import DictConfig


@hydra.main(config_path=None, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    return float((cfg.x - 1) ** 2 + cfg.y**2 + (0.5 if cfg.z == "foo" else 0.0))


if __name__ == "__main__":
    main()
