"""The one exception type for a user's mistake: its message is a single line naming the bad
value, the allowed values and the fix, and the entry point prints it without a traceback."""

import sys
from typing import NoReturn


class ConfigError(ValueError):
    """A bad setting, found before any training starts."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite: the run stops with this, naming the epoch and the lr."""


def exit_with(err: Exception) -> NoReturn:
    """Print a refusal as hpsearch says them, `hpsearch: error: ...`, and exit with status 2."""
    print(f"hpsearch: error: {err}", file=sys.stderr)
    raise SystemExit(2) from None
