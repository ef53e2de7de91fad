"""Reading a finished (or running) sweep's records from disk: for reports and notebooks.

table = ResultsTable.load(sweep_dir)   # results.csv, checked
print(leaderboard(list(table.rows.values()), table.params, "max"))
"""

from .outcome import DONE, SUPERSEDED
from .record.leaderboard import leaderboard, objective, ranked, summary_options, unfinished
from .record.rows import finite
from .record.table import FILENAME, STATUS, ResultsFileError, ResultsTable

__all__ = [
    "DONE",
    "FILENAME",
    "STATUS",
    "SUPERSEDED",
    "ResultsFileError",
    "ResultsTable",
    "finite",
    "leaderboard",
    "objective",
    "ranked",
    "summary_options",
    "unfinished",
]
