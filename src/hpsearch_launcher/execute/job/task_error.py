"""A task's error as the job's process reports it (execute.job.child): its traceback on the job's
stderr, its words for the sweep, and itself in a form the sweep can take back."""

from __future__ import annotations

import contextlib
import sys
import traceback

import cloudpickle


def described(error: BaseException) -> str:
    """The error in words: "Type: message", or its type alone when it has no message
    (`raise KeyboardInterrupt`)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class RaisedPastHydra(Exception):
    """A BaseException the task raised that Hydra's run_job, which catches Exception only,
    would let through (KeyboardInterrupt: the task's own, or a SIGINT sent to its process):
    carried through it so that it ends as any error the task raised does."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(described(raised))
        self.raised = raised


def print_error(error: BaseException) -> None:
    """`error`'s traceback on stderr, as Python prints an uncaught one; nothing if the task
    closed stderr (its end is still told, through the result or the exit status)."""
    with contextlib.suppress(OSError, ValueError):
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        sys.stderr.flush()


def picklable_error(error: BaseException) -> Exception:
    """`error` as the sweep can take it back: itself, or a RuntimeError naming it when it does
    not pickle, or is no Exception (a sweeper that reads a failed job's return value would
    raise a KeyboardInterrupt in the sweep's process as if Ctrl-C had been pressed there)."""
    if isinstance(error, Exception):
        with contextlib.suppress(Exception):
            cloudpickle.loads(cloudpickle.dumps(error))
            return error
    return RuntimeError(described(error))
