"""The one exception type for a user's mistake: its message is a single line naming the bad
value, the allowed values and the fix, and the entry point prints it without a traceback."""


class ConfigError(ValueError):
    """A bad setting, found before any training starts."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite: the run stops with this, naming the epoch and the lr."""
