"""The real probe run on this machine against an install tree: the same bytes and the
same bootstrap as over SSH, through /bin/sh, for tests and benchmarks that need a probe's
facts without a host."""

from __future__ import annotations

import subprocess

from fleetcheck.connectors.base import CommandResult
from fleetcheck.inventory import Host
from fleetcheck.playbook import load_playbook
from fleetcheck.wire_protocol import decode_answer, host_plan, probe_command, probe_payload


def probe_tree(venv: str, signatures=None) -> dict:
    """The facts the probe gathers for the venv (the default playbook's signatures unless
    others are given), decoded as the controller decodes a host's answer."""
    host = Host(name="local", address="local", connection="local", venv=venv)
    if signatures is None:
        signatures = load_playbook().probe_signatures()
    payload = probe_payload(host_plan(host, signatures))
    proc = subprocess.run(["/bin/sh", "-c", probe_command(host)], input=payload,
                          capture_output=True, timeout=60)
    return decode_answer(CommandResult(proc.stdout, proc.stderr, proc.returncode), host)
