"""Reading a finished (or running) sweep's records from disk: for reports and notebooks.

frame = read_results(sweep_dir)        # results.csv as a pandas DataFrame, stable types
curve = read_curve(run_dir)            # [(step, value), ...] a job reported (report())
table = ResultsTable.load(sweep_dir)   # results.csv, checked
print(leaderboard(list(table.rows.values()), table.params, "max"))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .contract import REPORTS_FILE
from .outcome import DONE, SUPERSEDED, Status
from .record.columns import Kind, of_kind
from .record.journal import FILENAME as JOURNAL
from .record.leaderboard import (
    leaderboard,
    objective,
    ranked,
    summary_metric,
    summary_options,
    unfinished,
)
from .record.reports import ReportReader
from .record.rows import PRUNED_STEP, finite
from .record.table import FILENAME, STATUS, ResultsFileError, ResultsTable

__all__ = [
    "DONE",
    "FILENAME",
    "PRUNED",
    "PRUNED_STEP",
    "STATUS",
    "SUPERSEDED",
    "ResultsFileError",
    "ResultsTable",
    "finite",
    "leaderboard",
    "objective",
    "ranked",
    "read_curve",
    "read_results",
    "summary_metric",
    "summary_options",
    "unfinished",
]

PRUNED = Status.PRUNED.value
INTEGERS = of_kind(Kind.INTEGER)
NUMBERS = of_kind(Kind.NUMBER)  # with every value column (what jobs returned, metrics.json's)


def read_results(sweep_dir: str | Path) -> Any:
    """The sweep dir's results.csv as a pandas DataFrame whose column types do not depend on
    what the rows hold: `job`, `attempts`, `gpu_peak_mb` and `gpu_cap_mb` Int64 (<NA> where
    empty: the CPU, or not measured); the value columns and `wall_time_s`
    float64 (NaN where empty); a swept parameter float64 when every value is a number, else
    text; every other column text (object), "" where empty. `pandas.read_csv` alone makes an
    all-empty `error` or `return` column float64. Checked as a resumed sweep checks it. Read
    from the sweep's record, results.jsonl, where it has one: results.csv may lag behind it
    while the sweep runs, or after a kill."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("read_results needs pandas: pip install pandas") from None
    path = Path(sweep_dir) / FILENAME
    if not (path.is_file() or (Path(sweep_dir) / JOURNAL).is_file()):  # the record is enough
        raise FileNotFoundError(f"no {FILENAME} in {sweep_dir}: run a sweep into it first")
    table = ResultsTable.load(Path(sweep_dir))
    columns = table.header()
    rows = [[table.rows[num].get(c, "") for c in columns] for num in sorted(table.rows)]
    frame = pd.DataFrame(rows, columns=columns, dtype=object)
    numbers = [*table.values, *NUMBERS]
    numbers += [p for p in table.params if all(_numeric_text(v) for v in frame[p] if v != "")]
    for column in columns:
        if column in (*INTEGERS, *numbers):
            cells = pd.to_numeric(frame[column].where(frame[column] != ""))  # "" -> NaN
            frame[column] = cells.astype("Int64" if column in INTEGERS else "float64")
    return frame


def _numeric_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_curve(run_dir: str | Path) -> list[tuple[int, float]]:
    """What a job reported (`hpsearch_launcher.report`), in order: [] if it reported nothing."""
    return ReportReader(Path(run_dir) / REPORTS_FILE).read()
