"""results.csv's fixed columns, declared once: their names, their order, their types.

A row is `job`, the swept parameters, `status`, the value columns (what the task returned, its
metrics.json's `final` numbers, its last report), then TAIL. The table writes and checks them
(table.py), the recorder fills them (recorder.py) and `read_results` types them (results.py)
from this table alone: a fixed column is one line of it. Pure: no I/O, nothing imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """A column's type as `read_results` gives it to pandas; "" (unknown, none) is missing."""

    INTEGER = "Int64"  # <NA> where empty
    NUMBER = "float64"  # NaN where empty
    TEXT = "object"  # "" where empty


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind = Kind.TEXT
    required: bool = False  # a results.csv without it is not one this launcher wrote


JOB = Column("job", Kind.INTEGER, required=True)
STATUS = Column("status", required=True)
TAIL = (
    Column("device"),
    Column("gpu_peak_mb", Kind.INTEGER),  # the most GPU memory the job held; "": unknown
    Column("gpu_cap_mb", Kind.INTEGER),  # the GPU memory cap it ran under; "": none (the CPU)
    Column("start"),
    Column("end"),
    Column("wall_time_s", Kind.NUMBER),
    Column("attempts", Kind.INTEGER),
    # Processes it left running when it ended, which were ended with it; "": not looked for.
    Column("leftovers", Kind.INTEGER),
    Column("run_dir", required=True),
    Column("config_hash", required=True),
    Column("error"),
    Column("return"),  # the task's return value as JSON: what resume hands the sweeper again
)
FIXED = (JOB, STATUS, *TAIL)  # a swept key of one of these names is kept apart (param_column)


def names(columns: tuple[Column, ...]) -> tuple[str, ...]:
    return tuple(c.name for c in columns)


def of_kind(kind: Kind) -> tuple[str, ...]:
    """The fixed columns of type `kind`."""
    return tuple(c.name for c in FIXED if c.kind is kind)
