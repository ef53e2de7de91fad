"""sweep(): the search from settings to the last trial's end.

Settings, search space, sampler, pruner and storage are checked before any trial starts; the
study continues what earlier runs of the sweep dir did; the hpsearch launcher then streams
trials (one per free slot), any other launcher runs them in batches of `n_jobs`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobStatus
from omegaconf import OmegaConf

from ..outcome import Status
from ..record.leaderboard import leaderboard, summary_options
from ..record.table import FILENAME, ResultsTable
from ..stream import Ask, JobEnd
from .algorithms import make_pruner, make_sampler
from .config import SearchSettings
from .history import ended_count, replay_results
from .optuna_source import OptunaSource
from .reconcile import reconcile_storage
from .settings import SearchSettingsError, parse_settings
from .space import SearchSpace, SearchSpaceError, parse_space
from .study import open_storage, open_study

log = logging.getLogger("hpsearch.sweeper")

RESULTS_YAML = "optimization_results.yaml"  # the best trial, as Hydra's Optuna sweeper writes it


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """A bad setting or search space, found before any trial starts: `hpsearch: error: ...`
    on one line and exit status 2. HYDRA_FULL_ERROR=1 shows Hydra's own report."""
    try:
        yield
    except (SearchSettingsError, SearchSpaceError) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"hpsearch: error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def sweep(sweeper: Any, arguments: Sequence[str]) -> None:
    config = sweeper.config
    settings = parse_settings(sweeper.params)
    space = parse_space(settings.params, arguments)
    if not space.params:
        raise SearchSpaceError(
            "nothing to search: give a searched value on the command line or in "
            "hydra.sweeper.params (e.g. 'lr=tag(log,interval(1e-4,1e-1))' 'batch=choice(32,64)')"
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the launcher reports each trial
    sweep_dir = Path(str(config.hydra.sweep.dir))
    streams = hasattr(sweeper.launcher, "stream")
    launcher_prune = OmegaConf.select(config, "hydra.launcher.prune", default="none")
    if streams and launcher_prune != "none":
        # The launcher's own rule is for grids; a search prunes through its study.
        raise SearchSettingsError(
            f"hydra.launcher.prune={launcher_prune!r} prunes grids only: with "
            f"hydra/sweeper=hpsearch set hydra.sweeper.pruner={launcher_prune} instead"
        )
    # Only the hpsearch launcher keeps results.csv (and reads it back unless told not to).
    replay = streams and OmegaConf.select(config, "hydra.launcher.resume", default=True)
    source = open_search(settings, space, sweep_dir, replay=bool(replay))
    study = source.study
    _log_plan(study, settings, source)
    if streams:
        sweeper.launcher.stream(source, list(space.params), total=source.planned)
    else:
        run_batches(sweeper.launcher, source, settings.n_jobs)
    write_best(study, sweep_dir)
    if source.failed_too_often:
        _fail(config, sweep_dir, source.failure_line())


def open_search(
    settings: SearchSettings, space: SearchSpace, sweep_dir: Path, replay: bool
) -> OptunaSource:
    """The study, made or loaded, told what earlier runs of the sweep did, as a JobSource:
    a storage holds its own record; an in-memory study is told results.csv (`replay`)."""
    storage = open_storage(settings.storage)
    study = open_study(
        settings,
        storage,
        make_sampler(settings),
        make_pruner(settings),
        str(sweep_dir.resolve()),
    )
    if settings.storage is not None:
        reconcile_storage(study, storage, space, sweep_dir)
    elif replay:
        replay_results(study, space, sweep_dir)
    if settings.seed is not None and study.trials:
        # The same seed again would draw the earlier run's first choices again (configs that
        # are then resumed, not searched): a resumed run's seed counts the trials so far.
        study.sampler = make_sampler(settings, seed_offset=len(study.trials))
    return OptunaSource(study, space, settings, ended_count(study))


def run_batches(launcher: Any, source: OptunaSource, n_jobs: int) -> None:
    """Another launcher: trials in batches of `n_jobs` through launch(), no pruning."""
    log.info(
        "hpsearch: hydra/launcher is %s, not hpsearch: trials run in batches of "
        "hydra.sweeper.n_jobs=%d, each waiting for its slowest trial, and none is pruned",
        type(launcher).__name__,
        n_jobs,
    )
    job_idx = 0
    while not source.exhausted():
        asks: list[Ask] = []
        while len(asks) < n_jobs and (ask := source.ask()) is not None:
            asks.append(ask)
        if not asks:
            return
        try:
            returns = launcher.launch([list(a.overrides) for a in asks], initial_job_idx=job_idx)
        except BaseException:
            for ask in asks:  # Ctrl-C or a launcher's error: the study keeps no RUNNING trial
                source.ended(ask.key, JobEnd(None, Status.INTERRUPTED, None, None, -1))
            raise
        for i, (ask, ret) in enumerate(zip(asks, returns, strict=True)):
            ok = ret.status is JobStatus.COMPLETED
            status = Status.COMPLETED if ok else Status.FAILED
            source.ended(ask.key, JobEnd(ret, status, None, None, job_idx + i))
        job_idx += len(returns)


def write_best(study: optuna.Study, sweep_dir: Path) -> None:
    """The best trial (or the Pareto front) in optimization_results.yaml, as Hydra's Optuna
    sweeper writes it; nothing when no trial completed."""
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not done:
        return
    result: dict[str, Any] = {"name": "hpsearch", "study_name": study.study_name}
    if len(study.directions) == 1:
        best = study.best_trial
        result |= {"best_params": best.params, "best_value": best.value}
        log.info("hpsearch: best trial %d: %s %s", best.number, best.value, best.params)
    else:
        front = [{"params": t.params, "values": t.values} for t in study.best_trials]
        result["solutions"] = front
        log.info("hpsearch: %d Pareto-optimal trials", len(front))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(result), sweep_dir / RESULTS_YAML)


def _log_plan(study: optuna.Study, settings: SearchSettings, source: OptunaSource) -> None:
    done, total = source.ended_before, settings.n_trials
    where = settings.storage or "memory"
    log.info(
        "hpsearch: Optuna study %r (in %s): %d of %d trials done, %d to go; %s, %s, %s",
        study.study_name,
        where,
        min(done, total),
        total,
        source.planned,
        type(study.sampler).__name__,
        type(study.pruner).__name__,
        "/".join(d.name.lower() for d in study.directions),
    )
    if done >= total:
        log.info(
            "hpsearch: the search is complete (n_trials=%d): raise hydra.sweeper.n_trials to "
            "search further",
            total,
        )


def _fail(config: Any, sweep_dir: Path, line: str) -> None:
    """Too many trials failed: the leaderboard (the end-of-sweep callback will not run), then
    one line, exit status 1."""
    if (sweep_dir / FILENAME).exists():
        table = ResultsTable.load(sweep_dir)
        mode, columns = summary_options(config)
        log.info(
            "\n%s", leaderboard(list(table.rows.values()), table.params, mode, columns=columns)
        )
    log.error("hpsearch: %s; each trial's logs are in its run dir", line)
    raise SystemExit(1)
