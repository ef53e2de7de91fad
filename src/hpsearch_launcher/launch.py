"""launch(): plan the sweep, run each job in its own process on its slot, collect JobReturns.

Data flows one way: settings -> plan (devices, slots, jobs, names) -> processes (a backend)
-> records (results.csv) and one JobReturn per job, in input order.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, setup_globals
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

from .batch import BatchSource
from .disk_errors import CannotWrite, cannot_write
from .execute.backend import Execution
from .execute.payload import task_payload
from .execute.sweep import Sweep
from .one_line import refuse
from .output_dir import OutputDirError
from .plan.backends import BACKENDS, BackendEntry
from .plan.jobs import Job, JobConfigError, JobFactory, compose_jobs
from .plan.settings import LauncherSettings, LauncherSettingsError, parse_settings
from .plan.slots import CPU
from .record.leaderboard import (
    leaderboard,
    summary_metric,
    summary_options,
    superseded,
    unfinished,
)
from .record.lock import SweepDirLocked, hold_sweep_dir
from .record.progress import counted
from .record.recorder import Recorder
from .record.resume_command import resume_hint
from .record.table import FILENAME, SAVE_INTERVAL_S, ResultsFileError, ResultsTable
from .stream import Ask, JobSource
from .sweep_dir import SweepDirBefore

log = logging.getLogger("hpsearch.launcher")

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def launch(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[JobReturn]:
    """A sweeper's batch: every job composed and checked first, then run; one JobReturn per
    job, in input order."""

    def batch(config: DictConfig, settings: LauncherSettings, recorder: Recorder) -> Feed:
        jobs = compose_jobs(
            launcher.composer,
            getattr(launcher.task_function, "preflight", None),
            job_overrides,
            # Not the sweeper's initial_job_idx: resumed jobs keep their numbers and take none.
            recorder.next_job,
            recorder.resumable() if settings.resume else {},
        )
        jobs = [recorder.numbered(job) for job in jobs]
        source = BatchSource(jobs, settings)
        return Feed(source, source.job, len(jobs), counted(len(jobs), "job"))

    config, recorder, feed = _sweep(launcher, batch)
    assert isinstance(feed.source, BatchSource)
    returns: list[JobReturn] = feed.source.returns
    if sweeper_stops(config, sum(r.status.name == "FAILED" for r in returns), len(returns)):
        report_failures(config, recorder)
    return returns


def stream(
    launcher: Any,
    source: JobSource,
    swept_keys: Sequence[str],
    total: int | None,
    at_most: tuple[int, str] | None = None,
) -> None:
    """A sweeper's stream: jobs asked from `source` whenever a slot is free, each composed
    and checked when it is asked; every report and end goes back to it as it happens.
    `at_most`: the most jobs `source` lets run at once, and the setting that says so."""

    def asked(config: DictConfig, settings: LauncherSettings, recorder: Recorder) -> Feed:
        factory = JobFactory(
            launcher.composer,
            getattr(launcher.task_function, "preflight", None),
            set(swept_keys),
            recorder.resumable() if settings.resume else {},
        )
        count = itertools.count()

        def make_job(ask: Ask) -> Job:
            return recorder.numbered(factory.make(next(count), ask.overrides, recorder.next_job))

        return Feed(source, make_job, total, "jobs as they are asked", at_most)

    _sweep(launcher, asked)


@dataclass(frozen=True)
class Feed:
    """What a sweep runs: its source, how an asked job is made, how many, in words."""

    source: JobSource
    make_job: Callable[[Ask], Job]
    total: int | None
    what: str
    at_most: tuple[int, str] | None = None  # the source's own cap on jobs at once, and why


def _sweep(
    launcher: Any, prepare: Callable[[DictConfig, LauncherSettings, Recorder], Feed]
) -> tuple[DictConfig, Recorder, Feed]:
    """The part launch() and stream() share: settings, the backend (this machine's devices,
    checked before results.csv is touched; a cluster, joined only once the feed is found good:
    plan/backends.py says which), the records, the jobs' feed from `prepare`, and the sweep."""
    config, settings, task = _setup(launcher)
    backend = BACKENDS[settings.backend]
    execution = _open(backend, settings, task, config) if backend.opens_first else None
    try:
        opened = launcher.records is None
        recorder = _records(launcher, config, settings)
        feed = prepare(config, settings, recorder)
        execution = execution or _open(backend, settings, task, config)
        if opened:  # the sweep will run: nothing refused it
            if settings.resume:
                recorder.table.keep()
            else:
                set_aside_earlier(recorder.table)
        _announce(execution, feed, config)
        sweep = Sweep(settings, execution, recorder, feed.source, feed.make_job, feed.total)
        _run(sweep, config)
    finally:
        if execution is not None:
            execution.backend.close()
    return config, recorder, feed


def _setup(launcher: Any) -> tuple[DictConfig, LauncherSettings, bytes]:
    setup_globals()
    config: DictConfig = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    settings = parse_settings(launcher.params)
    task = task_payload(launcher.hydra_context, launcher.task_function, Singleton.get_state())
    return config, settings, task


def _records(launcher: Any, config: DictConfig, settings: LauncherSettings) -> Recorder:
    """The sweep's records, opened at its first launch() and kept for the later ones."""
    if launcher.records is None:
        launcher.records = open_records(Path(str(config.hydra.sweep.dir)), settings)
    recorder: Recorder = launcher.records
    return recorder


def _open(
    backend: BackendEntry, settings: LauncherSettings, task: bytes, config: DictConfig
) -> Execution:
    """The backend's Execution, its opener imported only now (Ray's only for backend=ray)."""
    execution = backend.resolve()(settings, task, Path(str(config.hydra.sweep.dir)))
    assert isinstance(execution, Execution), backend.opener
    return execution


def _announce(execution: Execution, feed: Feed, config: DictConfig) -> None:
    """The sweep's first line: what runs where, how many at a time (the slots', or fewer where
    the source caps them: the number that really runs, and why)."""
    if execution.packs:
        at_a_time = "as many at a time per GPU as their measured memory fits (jobs_per_gpu=auto)"
    elif execution.groups == (CPU,) or not execution.unit:
        at_a_time = f"{execution.slots * len(execution.groups)} at a time"
    else:
        at_a_time = f"{execution.slots} at a time per {execution.unit}"
    slots = None if execution.packs else execution.slots * len(execution.groups)
    if feed.at_most is not None and (slots is None or feed.at_most[0] < slots):
        count, setting = feed.at_most
        at_a_time = f"{count} at a time ({setting}={count}; the slots would take {at_a_time})"
    resources, sweep_dir = execution.resources, config.hydra.sweep.dir
    log.info("hpsearch: %s on %s, %s; sweep dir %s", feed.what, resources, at_a_time, sweep_dir)


def _run(sweep: Sweep, config: DictConfig) -> None:
    try:
        sweep.run()
    except SystemExit:  # stopped by Ctrl-C or SIGTERM: the running jobs are recorded
        # The end-of-sweep callback will not run: what finished so far, then how to go on.
        log.info("%s", _leaderboard(config, sweep.recorder))
        log.error("hpsearch: %s", resume_hint(config))
        raise


def _leaderboard(config: DictConfig, recorder: Recorder) -> str:
    """The end-of-sweep leaderboard, of the rows recorded so far."""
    mode, columns = summary_options(config)
    rows = list(recorder.table.rows.values())
    return leaderboard(
        rows,
        recorder.table.params,
        mode,
        columns=columns,
        source=recorder.table.path,
        metric=summary_metric(config),
    )


def report_failures(config: DictConfig, recorder: Recorder) -> None:
    """The sweeper is about to raise the first failure: show the whole picture first (the
    end-of-sweep callback that prints it otherwise will not run)."""
    rows = list(recorder.table.rows.values())
    log.info("%s", _leaderboard(config, recorder))
    log.error(
        "hpsearch: %d of %d jobs failed; each one's logs are in its run dir (stdout.log, "
        "stderr.log); results in %s\nhpsearch: %s",
        len(unfinished(rows)),
        len(rows) - len(superseded(rows)),
        recorder.table.path,
        resume_hint(config),
    )


@contextlib.contextmanager
def one_line_errors(launcher: Any = None) -> Iterator[None]:
    """A bad setting, a job's bad config (one Hydra cannot compose too: `Could not override
    'x'`), an unreadable results.csv, a sweep dir another sweep holds or one that cannot be
    made, found before any job starts: `hpsearch: error: ...` on one line and exit status 2,
    as a single run of hpsearch says it. Given the launcher, and
    refused at the sweep's first launch(), when none of its jobs has run, the sweep dir is put
    back as it was (`SweepDirBefore`, which the launcher took in setup()). HYDRA_FULL_ERROR=1
    shows Hydra's own report, traceback included."""
    before: SweepDirBefore | None = getattr(launcher, "sweep_dir_before", None)
    first = launcher is not None and launcher.records is None
    try:
        yield
    except (CannotWrite, OSError) as err:  # OSError: a disk's, naming its file, else not ours
        disk = cannot_write(err)
        if disk is None or launcher is None:
            raise
        refuse(disk_stop_line(disk, launcher.config), err, status=1)
    except (
        LauncherSettingsError,
        JobConfigError,
        ResultsFileError,
        SweepDirLocked,
        OutputDirError,
        ConfigCompositionException,
    ) as err:
        # A dir another sweep holds is that sweep's: it is not put back.
        put_back = first and not isinstance(err, SweepDirLocked)
        line = " ".join(part.strip() for part in str(err).splitlines() if part.strip())
        refuse(line, err, before.restore if before is not None and put_back else None)


def disk_stop_line(disk: CannotWrite, config: DictConfig) -> str:
    """A file the disk refused: which and why, what the sweep did, the command that resumes."""
    ended = f", ending {counted(disk.ended, 'running job')}" if disk.ended else ""
    return f"{disk}; the sweep stopped{ended}; {resume_hint(config, disk.once)}"


def open_records(sweep_dir: Path, settings: LauncherSettings) -> Recorder:
    """The sweep dir's results.csv, read to resume; with resume=false, a fresh table (the
    earlier file is set aside once every job's config is found good: set_aside_earlier)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = hold_sweep_dir(sweep_dir)  # before results.csv is read or set aside
    if settings.resume:
        table = ResultsTable.load(sweep_dir)  # kept (written) once nothing refused the sweep
        first = table.max_job() + 1
    else:
        table, first = ResultsTable(sweep_dir / FILENAME), 0
    table.min_interval = SAVE_INTERVAL_S  # 1,000 jobs ending must not mean 1,000 rewrites
    return Recorder(table, first, lock, settings.resume)


def set_aside_earlier(table: ResultsTable) -> None:
    """resume=false: the earlier results.csv, unread, kept as results.csv.bak (or .bak2...)."""
    moved = table.set_aside()
    if moved is not None:
        log.warning("hpsearch: resume=false: the earlier %s is kept as %s", FILENAME, moved)


def sweeper_stops(config: DictConfig, failed: int, total: int) -> bool:
    """Whether the sweeper will raise on this batch's failures: Hydra's basic sweeper on any;
    Optuna's when they exceed its max_failure_rate; other sweepers: assume not."""
    if not failed:
        return False
    if OmegaConf.select(config, "hydra.sweeper._target_") == BASIC_SWEEPER:
        return True
    rate = OmegaConf.select(config, "hydra.sweeper.max_failure_rate", default=None)
    return rate is not None and failed / total > float(rate)
