"""Put back each bug an audit planted (RELIABILITY.md's tables), one at a time, in a copy of the
tree, and run the test that must catch it; several times, since "caught" means every time.

    python tools/planted.py [--times N] [--only TEXT]

Each bug is a text replacement that must match exactly once (else the table is stale and the
script says which; tests/test_planted.py checks every entry fits, in the suite, so a move of
the code cannot silently retire one). The unmutated copy's tests run first: a test red without
its bug proves nothing. Not run by CI (a few minutes per pass); exit status 1 if any bug got
past a run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PKG = "src/hpsearch_launcher/"


@dataclass(frozen=True)
class Planted:
    area: str
    path: str  # under src/hpsearch_launcher/
    old: str
    new: str
    tests: tuple[str, ...]  # pytest node ids (or `file::name`, run with -k when parametrized)


PRUNE_SIGNALS = ("tests/test_pruning.py::test_a_pruned_job_gets_sigterm_then_sigkill",)
RESUMED_KEEPS = (
    "tests/test_stream.py::test_a_resumed_trial_keeps_its_number_and_a_pruned_one_stays_pruned",
)
# The same promises, held by the test file of the module each bug is in (issue 46).
RECORDER = "tests/test_recorder.py::"
RESUMED_NEAR = {
    "record/recorder.py": (
        RECORDER + "test_a_resumed_row_keeps_the_status_it_ended_with",
        RECORDER + "test_a_new_job_takes_the_next_number_and_a_resumed_one_none",
    ),
    "execute/bookkeeper.py": (
        "tests/test_bookkeeper.py::test_a_resumed_job_is_ended_at_once_its_source_told_how",
    ),
}
SPARE_DIED = (
    "tests/test_preload_auto.py::test_a_module_whose_import_killed_a_waiting_spare_is_dropped",
)

ISSUE_30 = (
    Planted(
        "pruning: SIGKILL at once",
        "execute/running.py",
        "force=now >= run.pruning.kill_at + 1.0",
        "force=True",
        PRUNE_SIGNALS,
    ),
    Planted(
        "pruning: never SIGKILL",
        "execute/running.py",
        "force=now >= run.pruning.kill_at + 1.0",
        "force=False",
        PRUNE_SIGNALS,
    ),
    Planted(
        "pruning (grid): pruned curves in the median",
        "batch.py",
        "end.status is Status.COMPLETED",
        "end.status in (Status.COMPLETED, Status.PRUNED)",
        ("tests/test_pruning.py::test_a_grids_median_is_of_completed_jobs_only",),
    ),
    Planted(
        "report channel: False after an ignored value",
        "channel.py",
        ")\n        return should_stop()",
        ")\n        return False",
        ("tests/test_pruning.py::test_reports_reach_the_reader_and_hostile_ones_are_ignored",),
    ),
    Planted(
        "search: running trials not subtracted",
        "search/optuna_source.py",
        "self.n_trials - self.ended_total - len(self.running)",
        "self.n_trials - self.ended_total",
        ("tests/test_search_source.py::test_what_remains_to_ask_leaves_out_the_running_trials",),
    ),
    Planted(
        "search: the race's count not reset by a report ahead",
        "search/optuna_source.py",
        "self.behind[trial.number] + 1 if behind else 0",
        "self.behind[trial.number] + behind",
        ("tests/test_race.py::test_the_last_trials_race_the_best",),
    ),
    Planted(
        "search: the race's rival need not have gone past the step",
        "search/optuna_source.py",
        "and self.furthest[n] > step",
        "",
        ("tests/test_race.py::test_a_running_trial_level_is_no_rival",),
    ),
    Planted(
        "search: failure rate of all n_trials",
        "search/optuna_source.py",
        "self.max_failure_rate * self.planned",
        "self.max_failure_rate * self.n_trials",
        ("tests/test_search_source.py::test_a_resumed_runs_failure_rate_counts_its_own_share",),
    ),
    Planted(
        "search: resume=false replays",
        "search/sweeper.py",
        'replay = streams and OmegaConf.select(config, "hydra.launcher.resume", default=True)',
        "replay = streams",
        ("tests/test_sweeper_e2e.py::test_resume_false_reads_nothing_and_searches_afresh",),
    ),
    Planted(
        "search resume: a new job number",
        "record/recorder.py",
        "self.next_job += job.previous is None",
        "self.next_job += 1",
        RESUMED_KEEPS,
    ),
    Planted(
        "resume (stream): pruned taken as resumed",
        "execute/bookkeeper.py",
        "Status.PRUNED if pruned_before else Status.RESUMED",
        "Status.RESUMED",
        RESUMED_KEEPS,
    ),
    Planted(
        "resume (recorder): pruned taken as completed",
        "record/recorder.py",
        'if row.get("status") == Status.RESUMED.value:',
        "if True:",
        RESUMED_KEEPS,
    ),
    Planted(
        "packing: an OOM forgotten",
        "execute/packer.py",
        "self.estimates.outgrown(run.kind)",
        "pass",
        ("tests/test_packing.py::test_after_an_out_of_memory_its_kinds_next_jobs_run_alone",),
    ),
    Planted(
        "packing: an unlisted job holds another user's memory",
        "execute/room.py",
        "if self.pids_visible:",
        "if False:",
        (
            "tests/test_free_memory.py::"
            "test_once_nvml_lists_our_pids_a_job_it_does_not_list_holds_nothing",
        ),
    ),
    Planted(
        "preload: last imports not told",
        "execute/job/child.py",
        "watch.check()  # what it imported last",
        "pass  # what it imported last",
        ("tests/test_preload_auto.py::test_what_a_job_imports_last_is_told_as_its_task_returns",),
    ),
    Planted(
        "preload: a killing import kept (spare pool)",
        "execute/local/spare_pool.py",
        "self.preloads.died(spare, code)",
        "pass",
        SPARE_DIED,
    ),
    Planted(
        "preload: a killing import kept (Preloads.died)",
        "execute/local/spare.py",
        'self.drop(spare.importing[0], f"a waiting process died importing it ({how})")',
        "pass",
        SPARE_DIED,
    ),
    Planted(
        "lock: heartbeat every 60 s",
        "record/lock.py",
        "HEARTBEAT_S = 10.0",
        "HEARTBEAT_S = 60.0",
        (
            "tests/test_sweep_lock.py::test_a_live_holder_beats_every_10_s_well_within_the_stale_age",
        ),
    ),
    Planted(
        "lock: the beat waits 60 s",
        "record/lock.py",
        "while not stop.wait(HEARTBEAT_S):",
        "while not stop.wait(60.0):",
        (
            "tests/test_sweep_lock.py::test_a_live_holder_beats_every_10_s_well_within_the_stale_age",
        ),
    ),
    Planted(
        "subdir: Hydra overrides left out",
        "plan/subdir.py",
        "hydra_overrides + task_overrides",
        "task_overrides",
        ("tests/test_subdir.py::test_an_explicit_subdir_anywhere_is_the_users",),
    ),
)


FORK_TESTS = ("tests/test_fork_server.py",)  # a whole file: run with -n 2

# Issue 30's own pass over the fork server (planted by hand: its tests are end-to-end sweeps).
FORK_SERVER = (
    Planted("fork: no reseed", "execute/local/fork_child.py", "    reseed()\n", "", FORK_TESTS),
    Planted(
        "fork: NumPy not reseeded",
        "execute/local/fork_child.py",
        "numpy.random.seed()",
        "pass",
        FORK_TESTS,
    ),
    Planted(
        "fork: no session of its own",
        "execute/local/fork_child.py",
        "os.setsid()  # its own session",
        "pass  # its own session",
        FORK_TESTS,
    ),
    Planted(
        "fork: no watchdog on the server",
        "execute/local/fork_server.py",
        "start_watchdog(sweep)  # it sleeps",
        "pass  # it sleeps",
        FORK_TESTS,
    ),
    Planted(
        "fork: the job's environment not applied",
        "execute/local/fork_child.py",
        "apply_env(message.env, message.unset)",
        "pass",
        FORK_TESTS,
    ),
    Planted(
        "fork: the server's variables not unset",
        "execute/local/fork_child.py",
        "os.environ.pop(name, None)",
        "pass",
        FORK_TESTS,
    ),
    Planted(
        "fork: an exit code told as 0",
        "execute/local/fork_server.py",
        "code=os.waitstatus_to_exitcode(wait_status)",
        "code=0",
        FORK_TESTS,
    ),
    Planted(
        "fork: the task's threads not refused",
        "execute/local/fork_server.py",
        "    if started:\n",
        "    if False:\n",
        FORK_TESTS,
    ),
    Planted(
        "fork: stdin left open",
        "execute/local/fork_server.py",
        "os.dup2(null, 0)",
        "pass",
        FORK_TESTS,
    ),
    Planted(
        "fork: the server's status pipe held by the job",
        "execute/local/fork_server.py",
        "os.close(self.status.fd)  # the server's",
        "pass  # the server's",
        FORK_TESTS,
    ),
    Planted(
        "fork: a failed start exits 0",
        "execute/local/fork_child.py",
        "os._exit(FAILED_BEFORE_TASK)",
        "os._exit(0)",
        (
            "tests/test_failures.py::test_a_forked_process_that_fails_before_its_task_says_so_in_the_jobs_log",
        ),
    ),
    Planted(
        "fork: the GC not frozen",
        "execute/local/fork_server.py",
        "        gc.freeze()\n",
        "",
        FORK_TESTS,
    ),
    Planted(
        "fork ahead: its own socket's other end kept (never sees its dismissal)",
        "execute/local/fork_server.py",
        "    mine.close()\n",
        "",
        FORK_TESTS,
    ),
    Planted(
        "fork ahead: kept when modules are learned (a job lacks them)",
        "execute/local/fork_server.py",
        "self._dismiss_ahead(len(self.ahead))  # they would lack the modules",
        "pass",
        FORK_TESTS,
    ),
    Planted(
        "fork ahead: none kept (each job forked when its slot frees)",
        "execute/local/fork_policy.py",
        "server.keep_ahead(1 if jobs_left else 0)",
        "server.keep_ahead(0)",
        FORK_TESTS,
    ),
    Planted(
        "fork ahead: kept once no job is left to start",
        "execute/local/fork_policy.py",
        "server.keep_ahead(1 if jobs_left else 0)",
        "server.keep_ahead(1)",
        FORK_TESTS,
    ),
    Planted(
        "forked: ready while still importing",
        "execute/local/fork_client.py",
        "return self.spare.batches <= 0 and self.spare.proc.poll() is None",
        "return self.spare.proc.poll() is None",
        FORK_TESTS,
    ),
    Planted(
        "forked: an orphan not killed",
        "execute/local/fork_client.py",
        "                        _kill_tree(message.pid)\n                        continue",
        "                        continue",
        FORK_TESTS,
    ),
    Planted(
        "forked: a child lost with its server taken for killed, not lost",
        "execute/local/forked_process.py",
        "self.exited(-signal.SIGKILL, lost)",
        "self.exited(-signal.SIGKILL)",
        (
            "tests/test_server_faults.py::"
            "test_a_killed_server_the_sweep_cannot_adopt_from_loses_its_jobs_not_to_memory",
        ),
    ),
    Planted(
        "forked: the answer's child made again",
        "execute/local/fork_client.py",
        "        return child, read_end",
        "        return ForkedProcess(child.pid), read_end",
        FORK_TESTS,
    ),
    Planted(
        "forked: a late answer's child kept",
        "execute/local/fork_client.py",
        "_kill_tree(message.pid)\n                        continue",
        "continue",
        FORK_TESTS,
    ),
    Planted(
        "forking: a dead server not fallen back from",
        "execute/local/fork_policy.py",
        "                self._fall_back(why)\n",
        "                pass\n",
        FORK_TESTS,
    ),
    Planted(
        "forking: a failed fork not fallen back from",
        "execute/local/fork_policy.py",
        "self._fall_back(str(err))",
        "pass",
        FORK_TESTS,
    ),
)
# Issue 46: a third audit's survivors, and the new defaults' guards.
ISSUE_46 = (
    *(p for p in ISSUE_30 if p.area == "preload: last imports not told"),
    Planted(
        "grid: an integer range's stop dropped",
        "search/space.py",
        "range(dist.low, dist.high + 1, dist.step)",
        "range(dist.low, dist.high, dist.step)",
        ("tests/test_search_space.py::test_the_grid_samplers_grid_is_each_ranges_values",),
    ),
    Planted(
        "deprecated search_space: an int entry searched as floats",
        "search/deprecated.py",
        'kind = int if entry["type"] == "int" else float',
        "kind = float",
        ("tests/test_search_deprecated.py::test_each_entry_searches_its_types_values",),
    ),
    Planted(
        "search: the SweepSummary callback's mode not followed",
        "search/settings.py",
        'DIRECTIONS.get(str(summary_mode), "minimize")',
        '"minimize"',
        ("tests/test_search_settings.py::test_the_direction_follows_the_summary_callbacks_mode",),
    ),
    *(
        Planted(f"{p.area} (near)", p.path, p.old, p.new, RESUMED_NEAR[p.path])
        for p in ISSUE_30
        if p.tests == RESUMED_KEEPS
    ),
    Planted(
        "resume (jobs): a resumed job takes a new number",
        "plan/jobs.py",
        'num = int(previous["job"])',
        "pass",
        ("tests/test_compose.py::test_a_resumed_job_keeps_its_rows_number_and_the_new_ones_go_on",),
    ),
    Planted(
        "journal: a job's first line wins",
        "record/journal.py",
        "record.rows[num] = row",
        "record.rows.setdefault(num, row)",
        ("tests/test_durable_record.py::test_the_last_of_a_jobs_journal_lines_wins",),
    ),
    Planted(
        "any app: Hydra's + hint for a mistyped setting",
        "compose_errors.py",
        "words = None if bad is None else in_our_words(bad)",
        "words = None",
        ("tests/test_compose_errors.py",),
    ),
    Planted(
        "lock: the file left behind",
        "record/lock.py",
        "            os.unlink(path)",
        "            os.ftruncate(fd, 0)",
        ("tests/test_sweep_lock.py::test_released_on_close_and_when_no_one_keeps_it",),
    ),
    Planted(
        "search resume: trial numbers drift from job numbers",
        "search/history.py",
        "        told.append(_row_only())",
        "        pass",
        ("tests/test_search_source.py::test_a_resumed_searchs_trial_numbers_are_its_job_numbers",),
    ),
    Planted(
        "search: median pruner judges the first report",
        "search/algorithms.py",
        "settled = PRUNER_DEFAULTS.get(settings.pruner)",
        "settled = None",
        (
            "tests/test_search_settings.py::"
            "test_the_median_pruners_judge_no_trial_on_its_first_report",
        ),
    ),
)
SETS = {"issue-30": ISSUE_30, "fork": FORK_SERVER, "issue-46": ISSUE_46}


def copy_tree() -> Path:
    work = Path(tempfile.mkdtemp(prefix="planted-"))
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        target = work / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        source = REPO / name.decode()
        if source.is_symlink():  # src/hpsearch/conf -> ../../conf: the app's configs
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    return work


def run_tests(work: Path, tests: tuple[str, ...]) -> bool:
    """Whether the tests passed, in the copy (PYTHONPATH before the installed checkout)."""
    env = {**os.environ, "PYTHONPATH": f"{work / 'src'}:{work}"}
    for test in tests:
        target, _, name = test.partition("::")
        select = ["-n", "0", "-k", name] if name else ["-n", "2"]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                target,
                *select,
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--set", choices=sorted(SETS), default="issue-30")
    parser.add_argument("--only", default="", help="only the bugs whose area contains this")
    args = parser.parse_args()
    chosen = [p for p in SETS[args.set] if args.only in p.area]
    work = copy_tree()
    got_past = 0
    green: set[tuple[str, ...]] = set()  # the tests seen passing unmutated
    try:
        for bug in chosen:
            source = work / PKG / bug.path
            text = source.read_text()
            if text.count(bug.old) != 1:
                print(f"STALE {bug.area}: {bug.old!r} is in {bug.path} {text.count(bug.old)}x")
                got_past += 1
                continue
            if bug.tests not in green and not run_tests(work, bug.tests):
                print(f"RED UNMUTATED {bug.area}: {' '.join(bug.tests)}")
                got_past += 1
                continue
            green.add(bug.tests)
            source.write_text(text.replace(bug.old, bug.new))
            caught = sum(not run_tests(work, bug.tests) for _ in range(args.times))
            source.write_text(text)
            got_past += caught < args.times
            print(
                f"{'caught' if caught == args.times else 'GOT PAST'} {caught}/{args.times}"
                f"  {bug.area}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if got_past else 0


if __name__ == "__main__":
    sys.exit(main())
