"""execute.job.wire: the messages between the sweep and a job's process, written and read back, and
what is not one of them refused with what was read."""

from __future__ import annotations

import json
import pickle

import pytest

from hpsearch_launcher.execute.job.child import LocalTicket
from hpsearch_launcher.execute.job.remote import RemoteTicket
from hpsearch_launcher.execute.job.wire import (
    Ahead,
    Exited,
    Fork,
    Forked,
    More,
    Refused,
    Said,
    StatusLine,
    Ticket,
    WireError,
    decode,
    encode,
    job_line,
    more_line,
    more_modules,
    parse_status,
)

TICKETS = [
    Ticket(config=b"\x80cfg", stdout="a 0/out.log", stderr='a"=0"/err.log', subdir=""),
    LocalTicket(config=b"", stdout="o", stderr="e", subdir="", result="r"),
    RemoteTicket(
        config=b"",
        stdout="o",
        stderr="e",
        subdir="3",
        started="s/3-0",
        cwd="/w",
        sys_path=("/a", "/b c"),
    ),
]


@pytest.mark.parametrize("ticket", TICKETS)
def test_a_ticket_reads_back_as_written(ticket: Ticket) -> None:
    kind = type(ticket)
    assert kind.from_bytes(ticket.to_bytes(), "job.pkl") == ticket
    assert kind.from_dict(ticket.to_dict()) == ticket


def test_a_ticket_reads_back_only_as_its_own_kind() -> None:
    """A remote worker's fields in a local process's ticket (or the reverse) are refused."""
    remote = TICKETS[-1]
    with pytest.raises(WireError, match=r"unknown keys \['cwd', 'started', 'sys_path'\]"):
        LocalTicket.from_bytes(remote.to_bytes(), "job.pkl")
    with pytest.raises(WireError, match=r"unknown keys \['result'\]"):
        RemoteTicket.from_dict(TICKETS[1].to_dict())


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"not a pickle", "not a pickled ticket"),
        (pickle.dumps(["config"]), "expected a mapping"),
        (pickle.dumps({"config": b"", "stdout": "o", "stderr": "e"}), "missing keys ['subdir']"),
        (
            pickle.dumps({"config": b"", "stdout": "o", "stderr": "e", "subdir": "", "gpu": 1}),
            "unknown keys ['gpu']",
        ),
        (pickle.dumps({"config": "text", "stdout": "o", "stderr": "e", "subdir": ""}), "config"),
    ],
)
def test_a_ticket_that_is_not_one_is_refused_naming_its_file(data: bytes, named: str) -> None:
    with pytest.raises(WireError, match=r"job ticket jobs/7\.pkl") as raised:
        Ticket.from_bytes(data, "jobs/7.pkl")
    assert named in str(raised.value)


STATUS = [
    StatusLine(Said.PRELOADING, name="tensorflow"),
    StatusLine(Said.PRELOADED, name="numpy", seconds=1.25),
    StatusLine(Said.FAILED, name="bad", why="ImportError: no module named bad"),
    StatusLine(Said.READY),
    StatusLine(Said.IMPORTED, modules=("numpy", "torch")),
    StatusLine(Said.THREADS, threads=3),
    StatusLine(Said.STARTED),
]


@pytest.mark.parametrize("line", STATUS, ids=lambda s: s.said.value)
def test_a_status_line_reads_back_as_written(line: StatusLine) -> None:
    assert "\n" not in line.format()
    assert parse_status(line.format()) == line


def test_the_status_lines_are_as_the_child_always_wrote_them() -> None:
    """The words on the pipe are unchanged: `preloaded NAME SECONDS` to 4 places, a newline
    in an error read as a space."""
    assert (
        StatusLine(Said.PRELOADED, name="numpy", seconds=0.5).format() == "preloaded numpy 0.5000"
    )
    failed = StatusLine(Said.FAILED, name="m", why="ValueError: a\nb").format()
    assert failed == "failed m ValueError: a b"
    assert parse_status("imported numpy killer").modules == ("numpy", "killer")


@pytest.mark.parametrize(
    "line",
    ["preloaded numpy soon", "hello there", "ready now", "threads many", "preloading", "failed"],
)
def test_a_malformed_status_line_is_refused_with_its_text(line: str) -> None:
    with pytest.raises(WireError) as raised:
        parse_status(line)
    assert repr(line) in str(raised.value)
    assert "preloaded NAME SECONDS" in str(raised.value)  # what a line may be


def test_a_spares_stdin_lines_read_back() -> None:
    assert more_modules(more_line(["numpy", "torch"]).decode()) == ["numpy", "torch"]
    assert more_modules(job_line("/tmp/job-1-0.pkl").decode()) is None  # the job's file
    with pytest.raises(WireError, match=r"'\+\{oops'"):
        more_modules("+{oops")


CONTROL = [
    More(modules=("numpy",)),
    Ahead(count=1),
    Fork(id=3, job="job.pkl", env={"CUDA_VISIBLE_DEVICES": "1"}, unset=("HPSEARCH_GPU",)),
    Forked(id=3, pid=1234),
    Refused(id=4, why="it holds a CUDA context"),
    Exited(pid=1234, code=-9),
]


@pytest.mark.parametrize("message", CONTROL, ids=lambda m: type(m).__name__)
def test_a_control_message_reads_back_as_written(message: object) -> None:
    assert decode(encode(message)) == message  # type: ignore[arg-type]


def test_a_control_message_is_the_json_the_server_always_spoke() -> None:
    assert json.loads(encode(Forked(id=1, pid=2))) == {"op": "forked", "id": 1, "pid": 2}
    assert decode(b'{"op": "exited", "pid": 5, "code": 0}') == Exited(pid=5, code=0)


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"{not json", "not JSON"),
        (b'{"op": "explode"}', "its op 'explode'"),
        (b'{"op": "forked", "id": 1}', "missing keys ['pid']"),
        (b'{"op": "forked", "id": "1", "pid": 2}', "id must be int"),
        (b'{"op": "exited", "pid": true, "code": 0}', "pid must be int"),
        (b'{"op": "fork", "id": 1, "job": "j", "env": {"A": 1}, "unset": []}', "env must be"),
    ],
)
def test_a_control_message_that_is_not_one_is_refused_with_its_text(
    data: bytes, named: str
) -> None:
    with pytest.raises(WireError) as raised:
        decode(data)
    assert named in str(raised.value)
    assert repr(data)[:40] in str(raised.value)
