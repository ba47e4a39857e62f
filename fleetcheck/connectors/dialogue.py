"""The probe's dialogue with the controller, written once over a pair of byte streams, so
a paramiko channel and a subprocess's pipes (and a container exec inside either) share
it: send the payload, drain stdout and stderr together under caps, answer the first
stdout line when it is a question, and stop at the deadline or on cancel."""

from __future__ import annotations

import threading
import time
from typing import Optional, Protocol

from fleetcheck.connectors.base import (MAX_STDERR_BYTES, MAX_STDOUT_BYTES, Answerer,
                                        CommandResult, Deadline, TransportError)


class Streams(Protocol):
    """A running command seen as its stdin, stdout and stderr, and its exit status."""

    def send(self, data: bytes, deadline: Deadline) -> None:
        """Write all of data to stdin within the deadline."""

    def close_input(self) -> None:
        """Close stdin (the command sees EOF)."""

    def read_out(self) -> Optional[bytes]:
        """stdout bytes available now (b"" when none yet), None once at its end."""

    def read_err(self) -> Optional[bytes]:
        """stderr bytes available now (b"" when none yet), None once at its end."""

    def finished(self) -> bool:
        """No more output will come and the exit status (or its loss) is known."""

    def wait(self, timeout: float) -> None:
        """Block until output may be available, at most timeout seconds."""

    def exit_status(self) -> Optional[int]:
        """The command's exit status; None when the connection was lost before it."""


# After a cancel, how long the probe has to stop its load and tear down a server it
# launched (it sees its stdin close) before the command is given up on.
CANCEL_GRACE_S = 30.0
# What the probe writes on stderr once it runs something a cancel must stop (a smoke load,
# a server it launched): only such a command is waited for after a cancel.
STOPPABLE = b"fleetcheck-probe: stdin's end stops the smoke load\n"
INTERRUPTED = "run interrupted (Ctrl-C or SIGTERM) during the probe"


def converse(streams: Streams, payload: bytes, deadline: Deadline,
             cancel: threading.Event | None = None,
             answer: Answerer | None = None) -> CommandResult:
    """Drain stdout and stderr together (a full stderr window must not stall stdout),
    capping both, until the command exits or the deadline passes. With `answer`, stdin
    stays open until the command ends (the probe reads its end as a cancel): the first
    stdout line goes to answer(), whose reply (if any) is sent; a reply of None leaves
    the line in stdout. On cancel a command whose stdin is held is told by its close; one
    that said it runs something to stop (STOPPABLE) is waited for, at most CANCEL_GRACE_S
    or its deadline, so what it started is stopped before the run ends; any other
    command is left at once."""
    streams.send(payload, deadline)
    held = answer is not None
    if not held:
        streams.close_input()
    stdout = bytearray()
    stderr = bytearray()
    cancelled_by: float | None = None  # when the grace after a cancel ends
    while True:
        if cancel is not None and cancel.is_set() and cancelled_by is None:
            if held:
                streams.close_input()
            if not held or STOPPABLE not in stderr:
                raise TransportError("interrupted", INTERRUPTED)
            cancelled_by = time.monotonic() + min(CANCEL_GRACE_S, deadline.left())
        if cancelled_by is not None and time.monotonic() >= cancelled_by:
            break
        deadline.left()  # raises once the host's deadline has passed, even mid-flood
        out = streams.read_out()
        err = streams.read_err()
        if out:
            stdout += out
            if len(stdout) > MAX_STDOUT_BYTES:
                raise TransportError("protocol", "output exceeded %d MiB: not a probe answer"
                                     % (MAX_STDOUT_BYTES >> 20), received=bytes(stdout))
            if answer is not None and b"\n" in stdout:
                line, _, rest = bytes(stdout).partition(b"\n")
                reply = answer(line)
                if reply is not None and cancelled_by is None:
                    streams.send(reply, deadline)
                    stdout = bytearray(rest)
                answer = None
        if err and len(stderr) < MAX_STDERR_BYTES:
            stderr += err[:MAX_STDERR_BYTES - len(stderr)]
        if not out and not err:
            if streams.finished():
                break
            streams.wait(max(0.0, min(deadline.left(), 0.5)) if cancelled_by is None
                         else max(0.0, min(cancelled_by - time.monotonic(), 0.5)))
    streams.close_input()
    if cancelled_by is not None:
        raise TransportError("interrupted", INTERRUPTED)
    status = streams.exit_status()
    if status is None:
        raise TransportError(
            "protocol", "connection lost mid-probe (connected and authenticated; %d bytes of "
            "output received, no exit status)" % len(stdout))
    return CommandResult(bytes(stdout), bytes(stderr), status)
