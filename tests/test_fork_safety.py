"""When the fork server refuses to fork (warm_start=fork falls back to spawning): a thread the
task's module started, a CUDA context torch holds."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from hpsearch_launcher.execute.local.fork_server import fork_unsafe


def test_fork_is_refused_once_a_thread_of_the_tasks_own_runs() -> None:
    own = {t.ident for t in threading.enumerate()}
    assert fork_unsafe(own) is None
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="started-at-import")
    thread.start()
    try:
        assert fork_unsafe(own) == "the task's module started threads at import (started-at-import)"
    finally:
        stop.set()
        thread.join()


def test_fork_is_refused_while_torch_holds_a_cuda_context(monkeypatch: pytest.MonkeyPatch) -> None:
    own = {t.ident for t in threading.enumerate()}
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert fork_unsafe(own) is None  # torch imported, CUDA untouched: forking is safe
    torch.cuda.is_initialized = lambda: True
    assert fork_unsafe(own) == "it holds a CUDA context (torch.cuda.is_initialized())"
