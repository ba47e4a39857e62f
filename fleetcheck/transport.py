"""The names this module used to hold, now in fleetcheck.connectors (base: the error
family, deadline and results; ssh: paramiko; local: subprocesses). Kept so code that
imports them from here goes on working."""

from __future__ import annotations

import threading

from fleetcheck.connectors import Registry
from fleetcheck.connectors.dialogue import converse
from fleetcheck.connectors.local import LocalConnector
from fleetcheck.connectors.base import (KINDS, MAX_STDERR_BYTES, MAX_STDOUT_BYTES, Answerer,
                                        CommandResult, Deadline, TransportError)
from fleetcheck.connectors.ssh import (ChannelStreams, Endpoint, KeyRing, KnownHosts, SshSession, SshSettings,
                                       enable_match_exec, key_fingerprint, paramiko, parse_jump,
                                       resolve_endpoint, translate_errors)
from fleetcheck.inventory import Host

__all__ = ["KINDS", "MAX_STDERR_BYTES", "MAX_STDOUT_BYTES", "Answerer", "CommandResult",
           "Deadline", "TransportError", "Endpoint", "KeyRing", "KnownHosts", "SshSession",
           "SshSettings", "enable_match_exec", "key_fingerprint", "paramiko", "parse_jump",
           "resolve_endpoint", "translate_errors", "run_on_host", "run_local", "read_channel"]


def run_on_host(host: Host, command: str, payload: bytes, settings: SshSettings,
                deadline: Deadline, cancel: threading.Event | None = None,
                answer: Answerer | None = None) -> CommandResult:
    """One command on a host through its connector (whatever its `connection`)."""
    with Registry(settings).for_host(host).open(host, deadline, cancel) as session:
        return session.run(command, payload, cancel, answer)


def run_local(command: str, payload: bytes, deadline: Deadline) -> CommandResult:
    """`connection: local` for one command (now with the same dialogue as over SSH)."""
    with LocalConnector().open(Host(name="local", address="local", connection="local"),
                               deadline) as session:
        return session.run(command, payload)


def read_channel(channel: paramiko.Channel, deadline: Deadline,
                 cancel: threading.Event | None = None,
                 answer: Answerer | None = None) -> CommandResult:
    """The dialogue on a channel whose command and payload were already sent."""
    return converse(ChannelStreams(channel), b"", deadline, cancel, answer)
