"""The dialogue (connectors/dialogue.py) over an in-memory command: a real object with the
Streams interface whose output comes in chunks as a remote command's does, and which can
answer what it reads on stdin. What it must keep: stdin closed when the payload is all,
the first stdout line answered once and only once, both streams drained together under
their caps, and the deadline, a cancel and a lost exit status each told apart."""

from __future__ import annotations

import threading
from typing import Callable, Optional

import pytest

from fleetcheck.connectors.base import MAX_STDERR_BYTES, MAX_STDOUT_BYTES, Deadline, TransportError
from fleetcheck.connectors.dialogue import converse

pytestmark = pytest.mark.unit


class MemoryCommand:
    """A command whose stdout and stderr are lists of chunks handed out one per read (a
    b"" chunk is "nothing yet"); `on_input` runs on each write to stdin and may queue
    more output, as a command that reads its input and answers it does."""

    def __init__(self, out: list[bytes] = (), err: list[bytes] = (), status: Optional[int] = 0,
                 on_input: Callable[["MemoryCommand", bytes], None] | None = None,
                 endless: bool = False):
        self.out = list(out)
        self.err = list(err)
        self.status = status
        self.on_input = on_input
        self.endless = endless  # never finishes: a host that hangs
        self.stdin = bytearray()
        self.writes: list[bytes] = []
        self.input_closed = False
        self.waits = 0

    def send(self, data: bytes, deadline: Deadline) -> None:
        assert not self.input_closed, "write after stdin was closed"
        self.stdin += data
        self.writes.append(data)
        if self.on_input:
            self.on_input(self, data)

    def close_input(self) -> None:
        self.input_closed = True

    def _next(self, chunks: list[bytes]) -> Optional[bytes]:
        if chunks:
            return chunks.pop(0)
        return b"" if self.endless else None

    def read_out(self) -> Optional[bytes]:
        return self._next(self.out)

    def read_err(self) -> Optional[bytes]:
        return self._next(self.err)

    def finished(self) -> bool:
        return not self.endless and not self.out and not self.err

    def wait(self, timeout: float) -> None:
        self.waits += 1
        threading.Event().wait(min(timeout, 0.01))

    def exit_status(self) -> Optional[int]:
        return self.status


def test_without_an_answerer_the_payload_is_all_of_stdin():
    command = MemoryCommand(out=[b"{\"a\":", b"", b" 1}\n"], err=[b"warn", b"ing\n"], status=0)
    result = converse(command, b"PAYLOAD", Deadline(10))
    assert command.writes == [b"PAYLOAD"] and command.input_closed
    assert result.stdout == b"{\"a\": 1}\n" and result.stderr == b"warning\n"
    assert result.exit_status == 0


def test_the_exit_status_is_kept_as_the_command_gave_it():
    assert converse(MemoryCommand(out=[b"x"], status=3), b"", Deadline(10)).exit_status == 3


def asker(reply_to: bytes, then: list[bytes]):
    """A command that, once its reply arrives on stdin, writes `then`."""
    def on_input(command: MemoryCommand, data: bytes) -> None:
        if data == reply_to:
            command.out.extend(then)
    return on_input


def test_the_first_line_split_across_chunks_is_answered_once():
    asked = []

    def answer(line: bytes) -> bytes:
        asked.append(line)
        return b"REPLY\n"

    command = MemoryCommand(out=[b"ASK sha", b"256\nafter-", b"the-question"],
                            on_input=asker(b"REPLY\n", [b"\n{}\n"]))
    result = converse(command, b"PLAN\n", Deadline(10), answer=answer)
    assert asked == [b"ASK sha256"]
    assert command.writes == [b"PLAN\n", b"REPLY\n"] and command.input_closed
    # the question is not part of the answer; what followed it in the chunk is
    assert result.stdout == b"after-the-question\n{}\n"


def test_a_first_line_that_is_no_question_stays_in_stdout():
    command = MemoryCommand(out=[b"{\"facts\": 1}\n", b"more\n"])
    result = converse(command, b"PLAN\n", Deadline(10), answer=lambda line: None)
    assert result.stdout == b"{\"facts\": 1}\nmore\n"
    assert command.writes == [b"PLAN\n"] and command.input_closed


def test_stdin_is_closed_when_the_command_ends_without_a_line():
    command = MemoryCommand(out=[b"no newline at all"])
    asked = []
    result = converse(command, b"PLAN\n", Deadline(10), answer=lambda line: asked.append(line))
    assert asked == [] and command.input_closed and result.stdout == b"no newline at all"


def test_stdout_over_the_cap_is_a_protocol_error_keeping_what_arrived():
    chunk = b"x" * (1 << 20)
    command = MemoryCommand(out=[chunk] * ((MAX_STDOUT_BYTES >> 20) + 1), endless=True)
    with pytest.raises(TransportError) as caught:
        converse(command, b"", Deadline(30))
    assert caught.value.kind == "protocol" and "not a probe answer" in caught.value.message
    assert len(caught.value.received) == MAX_STDOUT_BYTES + len(chunk)


def test_a_stderr_flood_is_capped_and_never_stalls_stdout():
    flood = [b"e" * 4096] * (MAX_STDERR_BYTES // 4096 * 3)
    out = [b""] * (len(flood) - 1) + [b"{}\n"]  # stdout's answer comes after the flood
    result = converse(MemoryCommand(out=out, err=flood), b"", Deadline(30))
    assert result.stdout == b"{}\n" and len(result.stderr) == MAX_STDERR_BYTES


def test_a_lost_exit_status_is_a_protocol_error_saying_how_much_arrived():
    with pytest.raises(TransportError) as caught:
        converse(MemoryCommand(out=[b"{\"par"], status=None), b"", Deadline(10))
    assert caught.value.kind == "protocol"
    assert "connection lost mid-probe" in caught.value.message
    assert "5 bytes of output received" in caught.value.message


def test_a_command_that_never_ends_meets_the_deadline():
    command = MemoryCommand(endless=True)
    with pytest.raises(TransportError) as caught:
        converse(command, b"", Deadline(0.3))
    assert caught.value.kind == "timeout" and command.waits > 0


def test_cancel_interrupts_a_command_that_never_ends():
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(TransportError) as caught:
        converse(MemoryCommand(endless=True), b"", Deadline(30), cancel=cancel)
    assert caught.value.kind == "interrupted"
