"""Containers on a box: wraps another connector's session (the box's one SSH session, or
this machine for `connection: local`) and runs each command as
`<engine> exec -i [-u USER] NAME sh -c '<command>'`, as pyinfra's docker connector wraps
its local one. `container: auto` lists the box's running containers and probes each
whose command is a vLLM server, reported as `BOX/CONTAINER`.

Every failure of the engine (no such container, not running, engine missing, permission
denied on its socket, an exec that hangs) is a host error of kind `container` naming
the container and quoting the engine's own words, within the host's deadline.
"""

from __future__ import annotations

import shlex
import threading
from typing import Any

from fleetcheck.text import printable
from fleetcheck.connectors.base import (Answerer, CommandResult, Connector, Deadline, Session,
                                        Target, TransportError)
from fleetcheck.variables import Variable, one_of

# the inventory variables the wrapper reads, whatever the box's connection
VARIABLES = (
    Variable("container", ("container",), common_word=True, not_typos=("containers",)),
    Variable("container_engine", ("container_engine",), one_of(("docker", "podman"))),
    Variable("container_user", ("container_user",)),
)

# written to stderr by the command inside the container before anything else: its absence
# means the engine never ran the command, and stderr is the engine's own message
INSIDE = b"fleetcheck-inside-container\n"
SERVER_MARKS = ("vllm serve", "vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server",
                "/vllm serve")


def engine_prelude(engine: str | None) -> str:
    """POSIX sh that sets $e to the engine: the one the inventory names, else the first of
    docker and podman found on the box; a missing engine says so and exits 127."""
    wanted = shlex.quote(engine) if engine else ""
    return ('e=%s; if [ -z "$e" ]; then for c in docker podman; do '
            'if command -v "$c" >/dev/null 2>&1; then e=$c; break; fi; done; fi; '
            'if [ -z "$e" ] || ! command -v "$e" >/dev/null 2>&1; then '
            'echo "container engine ${e:-docker or podman} not found on the box" >&2; '
            'exit 127; fi; ' % wanted)


def quote_text(data: bytes, limit: int = 400) -> str:
    return printable(data.strip(), limit).strip() or "(no message)"


def looks_like_vllm_server(command: str) -> bool:
    text = " ".join(command.replace('"', " ").split())
    return any(mark in text for mark in SERVER_MARKS) or text.startswith("vllm serve")


class ContainerSession(Session):
    """Commands run inside one container, through the box's session."""

    def __init__(self, inner: Session, host: Any, container: str, deadline: Deadline):
        self.inner = inner
        self.host = host
        self.container = container
        self.deadline = deadline

    def command(self, command: str) -> str:
        user = "-u %s " % shlex.quote(self.host.container_user) if self.host.container_user \
            else ""
        inside = "printf %s >&2; %s" % (shlex.quote(INSIDE.decode()[:-1] + "\\n"), command)
        return engine_prelude(self.host.container_engine) + 'exec "$e" exec -i %s%s sh -c %s' % (
            user, shlex.quote(self.container), shlex.quote(inside))

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        where = "container %s on %s" % (self.container, self.host.name)
        try:
            result = self.inner.run(self.command(command), payload, cancel, answer)
        except TransportError as exc:
            if exc.kind == "timeout":
                raise TransportError("container", "%s: exec did not finish within the host "
                                     "deadline of %.0fs (%s)" % (where, self.deadline.seconds,
                                                                 exc.message))
            raise
        if not result.stderr.startswith(INSIDE):
            raise TransportError("container", "%s: the engine could not run the probe (exit "
                                 "%d): %s" % (where, result.exit_status,
                                              quote_text(result.stderr)))
        return CommandResult(result.stdout, result.stderr[len(INSIDE):], result.exit_status)


class ContainerConnector(Connector):
    """Wraps the connector of the box's `connection`; its capabilities are the box's."""

    def __init__(self, inner: Connector):
        self.inner = inner
        self.connection = inner.connection
        self.can_answer = inner.can_answer
        self.can_cancel = inner.can_cancel

    def open(self, host: Any, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        return self.inner.open(host, deadline, cancel)

    def targets(self, host: Any, session: Session, deadline: Deadline,
                cancel: threading.Event | None = None) -> list[Target]:
        if host.container != "auto":
            return [Target(host.name, ContainerSession(session, host, host.container, deadline))]
        return [Target("%s/%s" % (host.name, name),
                       ContainerSession(session, host, name, deadline))
                for name in self.vllm_containers(host, session, deadline, cancel)]

    def vllm_containers(self, host: Any, session: Session, deadline: Deadline,
                        cancel: threading.Event | None) -> list[str]:
        """Names of the running containers whose command is a vLLM server."""
        listing = engine_prelude(host.container_engine) + \
            """exec "$e" ps --no-trunc --format '{{.Names}}\t{{.Command}}'"""
        try:
            result = session.run(listing, b"", cancel)
        except TransportError as exc:
            if exc.kind == "timeout":
                raise TransportError("container", "listing containers on %s did not finish "
                                     "within the host deadline (%s)" % (host.name, exc.message))
            raise
        if result.exit_status != 0:
            raise TransportError("container", "cannot list containers on %s (exit %d): %s"
                                 % (host.name, result.exit_status, quote_text(result.stderr)))
        running = []
        found = []
        for line in result.stdout.decode("utf-8", "replace").splitlines():
            name, _, command = line.partition("\t")
            if not name.strip():
                continue
            running.append(name.strip())
            if looks_like_vllm_server(command):
                found.append(name.strip())
        if not found:
            raise TransportError("container", "container: auto found no running container on "
                                 "%s whose command is a vLLM server (running: %s)" % (
                                     host.name, quote_text(", ".join(running).encode())
                                     if running else "none"))
        return found
