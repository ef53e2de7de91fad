"""The probe app with a fault injected into the sweep's recording path (the exception-safety
test): recording the job numbered $FAULTY_RECORD_JOB raises."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import Any

from hpsearch_launcher.record import recorder as recorder_module

FAIL_JOB = int(os.environ["FAULTY_RECORD_JOB"])
_original = recorder_module.Recorder.write_end


def ended(self: Any, attempt: Any) -> Any:
    if attempt.job.num == FAIL_JOB:
        raise RuntimeError(f"injected fault while recording job {attempt.job.num}")
    return _original(self, attempt)


recorder_module.Recorder.write_end = ended  # type: ignore[method-assign]
sys.argv[0] = str(Path(__file__).with_name("probe.py"))
runpy.run_path(sys.argv[0], run_name="__main__")
