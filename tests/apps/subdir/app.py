"""A Hydra app whose configs set hydra.sweep.subdir in different places, or nowhere: the tests
of when run dirs are named from the overrides (tests/test_subdir.py)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


def task(cfg: DictConfig) -> float:
    return float(cfg.x)


main = hydra.main(version_base="1.3", config_path="conf", config_name="plain")(task)

if __name__ == "__main__":
    main()
