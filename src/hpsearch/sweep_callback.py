"""A Hydra callback for the end of a sweep: the leaderboard, and a non-zero exit on failures.

Configured in conf/config.yaml (`hydra.callbacks.summary`); any app using the hpsearch launcher
can add it. Hydra's basic sweeper stops at a failed job before this runs; the launcher prints
the leaderboard itself in that case.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from hpsearch.leaderboard import leaderboard, objective_mode
from hpsearch.results_table import DONE, ResultsTable

log = logging.getLogger("hpsearch.sweep")


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        table = ResultsTable.load(Path(str(config.hydra.sweep.dir)))
        rows = list(table.rows.values())
        if not rows:
            return
        log.info("\n%s", leaderboard(rows, table.params, objective_mode(config)))
        failed = [r for r in rows if r.get("status") not in DONE]
        if failed:
            log.error(
                "hpsearch: %d of %d jobs did not finish; see %s", len(failed), len(rows), table.path
            )
            raise SystemExit(1)
