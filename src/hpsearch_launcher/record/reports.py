"""The sweep's side of the report channel: what a running job appended to its reports file
(`hpsearch_launcher.report`), read as it comes, complete lines only."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..contract import HEARD_FILE
from ..finite import finite_float, is_number


class ReportReader:
    """New (step, value) reports of one job, read from where the last read stopped. With
    `verdicts`, the job waits for each report to be judged: `heard()` says how far it was."""

    def __init__(self, path: Path, verdicts: bool = False) -> None:
        self.path = path
        self.offset = 0
        self.last: tuple[int | None, float | None] = (None, None)
        self.verdicts = verdicts
        self._heard = -1  # the offset the job was last told

    def heard(self) -> None:
        """Tell the job that its reports read so far are judged (a verdict it waits for);
        without verdicts, remove a killed sweep's word, which the job would wait on."""
        if self._heard == self.offset:
            return
        self._heard = self.offset
        path = self.path.parent / HEARD_FILE
        if self.verdicts:
            # Not atomic, not synced: the job may read it half written, and a prefix of a
            # number is never more than the number, so it waits on; an atomic write's fsync
            # cost 8 ms a report here, in the loop every job's verdict waits on.
            path.write_text(str(self.offset))
        else:
            path.unlink(missing_ok=True)

    def read(self) -> list[tuple[int, float]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:  # not written yet (or a node that does not share the sweep dir)
            return []
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        self.offset += end
        points = []
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
                step, value = int(entry["step"]), float(entry["value"])
            except (ValueError, KeyError, TypeError):
                continue  # the job's file: a stray line is its problem, not the sweep's
            if math.isfinite(value):
                points.append((step, value))
        if points:
            self.last = points[-1]
        return points


def reported_peak_mb(path: Path) -> int:
    """The peak GPU memory a job reported (hpsearch_launcher.report_gpu_peak, or its Ray
    worker), in whole MB; 0 when none was (or the file is not one of ours)."""
    return _whole_mb(path, "peak_mb") or 0


def reported_cap_mb(path: Path) -> int | None:
    """The GPU memory cap a job ran under, as its Ray worker recorded it (its node knew the
    GPU's size); None when none was."""
    return _whole_mb(path, "cap_mb")


def _whole_mb(path: Path, key: str) -> int | None:
    try:
        value = json.loads(path.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    number = finite_float(value) if is_number(value) else None
    return None if number is None else max(0, math.ceil(number))
