"""The end-of-sweep summary callback, for any app that uses the launcher:
`hydra.callbacks.summary._target_: hydra_plugins.hpsearch_launcher.callback.SweepSummary`."""

from .record._summary import SweepSummary

__all__ = ["SweepSummary"]
