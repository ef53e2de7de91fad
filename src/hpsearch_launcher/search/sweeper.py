"""sweep(): the search from settings to the last trial's end.

Settings, search space, sampler, pruner and storage are checked before any trial starts; the
study continues what earlier runs of the sweep dir did; the hpsearch launcher then streams
trials (one per free slot), any other launcher runs them in batches of `n_jobs`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobStatus
from hydra.utils import get_method
from omegaconf import OmegaConf

from ..outcome import Status
from ..plan.naming import setting_text
from ..record.leaderboard import leaderboard, summary_metric, summary_mode, summary_options
from ..record.table import FILENAME, ResultsTable
from ..stream import Ask, JobEnd
from .algorithms import make_pruner, make_sampler
from .config import SearchSettings
from .deprecated import params_of_search_space
from .history import OWNER, ended_count, replay_results, started_elsewhere
from .hydra_optuna import unread_sweeper_file
from .optuna_source import Extend, OptunaSource
from .reconcile import reconcile_storage
from .settings import SearchSettingsError, parse_settings
from .space import SearchSpace, SearchSpaceError, grid_of, parse_space
from .space_keys import check_searched_keys
from .study import open_storage, open_study

log = logging.getLogger("hpsearch.sweeper")

DEFAULT_BATCH = 2  # trials per launch() with another launcher, n_jobs unset: Hydra's default
RESULTS_YAML = "optimization_results.yaml"  # the best trial, as Hydra's Optuna sweeper writes it


def sweep(sweeper: Any, arguments: Sequence[str]) -> None:
    config = sweeper.config
    unread = unread_sweeper_file(config)
    if unread is not None:
        raise SearchSettingsError(unread)
    settings = parse_settings(sweeper.params, summary_mode(config))
    params = settings.params
    if params is None and settings.search_space is not None:
        params = params_of_search_space(settings.search_space)
    space = parse_space(params, arguments)
    check_searched_keys(space, config)
    if not space.params and settings.custom_search_space is None:
        raise SearchSpaceError(
            "nothing to search: give a searched value on the command line or in "
            "hydra.sweeper.params (e.g. 'lr=tag(log,interval(1e-4,1e-1))' 'batch=choice(32,64)')"
        )
    grid = grid_of(space) if settings.sampler.name == "grid" else None
    if grid is not None:
        size = math.prod(len(v) for v in grid.values())
        if size < settings.n_trials:
            log.info("hpsearch: n_trials=%d is the grid's size", size)
            settings = dataclasses.replace(settings, n_trials=size)
    extend = custom_search_space(settings.custom_search_space, config)
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
    source = open_search(settings, space, sweep_dir, replay=bool(replay), grid=grid)
    source.extend = extend
    study = source.study
    _log_plan(study, settings, source)
    began = time.monotonic()
    if streams:
        cap = None if settings.n_jobs is None else (settings.n_jobs, "hydra.sweeper.n_jobs")
        sweeper.launcher.stream(source, list(space.params), total=source.planned, at_most=cap)
    else:
        run_batches(sweeper.launcher, source, settings.n_jobs or DEFAULT_BATCH)
    write_best(study, sweep_dir)
    if line := time_line(source, time.monotonic() - began):
        log.info("hpsearch: %s", line)
    if source.failed_too_often or source.none_completed:
        _fail(config, sweep_dir, source.failure_line())


def custom_search_space(path: str | None, config: Any) -> Extend | None:
    """`custom_search_space`'s function, f(cfg, trial), bound to the sweep's config."""
    if path is None:
        return None
    try:
        function = get_method(path)
    except Exception as err:  # Hydra's own: the module or the name is not found
        first = str(err).strip().splitlines()[0]
        raise SearchSettingsError(
            f"hydra.sweeper.custom_search_space={path!r}: {first} (a dotted path to a function "
            "f(cfg, trial), e.g. my_module.configure)"
        ) from None
    return lambda trial: function(config, trial)


def open_search(
    settings: SearchSettings,
    space: SearchSpace,
    sweep_dir: Path,
    replay: bool,
    grid: dict[str, list[Any]] | None = None,
) -> OptunaSource:
    """The study, made or loaded, told what earlier runs of the sweep did, as a JobSource:
    a storage holds its own record; an in-memory study is told results.csv (`replay`)."""
    storage = open_storage(settings.storage, sweep_dir)
    study = open_study(
        settings,
        storage,
        make_sampler(settings, grid),
        make_pruner(settings),
        sweep_dir,
    )
    if settings.storage is not None:
        reconcile_storage(study, storage, space, sweep_dir)
    elif replay:
        replay_results(study, space, sweep_dir)
    if settings.sampler.seed is not None and study.trials:
        # The same seed again would draw the earlier run's first choices again (configs that
        # are then resumed, not searched): a resumed run's seed counts the trials so far.
        study.sampler = make_sampler(settings, grid, seed_offset=len(study.trials))
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
            if not ok:
                _log_failure(ask.key, job_idx + i, ret, first=source.failed_now == 0)
            status = Status.COMPLETED if ok else Status.FAILED
            source.ended(ask.key, JobEnd(ret, status, None, None, job_idx + i))
        job_idx += len(returns)


def _log_failure(trial: object, job_num: int, ret: Any, first: bool) -> None:
    """A failed job's own error, as another launcher hands it back: its traceback the first
    time, its last line after."""
    error = getattr(ret, "_return_value", None)
    if not isinstance(error, BaseException):
        log.error("hpsearch: trial %s (job %d) failed", trial, job_num)
        return
    if first:
        text = "".join(traceback.format_exception(error)).rstrip()
        log.error("hpsearch: trial %s (job %d) failed:\n%s", trial, job_num, text)
    else:
        line = "".join(traceback.format_exception_only(error)).strip()
        log.error("hpsearch: trial %s (job %d) failed: %s", trial, job_num, line)


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
        shown = setting_text(best.params, ", ")
        log.info("hpsearch: best trial %d: %.6g (%s)", best.number, best.value, shown)
    else:
        front = [{"params": t.params, "values": t.values} for t in study.best_trials]
        result["solutions"] = front
        log.info("hpsearch: %d Pareto-optimal trials", len(front))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(result), sweep_dir / RESULTS_YAML)


def time_line(source: OptunaSource, took: float) -> str | None:
    """How long this run searched, against the time its best trial took from its ask to its
    tell (its own training, start to end): what a search costs over training that one model.
    None without a single best trial, or when this run did not train it (an earlier run did)."""
    study = source.study
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(study.directions) > 1 or not done:
        return None
    best = study.best_trial
    if best.user_attrs.get(OWNER) != source.owner or best.duration is None:
        return None
    own = best.duration.total_seconds()
    return (
        f"the search took {took:.1f}s, {took / own:.2f}x its best trial's own time "
        f"(trial {best.number}: {own:.1f}s)"
    )


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
    foreign = started_elsewhere(study) if settings.storage else 0
    if foreign:  # a study Hydra's Optuna sweeper began: its n_trials counted one run's trials
        log.info(
            "hpsearch: %d of the study's trials were run by another sweeper (Hydra's Optuna "
            "sweeper counts n_trials per run; hpsearch counts the whole study): to run %d more, "
            "set hydra.sweeper.n_trials=%d",
            foreign,
            total,
            done + total,
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
        rows, metric = list(table.rows.values()), summary_metric(config)
        log.info("%s", leaderboard(rows, table.params, mode, columns=columns, metric=metric))
    log.error("hpsearch: %s; each trial's logs are in its run dir", line)
    raise SystemExit(1)
