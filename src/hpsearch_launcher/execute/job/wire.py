"""The messages between the sweep and a job's process, typed once for both sides.

Light (the standard library only): a job's process, a spare and the fork server import it
before anything else. Three kinds, each with one way to write it and one way to read it; what
cannot be read raises `WireError`, naming what was read.

- `Ticket`: one attempt of a job, as its process needs it. The local backend pickles it into a
  job file whose path goes down the process's stdin (`to_bytes`, `from_bytes`); the Ray backend
  hands it to its task as a plain dict (`to_dict`, `from_dict`).
- A spare's stdin (`more_line`, `job_line`, `more_modules`): `+["mod", ...]` a line asks for
  more modules ahead (learned while it waited); any other line is its job file's path (an
  empty one: no job, end).
- `StatusLine`: one line a process writes on its status pipe to the sweep (execute.job.child,
  execute.local.fork_server → execute.local.spare, execute.local.job_process), its kind a `Said`.
- The fork server's control messages (`More`, `Ahead`, `Fork` from the sweep; `Forked`,
  `Refused`, `Exited` from the server): one JSON object per SOCK_SEQPACKET packet (`encode`,
  `decode`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import pickle
from collections.abc import Sequence
from typing import Any, Self

from ...text import short_repr

MESSAGE_MAX = 1 << 20  # bytes of one control message (a job's environment, paths)
SHOWN = 200  # characters of an unreadable message shown in its error


class WireError(ValueError):
    """A message that is not one of ours: the error names what was read."""


# The field types the messages use, as the annotations spell them (this module's future import
# keeps them strings): whether a value read is one.
_FITS: dict[str, Any] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bytes": lambda v: isinstance(v, bytes),
    "tuple[str, ...]": lambda v: isinstance(v, tuple) and all(isinstance(x, str) for x in v),
    "dict[str, str]": lambda v: (
        isinstance(v, dict) and all(isinstance(x, str) for x in (*v, *v.values()))
    ),
}


def _fields_from(cls: type, data: object, what: str) -> dict[str, Any]:
    """`data` (a mapping read from the wire) checked against dataclass `cls`'s fields: the
    keyword arguments that make one; WireError naming `what` and the data if it does not fit."""
    if not isinstance(data, dict):
        raise WireError(f"{what}: expected a mapping, read {short_repr(data, SHOWN)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in data if k not in fields)
    missing = [n for n, f in fields.items() if n not in data and f.default is dataclasses.MISSING]
    if unknown or missing:
        raise WireError(
            f"{what}: unknown keys {unknown}, missing keys {missing} "
            f"(a {cls.__name__} has {sorted(fields)}); read {short_repr(data, SHOWN)}"
        )
    made = {}
    for name, value in data.items():
        kind = str(fields[name].type)
        if isinstance(value, list) and kind.startswith("tuple"):
            value = tuple(value)  # JSON has no tuples
        if not _FITS[kind](value):
            raise WireError(
                f"{what}: {name} must be {kind}, read {short_repr(value, SHOWN)} "
                f"in {short_repr(data, SHOWN)}"
            )
        made[name] = value
    return made


@dataclasses.dataclass(frozen=True)
class Ticket:
    """One attempt of a job, as its process needs it, whatever runs it. How its process runs
    adds its own fields in a subclass beside the code that reads them: a process of this
    machine (execute.job.child's `LocalTicket`), a cluster's worker (execute.job.remote's
    `RemoteTicket`). Each kind reads back only as itself: a field it lacks is refused."""

    config: bytes  # the job's config, pickled once by the sweep, unpickled by the job
    stdout: str  # the job's log files: its fd 1 and 2 point there
    stderr: str
    subdir: str  # the run dir the sweep claimed for it ("": where its config says)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object, source: str = "a job ticket") -> Self:
        return cls(**_fields_from(cls, data, source))

    def to_bytes(self) -> bytes:
        return pickle.dumps(self.to_dict())

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> Self:
        """The ticket pickled in `data`, read from `source` (a job file's path)."""
        try:
            fields = pickle.loads(data)
        except Exception as err:
            raise WireError(
                f"job ticket {source}: not a pickled ticket ({type(err).__name__}: {err}); "
                f"read {short_repr(data, SHOWN)}"
            ) from None
        return cls.from_dict(fields, f"job ticket {source}")


MORE = "+"  # a stdin line that starts so lists more modules to import ahead


def more_line(modules: Sequence[str]) -> bytes:
    return f"{MORE}{json.dumps(list(modules))}\n".encode()


def job_line(job_file: str) -> bytes:
    return f"{job_file}\n".encode()


def more_modules(line: str) -> list[str] | None:
    """The modules a stdin `line` asks for; None if it is no such line (it names the job)."""
    if not line.startswith(MORE):
        return None
    try:
        modules = json.loads(line[len(MORE) :])
    except ValueError:
        modules = None
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise WireError(f'stdin line {short_repr(line, SHOWN)}: expected {MORE}["module", ...]')
    return modules


class Said(enum.Enum):
    """What a status line says (its first word); its other words are the `StatusLine`'s fields."""

    PRELOADING = "preloading"  # NAME: importing a module ahead of the job, now
    PRELOADED = "preloaded"  # NAME SECONDS: done, in that time
    FAILED = "failed"  # NAME WHY: its import raised
    READY = "ready"  # a batch of imports ahead is done
    IMPORTED = "imported"  # NAME ...: top-level packages the running job imported
    THREADS = "threads"  # N: the fork server's native threads
    STARTED = "started"  # a forked child's first line: it is the job's process now


_GRAMMAR = {
    Said.PRELOADING: "preloading NAME",
    Said.PRELOADED: "preloaded NAME SECONDS",
    Said.FAILED: "failed NAME WHY",
    Said.READY: "ready",
    Said.IMPORTED: "imported NAME ...",
    Said.THREADS: "threads N",
    Said.STARTED: "started",
}


@dataclasses.dataclass(frozen=True)
class StatusLine:
    said: Said
    name: str = ""  # PRELOADING, PRELOADED, FAILED: the module
    seconds: float = 0.0  # PRELOADED: its import's time
    why: str = ""  # FAILED: the error
    modules: tuple[str, ...] = ()  # IMPORTED
    threads: int = 0  # THREADS

    def format(self) -> str:
        """The line, without its newline (a newline in `why` becomes a space)."""
        words: list[str] = [self.said.value]
        if self.said in (Said.PRELOADING, Said.PRELOADED, Said.FAILED):
            words.append(self.name)
        if self.said is Said.PRELOADED:
            words.append(f"{self.seconds:.4f}")
        elif self.said is Said.FAILED:
            words.append(self.why)
        elif self.said is Said.IMPORTED:
            words.extend(self.modules)
        elif self.said is Said.THREADS:
            words.append(str(self.threads))
        return " ".join(words).replace("\n", " ")


def parse_status(line: str) -> StatusLine:
    """The status line `line` (without its newline); WireError naming it if it is not one."""
    word, _, rest = line.partition(" ")
    try:
        said = Said(word)
    except ValueError:
        said = None
    name, _, detail = rest.partition(" ")
    try:
        if said is None:
            raise ValueError(f"unknown word {word!r}")
        if said in (Said.READY, Said.STARTED):
            if rest:
                raise ValueError("nothing may follow it")
            return StatusLine(said)
        if said is Said.IMPORTED:
            return StatusLine(said, modules=tuple(rest.split()))
        if said is Said.THREADS:
            return StatusLine(said, threads=int(rest))
        if not name or (said is Said.PRELOADING and detail):
            raise ValueError("expected one module name")
        if said is Said.PRELOADED:
            return StatusLine(said, name=name, seconds=float(detail))
        return StatusLine(said, name=name, why=detail)
    except ValueError as err:
        lines = ", ".join(_GRAMMAR.values())
        raise WireError(
            f"status line {short_repr(line, SHOWN)}: {err}; a status line is one of: {lines}"
        ) from None


@dataclasses.dataclass(frozen=True)
class More:
    """Sweep → server: import these too (learned since it was made)."""

    modules: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Ahead:
    """Sweep → server: keep `count` processes forked ahead, waiting for a job each (0 once no
    job is left to start)."""

    count: int


@dataclasses.dataclass(frozen=True)
class Fork:
    """Sweep → server, with one fd passed (the job's status pipe): fork the job's process."""

    id: int
    job: str  # its job file (a Ticket)
    env: dict[str, str]  # the job's environment, over the server's
    unset: tuple[str, ...]  # the server's variables the job's slot does not have


@dataclasses.dataclass(frozen=True)
class Forked:
    """Server → sweep: fork `id` done; its process is `pid`."""

    id: int
    pid: int


@dataclasses.dataclass(frozen=True)
class Refused:
    """Server → sweep: fork `id` not done (forking is no longer safe), and why."""

    id: int
    why: str


@dataclasses.dataclass(frozen=True)
class Exited:
    """Server → sweep: it reaped its child `pid`, which ended with `code` (as Popen's)."""

    pid: int
    code: int


Control = More | Ahead | Fork | Forked | Refused | Exited
_OPS: dict[str, type[Control]] = {
    "more": More,
    "ahead": Ahead,
    "fork": Fork,
    "forked": Forked,
    "refused": Refused,
    "exited": Exited,
}


def encode(message: Control) -> bytes:
    """One control message as its packet: a JSON object, its kind under "op"."""
    op = next(op for op, cls in _OPS.items() if isinstance(message, cls))
    data = json.dumps({"op": op, **dataclasses.asdict(message)}).encode()
    assert len(data) < MESSAGE_MAX, f"a {op} message of {len(data)} bytes"
    return data


def decode(data: bytes) -> Control:
    """The control message in the packet `data`; WireError naming it if it is not one."""
    what = f"fork server message {short_repr(data, SHOWN)}"
    try:
        fields = json.loads(data)
    except ValueError as err:
        raise WireError(f"{what}: not JSON ({err})") from None
    op = fields.pop("op", None) if isinstance(fields, dict) else None
    if op not in _OPS:
        raise WireError(f"{what}: its op {op!r} is none of {sorted(_OPS)}")
    cls = _OPS[str(op)]
    return cls(**_fields_from(cls, fields, what))
