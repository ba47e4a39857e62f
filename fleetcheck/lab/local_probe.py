"""The real probe run on this machine against an install tree: the same bytes and the
same bootstrap as over SSH, through /bin/sh, for tests and benchmarks that need a probe's
answer or facts without a host."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from fleetcheck.connectors.base import CommandResult
from fleetcheck.inventory import Host
from fleetcheck.playbook import load_playbook
from fleetcheck.wire_protocol import decode_answer, host_plan, probe_command, probe_payload

if TYPE_CHECKING:
    from fleetcheck.facts import Facts


def probe_answer(host: Host, signatures: list[dict[str, Any]] | None = None,
                 integrity: dict[str, Any] | None = None, **plan: Any) -> CommandResult:
    """The probe's answer as it crosses the wire (the default playbook's signatures
    unless others are given); `plan`: more of the plan (smoke, prompts)."""
    if signatures is None:
        signatures = load_playbook().probe_signatures()
    payload = probe_payload(dict(host_plan(host, signatures, integrity), **plan))
    proc = subprocess.run(["/bin/sh", "-c", probe_command(host.connection_settings())],
                          input=payload, capture_output=True, timeout=60)
    return CommandResult(proc.stdout, proc.stderr, proc.returncode)


def probe_tree(venv: str, signatures: list[dict[str, Any]] | None = None) -> Facts:
    """The facts of the install in `venv`, decoded as the controller decodes a host's."""
    host = Host(name="local", address="local", connection="local", venv=venv)
    return decode_answer(probe_answer(host, signatures), host.connection_settings())
