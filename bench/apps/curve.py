"""The search bench's workload: training of the shape of the real thing, on simulated GPUs.

Each trial runs `epochs` epochs; an epoch sleeps for a time that depends on its batch size
(and on whether the trial is one of the stragglers, ~1 in 8: three times slower), then reports
a noisy learning curve whose limit depends on lr and batch (best near lr=3e-3, batch=32).
Seeded: the same parameters give the same curve and durations, whoever runs them. Sleeping,
not computing, so that 8 "GPUs" fit on 2 cores.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections.abc import Callable

import hydra
from omegaconf import DictConfig

from hpsearch_launcher import report


def limit(lr: float, batch: int) -> float:
    """The accuracy a trial tends to: a bump in log(lr), a little lower for large batches."""
    bump = math.exp(-((math.log10(lr) - math.log10(3e-3)) ** 2) / (2 * 0.6**2))
    return 0.1 + 0.85 * bump * (1 - 0.04 * math.log2(batch / 32))


def _rng(*key: object) -> random.Random:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def epoch_seconds(lr: float, batch: int, base: float, seed: int) -> float:
    straggler = _rng("straggler", lr, batch, seed).random() < 1 / 8
    return base * math.sqrt(64 / batch) * (3.0 if straggler else 1.0)


def accuracy(lr: float, batch: int, epoch: int, seed: int, noise: float) -> float:
    top = limit(lr, batch)
    clean = top - (top - 0.1) * math.exp(-(epoch + 1) / 2.5)
    return clean + _rng("noise", lr, batch, epoch, seed).gauss(0, noise)


def train(epochs: int, seconds: float, value_at: Callable[[int], float]) -> float:
    """`epochs` epochs of `seconds` each, reporting `value_at(epoch)` after each; the last
    value (where the sweep pruned the run, if it did)."""
    value = 0.0
    for epoch in range(epochs):
        time.sleep(seconds)
        value = value_at(epoch)
        if report(value, step=epoch):
            break
    return value


def curve(cfg: DictConfig) -> float:
    lr, batch = float(cfg.lr), int(cfg.batch)
    seconds = epoch_seconds(lr, batch, cfg.epoch_s, cfg.seed)
    return train(cfg.epochs, seconds, lambda epoch: accuracy(lr, batch, epoch, cfg.seed, cfg.noise))


main = hydra.main(version_base="1.3", config_path="conf", config_name="curve")(curve)

if __name__ == "__main__":
    main()
