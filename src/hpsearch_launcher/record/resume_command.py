"""The command line that resumes a sweep: the command as it was typed, into its sweep dir.

A stopped or failed sweep prints it: run again with `hydra.sweep.dir` set to the sweep's own
dir (absolute, so that a `${now:...}` default does not make a new one), it reuses every job
that finished and runs the others.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..plan.naming import split_override

SWEEP_DIR_KEY = "hydra.sweep.dir"
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+@%-]+")  # a value Hydra's override parser takes as is


def resume_hint(config: DictConfig, once: str = "") -> str:
    """One line for the console: how to resume this sweep (`once` what is fixed first)."""
    sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
    typed = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    assert isinstance(typed, list)
    command = resume_command(sys.orig_argv, sys.argv, [str(o) for o in typed], sweep_dir)
    to_resume = f"to resume {once}" if once else "to resume"
    if command is None:  # not started from a command line (Hydra's API, a test)
        return f"{to_resume}, run the same sweep again with {sweep_dir_override(sweep_dir)}"
    return f"{to_resume} (jobs that finished are not run again), run: {command}"


def resume_command(
    orig_argv: Sequence[str], argv: Sequence[str], overrides: Sequence[str], sweep_dir: Path
) -> str | None:
    """The shell command that runs this sweep again into `sweep_dir`; None when this process's
    command line does not hold the sweep's task `overrides` (it did not start the sweep).

    `orig_argv`: the interpreter's own (sys.orig_argv: `python -m hpsearch ...` as typed);
    `argv`: sys.argv, whose first item names a console script (`hpsearch ...`)."""
    args = list(orig_argv)
    if len(args) > 1 and argv and args[1] == argv[0] and not argv[0].endswith(".py"):
        args = args[1:]  # a console script: `/venv/bin/hpsearch ...`, not `python /venv/bin/...`
    if not set(overrides) <= set(args[1:]):
        return None
    wanted = sweep_dir_override(sweep_dir)
    given = [i for i, a in enumerate(args) if i and split_override(a)[0] == SWEEP_DIR_KEY]
    for i in given:  # the user's own hydra.sweep.dir gives way to the one it resolved to
        args[i] = wanted
    if not given:
        args.append(wanted)
    return " ".join(shlex.quote(a) for a in args)


def sweep_dir_override(sweep_dir: Path) -> str:
    """`hydra.sweep.dir=...` as Hydra's parser reads back this exact path."""
    text = str(sweep_dir)
    if _PLAIN_PATH.fullmatch(text):
        return f"{SWEEP_DIR_KEY}={text}"
    # Quoted: backslashes before a quote (or the closing one) are doubled, quotes escaped.
    quoted = re.sub(r"(\\*)('|$)", lambda m: m[1] * 2 + ("\\'" if m[2] else ""), text)
    return f"{SWEEP_DIR_KEY}='{quoted}'"
