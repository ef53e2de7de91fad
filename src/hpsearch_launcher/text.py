"""Values shortened for a log line or an error message."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """`text`, or its first `limit - 3` characters and "..." when it is longer than `limit`."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(value: object, limit: int) -> str:
    """`repr(value)` clipped to `limit` characters; object's own repr when the value's raises
    (a job's return value is untrusted)."""
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    return clip(text, limit)


def short_str(value: object, limit: int) -> str:
    """`value` for a log line: a float to 4 places, anything else as str(), clipped."""
    return clip(f"{value:.4f}" if isinstance(value, float) else str(value), limit)
