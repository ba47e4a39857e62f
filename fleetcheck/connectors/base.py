"""The one interface every way of reaching a host implements, and the error family all of
them map their own failures into (as httpx maps its transports' errors at one seam).

A connector opens a session for a host within the host's deadline; a session runs one
command with a payload on stdin and the probe's ask/answer dialogue, then closes. The
runner only ever sees these types, never paramiko, subprocess or a container engine.
"""

from __future__ import annotations

import selectors
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.status import TRANSPORT_KINDS

# A probe answer is tens of KB (a few hundred with smoke metrics); the cap bounds what a
# flooding host can cost the controller: at most MAX_STDOUT_BYTES per host in flight.
MAX_STDOUT_BYTES = 8 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024
KINDS = TRANSPORT_KINDS

# Called with the first line the remote command writes; returns the bytes to write back
# on its stdin, or None when the line is not a question.
Answerer = Callable[[bytes], Optional[bytes]]


class TransportError(Exception):
    """A host could not be reached or did not answer as a probe does. `retryable` marks a
    failure before the command was sent (nothing ran yet), the only kind worth a retry."""

    def __init__(self, kind: str, message: str, retryable: bool = False,
                 received: bytes = b""):
        assert kind in KINDS, kind
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.received = received  # an answer cut at the output cap: what had arrived


@dataclass
class CommandResult:
    stdout: bytes
    stderr: bytes
    exit_status: int


class Deadline:
    """One deadline for a whole host: every blocking step gets what is left of it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise TransportError("timeout", "host deadline of %.0fs passed" % self.seconds)
        return remaining


def wait_for(files: list[Any], events: int, timeout: float) -> None:
    """Block until one of files (descriptors or objects with fileno()) is ready for
    events, at most timeout seconds. poll(2), never select(2): select refuses descriptors
    past 1024, which a controller with hundreds of hosts in flight holds; and a poll
    selector, unlike epoll, costs no descriptor of its own."""
    with selectors.PollSelector() as selector:
        for item in files:
            selector.register(item, events)
        selector.select(max(timeout, 0))


@dataclass(frozen=True)
class EngineLog:
    """A container engine's log of the container a session runs in, read in bounds: the
    head (where start-up is) and, when the log is longer, a tail (the live metrics)."""

    source: str  # the command that read it, as a reader would type it
    head: bytes
    tail: bytes | None  # None: the head is the whole log
    error: str | None = None  # the engine's words when it could not give the log


class Session:
    """One open way into a host. `run` may be called more than once (a container
    connector lists containers, then probes each, over one SSH session)."""

    # the session can read the log the container engine keeps (engine_log)
    reads_engine_log = False

    def engine_log(self, head_bytes: int, tail_bytes: int,
                   cancel: threading.Event | None = None) -> EngineLog | None:
        """The engine's log of where the last command ran; None when there is none."""
        return None

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the session holds; safe to call twice."""

    def placement(self) -> dict[str, str] | None:
        """Where inside the host the last command ran, for the results (a container's
        engine, id and names); None: on the host itself."""
        return None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Target:
    """What one HostResult is about: the inventory host itself, or (for `container:
    auto`) one container found on it, reported as `BOX/CONTAINER`."""

    name: str
    session: Session


class Connector:
    """One way to reach hosts, configured once per run. Subclasses set `connection` (the
    inventory's `connection:` value they serve) and their capability flags."""

    connection = ""
    # stdin stays open after the payload, so the probe can ask the controller (shared
    # analysis) and get its answer mid-run
    can_answer = True
    # a running command can be stopped from the controller (Ctrl-C)
    can_cancel = True

    def __init__(self, settings: Any = None):
        """settings: the run's (SshSettings); each connector takes what it needs."""
        self.settings = settings

    def open(self, host: ConnectionSettings, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        raise NotImplementedError

    def targets(self, host: ConnectionSettings, session: Session, deadline: Deadline,
                cancel: threading.Event | None = None) -> list[Target]:
        """What to probe through an open session: by default the host itself."""
        return [Target(name=host.name, session=session)]
