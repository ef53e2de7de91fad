"""A Hydra callback for the end of a sweep: the leaderboard, and a non-zero exit on failures.

Any app using the hpsearch launcher can add it to its config:

    hydra:
      callbacks:
        summary:
          _target_: hpsearch_launcher.callbacks.SweepSummary
          mode: max          # or min; default: the sweeper's direction, else max
          columns: []        # results.csv columns to show beside the objective
          metric: objective  # what the objective is, named in the leaderboard (val_accuracy)

Hydra's basic sweeper stops at a failed job (and Ctrl-C stops a sweep) before the sweep's end:
the launcher prints the leaderboard itself then, and this stays silent (Hydra 1.4 calls it on
the way out of such a sweep too).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from .output_dir import OutputDirError
from .record.leaderboard import (
    OBJECTIVE,
    leaderboard,
    study_note,
    summary_options,
    superseded,
    unfinished,
)
from .record.resume_command import resume_hint
from .record.table import ResultsTable
from .sweep_dir import SweepDirBefore

log = logging.getLogger("hpsearch.sweep")


class SweepSummary(Callback):
    def __init__(
        self, mode: str | None = None, columns: Sequence[str] = (), metric: str = OBJECTIVE
    ) -> None:
        self.mode = mode  # None (or anything but max/min): the sweeper's direction, else max
        self.columns = list(columns)
        self.metric = metric  # what the objective is: a metric's name, or the bare return

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Before the sweeper starts: Optuna opens its study first, and a sqlite study kept in
        # the sweep dir (sqlite:///${hydra.sweep.dir}/study.db) needs the dir to be there. How
        # it was before is remembered, for a refusal to put back.
        try:
            SweepDirBefore.remember(config)
        except OutputDirError:
            return  # the launcher says why in one line, before anything is made
        Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if sys.exc_info()[1] is not None:
            # Hydra 1.4 calls this on the way out of a sweep that raised too (a failed job
            # the sweeper raises, Ctrl-C, a refusal): whoever stopped it has said why and
            # shown the leaderboard; 1.3 does not call it then.
            return
        table = ResultsTable.load(Path(str(config.hydra.sweep.dir)))
        rows = list(table.rows.values())
        if not rows:
            return
        direction, _ = summary_options(config)
        mode = self.mode if self.mode in ("max", "min") else direction
        note = study_note(config, rows, table.params, mode)
        if note:
            log.info("%s", note)
        board = leaderboard(
            rows, table.params, mode, columns=self.columns, source=table.path, metric=self.metric
        )
        log.info("%s", board)
        failed = unfinished(rows)
        if failed:
            log.error(
                "hpsearch: %d of %d jobs did not finish; see %s\nhpsearch: %s",
                len(failed),
                len(rows) - len(superseded(rows)),
                table.path,
                resume_hint(config),
            )
            raise SystemExit(1)
