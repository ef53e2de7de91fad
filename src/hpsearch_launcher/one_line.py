"""A sweep refused before its first job or trial, as hpsearch says it: `hpsearch: error: ...` on
one line and exit status 2 (the launcher's `one_line_errors` and the search's both end here);
a sweep a disk error stopped says so the same way, with exit status 1."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


def refuse(
    line: str, err: BaseException, restore: Callable[[], object] | None = None, status: int = 2
) -> NoReturn:
    """Call `restore` (the sweep dir put back as it was), then print `line` and exit with
    `status` (2: refused; 1: a sweep the disk stopped); with HYDRA_FULL_ERROR=1, raise `err`
    instead, for Hydra's own report and traceback."""
    if restore is not None:
        restore()
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        raise err
    print(f"hpsearch: error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(status) from None
