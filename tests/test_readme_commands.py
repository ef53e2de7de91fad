"""Every shell command in the bash blocks of the README and of the docs/ pages goes through
bash: a command that bash rejects (an unquoted `(`) fails the suite. Each block runs as the
user would paste it, in a fresh directory where `.venv` is this test's own environment, the
hpsearch commands with tiny sizes; a command that needs the network, a cluster, a GPU or hours
is syntax-checked only, for the reason its SKIP entry gives. The docs/ pages are read after
the README, in the shell it activated (they say their commands run in that environment)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Runner

ROOT = Path(__file__).resolve().parents[1]
# The README first: its reader makes and activates the environment the docs pages use.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Checked with `bash -n` only: (pattern at a command's start, why it is not run here).
SKIP: list[tuple[str, str]] = [
    (r"python3 -m venv \.venv\b", "the test runs in an environment already made: it is .venv"),
    (r"\.venv/bin/pip install ", "needs the package registry (the network) and minutes"),
    (r"(\.venv/bin/)?python -m pytest\b", "the suite itself: it would run inside itself"),
    (r"(\.venv/bin/)?python (-u )?bench/", "a benchmark: minutes of timing, not a check"),
    (r"tools/mutation\.sh\b", "mutation testing: hours"),
    (r"\.venv/bin/(ruff|mypy)\b", "lint and types of the checkout: .ci/run runs them"),
    (
        r"\.venv/bin/python tools/",
        "a check of the checkout's own files (.ci/run and tests/test_docs.py run them)",
    ),
    (r"ray start\b", "starts a Ray cluster node (tests/test_ray.py runs the backend)"),
    (r".*hydra\.launcher\.ray\.address=auto", "joins a running Ray cluster"),
    (
        r".*hydra\.launcher\.backend=slurm\b",
        "needs a SLURM cluster with the page's partition (tests/test_slurm.py runs the backend "
        "on the CI cluster)",
    ),
    (
        r".*hydra/sweeper=optuna\b",
        "Hydra's Optuna sweeper needs an environment of its own "
        "(optuna<3: tests/test_app_optuna.py runs it in one)",
    ),
    (r"optuna-dashboard\b", "a web server: it serves until stopped"),
    (r"tensorboard --logdir\b", "a web server: it serves until stopped"),
]
# Run as written: sourcing the venv, and the hpsearch commands (with TINY added).
RUN = r"(\. \.venv/bin/activate$|(\.venv/bin/)?(python -m hpsearch|hpsearch|hpsearch-report)\b)"
# Added to a hpsearch command that runs here, unless the command sets the key itself.
TINY = {"epochs": "1", "hydra.sweeper.n_trials": "2"}
# The values here replace the command's own (a key Hydra would be given twice).
SMALLER = {"hydra.sweeper.n_trials": "2"}


def bash_blocks(text: str) -> list[str]:
    """A page's ```bash blocks, dedented (a block inside a list item is indented)."""
    found = re.findall(r"^( *)```bash\n(.*?)^\1```", text, flags=re.S | re.M)
    return [textwrap.dedent(body) for _, body in found]


def commands(block: str) -> list[str]:
    """A block's commands: continuation lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", "", block)
    lines = [without_comment(ln).strip() for ln in joined.splitlines()]
    return [ln for ln in lines if ln]


def without_comment(line: str) -> str:
    """The line up to a `#` that starts a word outside quotes (bash's comment)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def parts(command: str) -> list[str]:
    """`a && b && c` as its parts: a set-up part may be skipped, the rest still run."""
    return [p.strip() for p in command.split(" && ")]


def skip_reason(part: str) -> str | None:
    return next((why for pattern, why in SKIP if re.match(pattern, part)), None)


def tiny(part: str) -> str:
    """A hpsearch command at tiny sizes, into a sweep (or run) dir of its own."""
    if not re.match(r"(\.venv/bin/)?(python -m hpsearch|hpsearch)\b(?!-report)", part):
        return part
    for key, value in SMALLER.items():
        part = re.sub(rf"(?<=\s){re.escape(key)}=\S+", f"{key}={value}", part)
    extra = [f"{k}={v}" for k, v in TINY.items() if not re.search(rf"\s{re.escape(k)}=", part)]
    if "hydra/sweeper=" not in part:
        extra = [e for e in extra if not e.startswith("hydra.sweeper.")]
    if "hydra.sweep.dir=" not in part:
        extra.append("hydra.sweep.dir=outputs/readme/sweep")
    if "hydra.run.dir=" not in part:
        extra.append("hydra.run.dir=outputs/readme/run")
    return " ".join([part, *extra])


ACTIVATE = ". .venv/bin/activate"


def scripts(blocks: list[str]) -> list[str]:
    """Each command part that runs here, as the README's reader runs it in one shell from
    the top: a bash script of the part at tiny sizes, after the venv's activation once the
    README has activated it."""
    activated, runs = False, []
    for block in blocks:
        for command in commands(block):
            for part in parts(command):
                if part == ACTIVATE:
                    activated = True
                elif skip_reason(part) is None:
                    runs.append(
                        "\n".join(["set -e", *([ACTIVATE] if activated else []), tiny(part)])
                    )
    return runs


PAGE_BLOCKS = [(page.name, block) for page in PAGES for block in bash_blocks(page.read_text())]
BLOCKS = [block for _, block in PAGE_BLOCKS]


def test_the_readme_and_the_docs_have_their_bash_blocks() -> None:
    readme = bash_blocks(PAGES[0].read_text())
    assert len(readme) >= 6 and len(BLOCKS) >= 10 and all(commands(b) for b in BLOCKS)


@pytest.mark.parametrize(
    "block", BLOCKS, ids=[f"{name}:{commands(b)[0][:40]}" for name, b in PAGE_BLOCKS]
)
def test_every_readme_command_is_valid_bash_and_known_here(block: str) -> None:
    """`bash -n` on each command: what bash would refuse before anything ran (the search
    example's unquoted `model=choice(mlp,cnn)` did). Each command part either runs in the
    slow test below or is skipped for a stated reason: a new kind of command must say which."""
    for command in commands(block):
        checked = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert checked.returncode == 0, f"bash rejects the docs' {command!r}: {checked.stderr}"
        for part in parts(command):
            known = skip_reason(part) is not None or re.match(RUN, part)
            assert known, f"{part!r}: add it to RUN or SKIP in {Path(__file__).name}"


def test_bash_n_catches_an_unquoted_search_space() -> None:
    """The check above sees what a user's shell does: an unquoted `(` is refused."""
    bad = "python -m hpsearch --multirun model=choice(mlp,cnn)"
    assert subprocess.run(["bash", "-n", "-c", bad], capture_output=True).returncode != 0
    quoted = "python -m hpsearch --multirun 'model=choice(mlp,cnn)'"
    assert subprocess.run(["bash", "-n", "-c", quoted], capture_output=True).returncode == 0


def test_tiny_keeps_the_command_and_shrinks_it() -> None:
    command = "python -m hpsearch --multirun hydra/sweeper=hpsearch hydra.sweeper.n_trials=16 x=1"
    assert tiny(command) == (
        "python -m hpsearch --multirun hydra/sweeper=hpsearch hydra.sweeper.n_trials=2 x=1 "
        "epochs=1 hydra.sweep.dir=outputs/readme/sweep hydra.run.dir=outputs/readme/run"
    )
    assert tiny("ray start --head") == "ray start --head"


def user_env(runner: Runner) -> dict[str, str]:
    """A shell as a new user's: no environment active, this test's not on PATH."""
    env = runner.env()
    env.pop("VIRTUAL_ENV", None)
    ours = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p not in ours)
    return env


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("text", scripts(BLOCKS), ids=lambda s: s.splitlines()[-1][:60])
def test_every_readme_command_runs_as_pasted(text: str, runner: Runner, tmp_path: Path) -> None:
    """The command through `bash -c`, from a directory where `.venv` is this environment
    and nothing is activated until the README activates it: it exits 0."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    shell = subprocess.Popen(
        ["bash", "-c", text],
        cwd=tmp_path,
        env=user_env(runner),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its process group: ended whole if it outlasts the test
    )
    try:
        out, _ = shell.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        out, _ = shell.communicate()
        pytest.fail(f"{text}\n--- still running after 900 s:\n{out}")
    assert shell.returncode == 0, f"{text}\n--- rc {shell.returncode}:\n{out}"
