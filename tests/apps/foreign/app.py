"""A Hydra app unlike hpsearch, for the launcher's standalone tests: it returns a dict (or a
list), writes a metrics.json of an odd shape, and records what each job saw."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def experiment(cfg: DictConfig) -> object:
    out = Path(HydraConfig.get().runtime.output_dir)
    final = {
        "list": [1, 2, 3],
        "string": "not a mapping",
        "mapping": {"acc": cfg.alpha / 2, "name": "text is ignored"},
    }
    if cfg.metrics == "broken":
        (out / "metrics.json").write_text("{not json")
    else:
        (out / "metrics.json").write_text(json.dumps({"final": final[cfg.metrics]}))
    record = {
        "num": HydraConfig.get().job.num,
        "alpha": cfg.alpha,
        "pid": os.getpid(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "hpsearch_modules": sorted(m for m in sys.modules if m.split(".")[0] == "hpsearch"),
    }
    with open(Path(cfg.marks) / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    if cfg.alpha >= cfg.list_from:
        return [cfg.alpha, cfg.alpha * 2]
    return {"score": cfg.alpha * 10, "loss": 1 - cfg.alpha, "tag": "kept as JSON"}


main = hydra.main(version_base="1.3", config_path="conf", config_name="foreign")(experiment)

if __name__ == "__main__":
    main()
