"""A job's config is pickled for its process by plain pickle where that carries it as
cloudpickle would, and by cloudpickle where only cloudpickle can (issue 19: half the cost)."""

from __future__ import annotations

import pickle
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import pytest
from omegaconf import DictConfig, OmegaConf

from hpsearch_launcher.execute.payload import config_payload, task_payload


@dataclass
class Importable:
    lr: float = 0.1


def by_cloudpickle(data: bytes) -> bool:
    """Whether the pickle rebuilds a class by value (cloudpickle's way), not by its name."""
    return b"cloudpickle" in data


def test_a_plain_config_goes_by_plain_pickle_and_comes_back_equal() -> None:
    cfg = OmegaConf.create({"lr": 0.1, "model": {"layers": [8, 16]}, "hydra": {"job": {"num": 3}}})
    data = config_payload(cfg)
    assert data == pickle.dumps(cfg, protocol=cloudpickle.DEFAULT_PROTOCOL)
    assert pickle.loads(data) == cfg


def test_a_structured_config_of_an_importable_class_goes_by_plain_pickle() -> None:
    cfg = OmegaConf.structured(Importable)
    data = config_payload(cfg)
    assert not by_cloudpickle(data)
    assert OmegaConf.get_type(pickle.loads(data)) is Importable


def goes_by_cloudpickle(cls: type) -> None:
    data = config_payload(OmegaConf.structured(cls))
    assert by_cloudpickle(data)
    back = pickle.loads(data)
    assert isinstance(back, DictConfig) and back.lr == 0.1


def test_a_local_class_plain_pickle_refuses_goes_by_cloudpickle() -> None:
    @dataclass
    class Local:
        lr: float = 0.1

    goes_by_cloudpickle(Local)


def test_a_class_of_the_sweeps_main_goes_by_cloudpickle(monkeypatch: pytest.MonkeyPatch) -> None:
    """An app script's structured config: plain pickle would name `__main__.Script`, and the
    job's process has another __main__."""

    @dataclass
    class Script:
        lr: float = 0.1

    Script.__module__, Script.__qualname__ = "__main__", "Script"
    monkeypatch.setattr(sys.modules["__main__"], "Script", Script, raising=False)
    assert b"__main__" in pickle.dumps(OmegaConf.structured(Script))  # plain pickle would do
    goes_by_cloudpickle(Script)


def test_a_task_carried_by_value_keeps_its_file_name_for_tracebacks(tmp_path: Path) -> None:
    """cloudpickle 3 names by-value code `<dynamic-code>`: an app's `__main__` task would raise
    in its job with frames that say neither where they are nor their line (Hydra 1.4's suite
    checks the frames the sweep gets back)."""
    source = tmp_path / "app.py"
    source.write_text("def task(x):\n    if x:\n        raise ValueError(x)\n    return 0\n")
    namespace = {"__name__": "__main__"}  # by value, as a script's task is
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    assert b"<dynamic-code>" in cloudpickle.dumps(namespace["task"])
    task, other = pickle.loads(task_payload(namespace["task"], {"kept": 1}))
    assert other == {"kept": 1} and task(0) == 0
    with pytest.raises(ValueError) as err:
        task(1)
    frame = traceback.extract_tb(err.value.__traceback__)[-1]
    assert (frame.filename, frame.name, frame.lineno) == (str(source), "task", 3)
    assert frame.line == "raise ValueError(x)"
