"""The job's side of the report channel: a task reports its progress, the sweep may stop it.

    from hpsearch_launcher import report, should_stop

    for epoch in range(epochs):
        ...
        if report(val_accuracy, step=epoch):   # True: the sweep pruned this job
            save_checkpoint(); break

Reports go to a file in the job's run dir, one JSON line each (one append: nothing to lose if
the job then crashes, and a few microseconds an epoch); the sweep reads it as the job runs.
The sweep asks a job to stop by creating a file beside it, then ends its process tree after a
short grace. Outside a sweep of the hpsearch launcher both calls do nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from .atomic import write_json_atomic
from .contract import GPU_PEAK_FILE, HEARD_FILE, REPORTS, STOP_FILE
from .finite import finite_float
from .notices import Notices

_notices = Notices(lambda message: print(message, file=sys.stderr))  # once per job
_next_step = 0
# The longest report() waits for the sweep's verdict on it: a sweep too busy to answer in time
# prunes the job at its next report instead, as when nothing waited. Nor more than a tenth of
# the job's time since its previous report: a job that reports every batch is not slowed.
VERDICT_WAIT_S = 0.5
VERDICT_SHARE = 0.1
VERDICT_POLL_S = 0.002
_last_report: float | None = None  # when the previous report() returned (time.monotonic)


def report(value: float, step: int | None = None) -> bool:
    """Report the job's objective `value` at `step` (default: 0, 1, 2, ... per call); return
    whether the sweep asks the job to stop. A NaN or a non-number is ignored (one warning)."""
    global _next_step, _last_report
    path = os.environ.get(REPORTS)
    if not path:
        return False
    number = _number(value)
    if number is None or (step is not None and not isinstance(step, int)):
        _notices.warn(
            "report",
            f"hpsearch: report({value!r}, step={step!r}) ignored: value must be a finite "
            "number and step an integer (warned once)",
        )
        return should_stop()
    step = _next_step if step is None else step
    _next_step = step + 1
    line = json.dumps({"step": step, "value": number}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        os.write(fd, line.encode())
        end = os.lseek(fd, 0, os.SEEK_CUR)  # appended: the end of this line
    finally:
        os.close(fd)
    now = time.monotonic()
    since = None if _last_report is None else now - _last_report
    wait = VERDICT_WAIT_S if since is None else min(VERDICT_WAIT_S, VERDICT_SHARE * since)
    _await_verdict(os.path.dirname(path), end, now + wait)
    _last_report = time.monotonic()
    return should_stop()


def _await_verdict(run_dir: str, end: int, deadline: float) -> None:
    """Where the sweep judges reports (its heard file is there): wait until it judged the
    reports file up to `end`, or pruned the job, or the deadline (time.monotonic) passed."""
    heard, stop = os.path.join(run_dir, HEARD_FILE), os.path.join(run_dir, STOP_FILE)
    while time.monotonic() < deadline and not os.path.exists(stop):
        try:
            with open(heard) as f:
                judged = f.read()
        except OSError:  # no verdicts in this sweep
            return
        if judged.isdigit() and int(judged) >= end:
            return
        time.sleep(VERDICT_POLL_S)


def should_stop() -> bool:
    """Whether the sweep asked this job to stop (pruned): save what it needs and return."""
    path = os.environ.get(REPORTS)
    if not path:
        return False
    return os.path.exists(os.path.join(os.path.dirname(path), STOP_FILE))


def report_gpu_peak(megabytes: float) -> None:
    """Report the most GPU memory the job's framework held, in MB (the sweep also measures
    its processes through NVML, and keeps the larger): at the job's end, e.g. TensorFlow's
    `tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20`, PyTorch's
    `torch.cuda.max_memory_reserved() / 2**20`. Outside a sweep it does nothing."""
    path = os.environ.get(REPORTS)
    number = _number(megabytes)
    if not path or number is None or number < 0:
        return
    write_json_atomic(Path(path).parent / GPU_PEAK_FILE, {"peak_mb": number})


def _number(value: object) -> float | None:
    """A finite float from a number (numpy's and TensorFlow's scalars too); None otherwise:
    text is no number here, even "0.9"."""
    return None if isinstance(value, (bool, str, bytes)) else finite_float(value)
