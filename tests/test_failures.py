"""The failure policy: what counts as out of memory, and what is retried. Pure tables."""

from __future__ import annotations

import os
import pickle
import signal
import threading
from dataclasses import fields
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from hpsearch_launcher.execute.failures import Retry, alone_words, is_out_of_memory, retry_kind
from hpsearch_launcher.execute.job.child import result_bytes
from hpsearch_launcher.execute.job.task_error import picklable_error
from hpsearch_launcher.execute.job.wire import Ticket
from hpsearch_launcher.execute.local.fork_child import FAILED_BEFORE_TASK, failed_before_task
from hpsearch_launcher.execute.log_tail import last_error_line
from hpsearch_launcher.outcome import Ending, Outcome, TaskEnd, TaskResult
from hpsearch_launcher.plan.settings import parse_settings

OOM_LINE = "2026-12-01 W tensorflow: OOM when allocating tensor with shape[60000,700]"


@pytest.mark.parametrize(
    ("outcome", "stderr", "oom"),
    [
        (Outcome(Ending.RAISED, detail="ResourceExhaustedError: OOM when allocating"), "", True),
        (Outcome(Ending.RAISED, detail="RuntimeError: CUDA out of memory. Tried"), "", True),
        (Outcome(Ending.RAISED, detail="ValueError: bad"), "", False),
        (Outcome(Ending.EXITED, code=1), f"loading...\n{OOM_LINE}\n", True),  # stderr only
        (Outcome(Ending.EXITED, code=1), "loading...\nall fine\n", False),
        (Outcome(Ending.KILLED, code=int(signal.SIGKILL)), "", True),  # the OOM killer?
        (Outcome(Ending.KILLED, code=int(signal.SIGKILL), oom_killer=True), "", True),
        # The kernel's OOM killer killed nothing meanwhile: a user's or a program's SIGKILL.
        (Outcome(Ending.KILLED, code=int(signal.SIGKILL), oom_killer=False), "", False),
        (Outcome(Ending.KILLED, code=signal.SIGSEGV), "", False),
        (Outcome(Ending.KILLED, code=int(signal.SIGABRT)), "", False),  # below SIGKILL's 9
        (Outcome(Ending.TIMED_OUT, detail="timed out"), OOM_LINE, False),  # our own kill
        (Outcome(Ending.INTERRUPTED, detail="SIGINT"), OOM_LINE, False),
    ],
)
def test_out_of_memory(outcome: Outcome, stderr: str, oom: bool) -> None:
    assert is_out_of_memory(outcome, stderr) is oom


@pytest.mark.parametrize(
    ("ending", "oom", "attempts", "oom_attempts", "settings", "kind"),
    [
        (Ending.RAISED, True, 1, 1, {}, Retry.ALONE),  # max_oom_retries defaults to 1
        (Ending.RAISED, True, 2, 2, {}, None),
        (Ending.RAISED, True, 1, 1, {"max_oom_retries": 2}, Retry.ALONE),
        (Ending.RAISED, False, 1, 0, {"max_retries": 2}, Retry.AGAIN),
        (Ending.RAISED, False, 3, 1, {"max_retries": 1}, None),  # 2 plain failures > 1
        (Ending.RAISED, True, 3, 3, {"max_oom_retries": 2}, None),
        (Ending.RAISED, False, 1, 0, {}, None),  # max_retries defaults to 0
        (Ending.RAISED, False, 1, 0, {"max_retries": 1}, Retry.AGAIN),
        (Ending.TIMED_OUT, False, 1, 0, {"max_retries": 1}, Retry.AGAIN),  # timeouts retry too
        (Ending.TIMED_OUT, False, 2, 0, {"max_retries": 1}, None),
        (Ending.KILLED, False, 2, 1, {"max_retries": 1}, Retry.AGAIN),  # OOM attempts don't count
        (Ending.INTERRUPTED, False, 1, 0, {"max_retries": 5}, None),  # resume reruns those
        (Ending.RETURNED, False, 1, 0, {"max_retries": 5}, None),
    ],
)
def test_retry_kind(
    ending: Ending, oom: bool, attempts: int, oom_attempts: int, settings: dict, kind: str | None
) -> None:
    outcome = Outcome(ending)
    assert retry_kind(outcome, oom, attempts, oom_attempts, parse_settings(settings)) == kind


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (
            Outcome(Ending.EXITED, code=2, last_error="hpsearch: error: lr=-1: must be > 0"),
            "exited with status 2: hpsearch: error: lr=-1: must be > 0",
        ),
        (Outcome(Ending.EXITED, code=3, detail="bye"), "exited with status 3: bye"),
        (Outcome(Ending.KILLED, code=signal.SIGSEGV), "killed by SIGSEGV (segmentation fault)"),
        (Outcome(Ending.KILLED, code=99), "killed by signal 99"),
        (Outcome(Ending.RAISED, detail="ValueError: x"), "ValueError: x"),
        (Outcome(Ending.RETURNED), ""),
    ],
)
def test_reasons_are_derived_from_the_outcome(outcome: Outcome, reason: str) -> None:
    assert outcome.reason == reason


def test_the_last_error_line_is_the_jobs_own() -> None:
    tail = "epoch 1/5\nTraceback (most recent call last):\n  File x\nKeyError: 'x_test'\nbye\n"
    assert last_error_line(tail) == "KeyError: 'x_test'"
    assert last_error_line("all good\n") == ""
    assert len(last_error_line("Error " + "x" * 1000)) == 300


def test_a_result_reads_back_as_written_and_nothing_else_passes_for_one() -> None:
    """What a job's process hands back (execute.job.child.result_bytes) is read by both backends
    through TaskResult.from_bytes: an unpicklable return value comes back described, and a
    file that holds anything but a TaskResult is refused by name."""
    ret = JobReturn(status=JobStatus.COMPLETED, _return_value=0.5)
    read = TaskResult.from_bytes(result_bytes(TaskResult(TaskEnd.RETURNED, ret)))
    assert read.end is TaskEnd.RETURNED and read.job_return.return_value == 0.5
    locked = JobReturn(status=JobStatus.COMPLETED, _return_value=threading.Lock())
    described = TaskResult.from_bytes(result_bytes(TaskResult(TaskEnd.RETURNED, locked)))
    assert described.job_return._return_value.startswith("<unpicklable lock: ")
    assert described.detail.startswith("TypeError: ")
    with pytest.raises(TypeError, match="should be a TaskResult, not dict"):
        TaskResult.from_bytes(pickle.dumps({"end": "returned"}))


def test_a_results_configs_are_unpickled_only_when_read() -> None:
    """The configs a job's JobReturn carries back are most of its result and most of the
    sweep's CPU per job to unpickle: the sweep reads them only if asked (Hydra's launcher
    tests and callbacks do), and then they are what the job had."""
    cfg, hydra_cfg = OmegaConf.create({"lr": 0.1}), OmegaConf.create({"hydra": {"job": {}}})
    ret = JobReturn(["lr=0.1"], cfg, hydra_cfg, "/w", "t", JobStatus.COMPLETED, 0.5)
    read = TaskResult.from_bytes(result_bytes(TaskResult(TaskEnd.RETURNED, ret)))
    back = read.job_return
    assert isinstance(back, JobReturn) and back.return_value == 0.5
    assert not any(isinstance(v, DictConfig) for v in vars(back).values()), "unpickled early"
    assert (back.cfg, back.hydra_cfg) == (cfg, hydra_cfg)
    assert isinstance(back.cfg, DictConfig)
    assert [getattr(back, f.name) for f in fields(JobReturn)] == list(vars(ret).values())
    back.cfg = None
    assert back.cfg is None and back.hydra_cfg == hydra_cfg


@pytest.mark.parametrize(
    ("device", "alone", "too_big"),
    [
        ("0", "alone on its GPU with the whole memory", "the job needs more than one GPU holds"),
        ("cpu", "alone, with no other job running beside it", "more memory than this machine has"),
    ],
)
def test_a_retry_alone_is_worded_for_its_device(device: str, alone: str, too_big: str) -> None:
    """A sweep without GPUs (gpus=[]) is never told of a GPU it does not have."""
    words = alone_words(device)
    assert words[0] == alone and too_big in words[1]
    assert device != "cpu" or not any("GPU" in w for w in words)


def test_a_tasks_keyboard_interrupt_comes_back_as_an_exception() -> None:
    """A sweeper that reads a failed job's return value raises its error in the sweep: a
    KeyboardInterrupt there would read as Ctrl-C pressed on the sweep."""
    back = picklable_error(KeyboardInterrupt())
    assert type(back) is RuntimeError and str(back) == "KeyboardInterrupt"
    error = ValueError("x")
    assert picklable_error(error) is error


def test_a_forked_process_that_fails_before_its_task_says_so_in_the_jobs_log(
    tmp_path: Path,
) -> None:
    """Exit status 70 is only this, and the job's stderr.log says why (its last error line,
    which the sweep shows, says so)."""
    stderr = tmp_path / "stderr.log"
    ticket = Ticket(config=b"", stdout=str(tmp_path / "stdout.log"), stderr=str(stderr), subdir="")
    job_file = tmp_path / "job"
    job_file.write_bytes(ticket.to_bytes())
    pid = os.fork()
    if pid == 0:  # the forked child: it never returns here
        try:
            raise OSError(28, "No space left on device")
        except OSError as err:
            failed_before_task(err, str(job_file))
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == FAILED_BEFORE_TASK == 70
    text = stderr.read_text()
    assert text.startswith("Traceback (most recent call last):\n"), text
    assert last_error_line(text) == (
        "hpsearch: error: the forked process failed before its task began (exit status 70): "
        "OSError: [Errno 28] No space left on device"
    )
