"""hpsearch: Hydra sweeps of TensorFlow models, one fresh process per job, GPUs shared by slots."""

__version__ = "0.1.0"
