"""Run directory names from the swept overrides: readable, safe on any filesystem, distinct.

`batch=128,lr=0.01`: only the keys whose value varies across the sweep, sorted. Characters that
are unsafe in a path (`/`, control characters, quotes, shell and Windows specials) are
percent-encoded, `%` included, so that distinct values stay distinct; a name longer than a path
component allows is cut and given a hash of the whole.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

MAX_COMPONENT_BYTES = 255
_SAFE_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.=,+@[]{}")
# Default Hydra subdir: when it is still this, the launcher names runs from their overrides.
HYDRA_DEFAULT_SUBDIR = "${hydra.job.num}"


@functools.lru_cache(maxsize=1)
def _parser() -> OverridesParser:
    return OverridesParser.create()


@functools.lru_cache(maxsize=65536)  # a sweep repeats the same override strings across jobs
def split_override(override: str) -> tuple[str, str | None]:
    """An override's key and value text, as Hydra's own parser reads them.

    '+db.user=x' -> ('db.user', 'x'); '~key' -> ('key', None); 'db@pkg=y' -> ('db@pkg', 'y');
    a quoted value loses its quotes as Hydra reads it: "tag='a b'" -> ('tag', 'a b').
    """
    raw_key, sep, text = override.partition("=")
    try:
        parsed = _parser().parse_override(override)
    except HydraException:  # not Hydra's syntax (a foreign sweeper's): split it as written
        return raw_key.lstrip("+~"), (text if sep else None)
    key = parsed.key_or_group + (f"@{parsed.package}" if parsed.package else "")
    if not sep:
        return key, None
    value = parsed.value()
    if text.strip()[:1] in ("'", '"') and isinstance(value, str):
        return key, value
    return key, text


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _SAFE_ASCII or (ord(ch) > 127 and ch.isalnum()):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode()))
    return "".join(out)


def varying_keys(batch: Sequence[Sequence[str]], swept: Sequence[str] = ()) -> set[str]:
    """Keys swept on the command line or by the sweeper, or whose value differs in `batch`
    (a key that only some jobs set differs too)."""
    absent = object()
    jobs = [dict(split_override(o) for o in overrides) for overrides in batch]
    keys: set[str] = set().union(*jobs) if jobs else set()
    differing = {k for k in keys if len({job.get(k, absent) for job in jobs}) > 1}
    return differing | (set(swept) & keys)


NAME_DIGITS = 6  # significant digits of a float in a run dir name (a sampler's 0.00012652627...)
_LONG_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?")


def short_float(value: str) -> str:
    """A float written with more than NAME_DIGITS significant digits, rounded to them
    (`0.0001265262767107385` -> `0.000126526`); any other value as written. Two values that
    round alike still get two dirs: claim_run_dir gives the second `~2`."""
    if not _LONG_FLOAT.fullmatch(value):
        return value
    mantissa = re.split(r"[eE]", value)[0].lstrip("+-").replace(".", "").lstrip("0")
    return f"{float(value):.{NAME_DIGITS}g}" if len(mantissa) > NAME_DIGITS else value


def setting_text(values: Mapping[str, object], sep: str = ",") -> str:
    """`lr=0.000126526,batch=32`: a run's values as its run dir names them (short_float), for
    every line that shows them (a sampler's floats have 16 digits)."""
    return sep.join(f"{key}={short_float(str(value))}" for key, value in values.items())


def run_dir_name(overrides: Sequence[str], keys: set[str], job_num: int) -> str:
    """The directory name of one job: its values of `keys`, or all its overrides if none vary."""
    chosen = [o for o in overrides if split_override(o)[0] in keys] or list(overrides)
    parts = []
    for override in sorted(chosen, key=lambda o: split_override(o)[0]):
        key, value = split_override(override)
        if value is None:
            parts.append(_escape(key))
        else:
            parts.append(f"{_escape(key)}={_escape(short_float(value))}")
    return _fit(",".join(parts) or f"job{job_num}")


def _fit(name: str) -> str:
    encoded = name.encode()
    if len(encoded) <= MAX_COMPONENT_BYTES - 12:  # room for a "~N" suffix from claim_run_dir
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:12]
    head = encoded[: MAX_COMPONENT_BYTES - 12 - len(digest) - 1].decode(errors="ignore")
    return f"{head}~{digest}"


def suffixed(name: str) -> Iterator[str]:
    """`name`, then `name~2`, `name~3`, ...: the names a taken run dir name gives way to."""
    yield name
    for n in itertools.count(2):
        yield f"{name}~{n}"


def claim_run_dir(
    sweep_dir: Path, name: str, make_way: Callable[[Path], object] = lambda path: None
) -> str:
    """Create `sweep_dir/name` (or `name~2`, `name~3`, ... if taken) and return the name used.
    `make_way(path)` is called before each try: it may move an earlier, dead attempt out of it.

    mkdir is atomic, so two jobs never share a directory, in this sweep or a resumed one.
    """
    sweep_dir.mkdir(parents=True, exist_ok=True)
    names = suffixed(name)
    while True:
        candidate = next(names)
        make_way(sweep_dir / candidate)
        try:
            os.mkdir(sweep_dir / candidate)
            return candidate
        except FileExistsError:
            pass
