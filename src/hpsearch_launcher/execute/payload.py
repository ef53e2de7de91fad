"""What a job's process is sent, pickled once by the sweep, whichever backend runs it: the task
(with the real file names of the code it carries by value), each job's config, and the sweep's
sys.path."""

from __future__ import annotations

import io
import marshal
import os
import pickle
import sys
import types
from collections import ChainMap
from typing import Any

import cloudpickle


def sweep_sys_path() -> list[str]:
    """The sweep's own sys.path for a job's process (a script's directory included), its
    relative paths made absolute; entries that are not paths (setuptools' editable-install
    hooks) kept as they are."""
    return [os.path.abspath(p) if os.path.exists(p) else p for p in sys.path]


def task_payload(*parts: Any) -> bytes:
    """The task (and what the job's process needs with it) pickled for its process, by
    cloudpickle, with the real file names of the code it carries by value (a task from the
    app's `__main__`). cloudpickle 3 names that code `<dynamic-code>`: the job's tracebacks
    (in its stderr.log, and the frames Hydra 1.4 hands back to the sweep) could then say
    neither where a frame is nor its line."""
    buffer = io.BytesIO()
    _TaskPickler(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(parts)
    return buffer.getvalue()


def _code_whole(code: types.CodeType) -> tuple[Any, ...]:
    """A code object as marshal writes it, whole (its file name too): the sweep's Python
    and the job's are the same."""
    return marshal.loads, (marshal.dumps(code),)


class _TaskPickler(cloudpickle.Pickler):
    dispatch_table = ChainMap({types.CodeType: _code_whole}, cloudpickle.Pickler.dispatch_table)


def config_payload(config: Any) -> bytes:
    """A job's config pickled for its process (JobSpec.payload): by plain pickle (a C loop,
    twice as fast) where that carries it as cloudpickle would, else by cloudpickle."""
    data = _plainly_pickled(config, cloudpickle.DEFAULT_PROTOCOL)
    return data if data is not None else bytes(cloudpickle.dumps(config))


def _plainly_pickled(config: Any, protocol: int) -> bytes | None:
    """`config` by plain pickle; None where cloudpickle would pickle part of it by value, as the
    job's process could not import it: a class from the sweep's `__main__` (a structured
    config's, in the app's script: plain pickle writes its module's name, so the name is looked
    for; a value that merely reads `__main__` only costs the slower path), a class plain pickle
    refuses (a local one), anything from a module registered to go by value."""
    if cloudpickle.list_registry_pickle_by_value():
        return None
    try:
        data = pickle.dumps(config, protocol=protocol)
    except Exception:
        return None
    return None if b"__main__" in data else data
