"""A search refused before its first trial: one line, exit status 2, and the sweep dir as it
was (what the summary callback or the sweeper made for it goes).

Light on purpose (no Optuna): it also says, in one line, that Optuna is not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hydra.errors import CompactHydraException

from ..one_line import refuse
from ..sweep_dir import SweepDirBefore

# What the search needs beyond hpsearch's launcher: the `search` extra.
MISSING_OPTUNA = (
    "hydra/sweeper=hpsearch needs Optuna, which is not installed here: install the search "
    'extra (pip install -e ".[search]" in a checkout, pip install "hpsearch[search]" otherwise)'
)
SEARCH_PACKAGES = ("optuna", "cmaes")
OLDEST_OPTUNA = (4, 9)
# Hydra's own Optuna sweeper 1.3 pins optuna<3: hpsearch's sweeper cannot share its environment.
OLD_OPTUNA = (
    "hydra/sweeper=hpsearch needs Optuna 4.9 or later, and this environment has Optuna {} "
    "(hydra-optuna-sweeper 1.3 pins optuna<3): run hpsearch's sweeper from an environment with "
    'the search extra (pip install -e ".[search]"), or Hydra\'s here (hydra/sweeper=optuna)'
)


class SearchSettingsError(CompactHydraException):
    """A bad hydra.sweeper.* value: the message names the value, the rule and the fix."""


class SearchSpaceError(CompactHydraException):
    """A search space this sweeper cannot read: the message names the value and the grammar."""


@contextlib.contextmanager
def one_line_errors(before: SweepDirBefore | None) -> Iterator[None]:
    """A bad setting or search space, or no Optuna, found before any trial starts:
    `hpsearch: error: ...` on one line and exit status 2, the sweep dir put back as `before`
    saw it. HYDRA_FULL_ERROR=1 shows Hydra's own report."""
    restore = None if before is None else before.restore
    try:
        yield
    except ModuleNotFoundError as err:
        if err.name not in SEARCH_PACKAGES:
            raise
        refuse(MISSING_OPTUNA, err, restore)
    except ImportError as err:
        old = old_optuna()
        if old is None:
            raise
        refuse(OLD_OPTUNA.format(old), err, restore)
    except (SearchSettingsError, SearchSpaceError) as err:
        refuse(str(err), err, restore)


def old_optuna() -> str | None:
    """The installed Optuna's version where it is older than hpsearch's sweeper needs."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("optuna")
    except PackageNotFoundError:
        return None
    numbers = tuple(int(p) for p in found.split(".")[:2] if p.isdigit())
    return found if numbers < OLDEST_OPTUNA else None


def sweep_dir_before(config: Any) -> SweepDirBefore | None:
    """How the sweep dir was before the sweep (None if it cannot be made: the launcher or
    Hydra says so in its own words)."""
    from ..output_dir import OutputDirError

    try:
        return SweepDirBefore.peek(config)
    except OutputDirError:
        return None
