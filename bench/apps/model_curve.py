"""The one-model bench's workload (bench/one_model.py): curve.py's kind of simulated training,
with three parameters and curves that cross.

An epoch sleeps for a time that grows with the width and shrinks with the batch (stragglers, 1
in 10: 1.6x slower); the curve rises at a rate set by lr (a small lr learns slowly, so early
epochs rank trials otherwise than the last one does) towards a limit that peaks near lr=2e-3,
grows with the width and falls with the batch. The better models are the slower ones, as in
real training. Seeded: the same parameters give the same curve and durations everywhere.
"""

from __future__ import annotations

import math

import hydra
from curve import _rng, train
from omegaconf import DictConfig


def limit(lr: float, batch: int, width: int, peak: float = 2e-3) -> float:
    """The accuracy a trial tends to."""
    bump = math.exp(-((math.log10(lr) - math.log10(peak)) ** 2) / (2 * 0.7**2))
    capacity = 1 - 0.25 * math.exp(-width / 200)
    return 0.1 + 0.85 * bump * capacity * (1 - 0.03 * math.log2(batch / 16))


def epoch_seconds(lr: float, batch: int, width: int, base: float, seed: int) -> float:
    straggler = _rng("straggler", lr, batch, width, seed).random() < 1 / 10
    return base * (64 / batch) ** 0.35 * (width / 256) ** 0.25 * (1.6 if straggler else 1.0)


def clean(
    lr: float, batch: int, width: int, epoch: int, peak: float = 2e-3, pace: float = 2.0
) -> float:
    """The noiseless curve: the limit, approached at a pace lr sets (`pace`: its epochs to
    rise 63 % at lr=3e-3; a small lr takes longer)."""
    tau = pace * (3e-3 / lr) ** 0.35
    top = limit(lr, batch, width, peak)
    return top - (top - 0.1) * math.exp(-(epoch + 1) / tau)


def accuracy(
    lr: float,
    batch: int,
    width: int,
    epoch: int,
    seed: int,
    noise: float,
    peak: float = 2e-3,
    pace: float = 2.0,
) -> float:
    """The curve as a run reports it: noisy, the same noise for the same run everywhere."""
    value = clean(lr, batch, width, epoch, peak, pace)
    return value + _rng("noise", lr, batch, width, epoch, seed).gauss(0, noise)


def model_curve(cfg: DictConfig) -> float:
    lr, batch, width = float(cfg.lr), int(cfg.batch), int(cfg.width)
    seconds = epoch_seconds(lr, batch, width, cfg.epoch_s, cfg.seed)
    return train(
        cfg.epochs,
        seconds,
        lambda e: accuracy(lr, batch, width, e, cfg.seed, cfg.noise, cfg.peak, cfg.pace),
    )


main = hydra.main(version_base="1.3", config_path="conf", config_name="model_curve")(model_curve)

if __name__ == "__main__":
    main()
