"""The hpsearch sweeper's work (`hydra/sweeper=hpsearch`): an Optuna search asked and told one
trial at a time, so that every slot of the launcher stays busy. Empty on purpose: Hydra's plugin
scan imports the plugin module, which imports `config` from here, and nothing heavier."""
