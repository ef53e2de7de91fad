"""preload: auto's plan (plan.preload): what the next spare imports, learned from the jobs."""

from __future__ import annotations

import pytest

from hpsearch_launcher.plan.preload import CHEAP_S, PreloadPlan, denied


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("pycuda.autoinit", "pycuda.autoinit"),
        ("pycuda.autoprimaryctx", "pycuda.autoprimaryctx"),
        ("theano", "theano"),
        ("theano.gpuarray", "theano"),
        ("pycuda", None),  # pycuda alone creates no context
        ("pycuda.driver", None),
        ("theanos", None),
        ("tensorflow", None),
    ],
)
def test_the_deny_list(name: str, entry: str | None) -> None:
    assert denied(name) == entry


def test_auto_learns_in_the_order_jobs_import_never_a_denied_module() -> None:
    plan = PreloadPlan(None)
    plan.learn(["tensorflow", "numpy", "theano"])
    plan.learn(["numpy", "keras"])
    assert plan.modules() == ["tensorflow", "numpy", "keras"]


def test_an_explicit_list_learns_nothing() -> None:
    plan = PreloadPlan(("json",))
    plan.learn(["tensorflow"])
    assert plan.modules() == ["json"]


def test_a_cheap_learned_import_is_not_preloaded_again_an_explicit_one_is() -> None:
    plan = PreloadPlan(None)
    plan.learn(["tensorflow", "numpy"])
    plan.imported("tensorflow", 4.2)
    plan.imported("numpy", CHEAP_S / 2)  # tensorflow had pulled it in already
    assert plan.modules() == ["tensorflow"]
    explicit = PreloadPlan(("json",))
    explicit.imported("json", 0.0)
    assert explicit.modules() == ["json"]


def test_a_failed_module_is_dropped_with_one_warning() -> None:
    plan = PreloadPlan(None)
    plan.learn(["tensorflow", "broken"])
    warning = plan.failed("broken", "failed in a waiting process (ImportError: no)")
    assert warning is not None and "preload broken: failed in a waiting process" in warning
    assert plan.failed("broken", "again") is None  # one warning, not one per spare
    plan.learn(["broken"])
    assert plan.modules() == ["tensorflow"]
