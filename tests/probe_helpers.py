"""Run the real probe locally (same bytes, same bootstrap as over SSH) on a tree."""

from __future__ import annotations

import json
import subprocess

from fleetcheck.inventory import Host
from fleetcheck.playbook import load_playbook
from fleetcheck.remote import decode_answer, host_plan, probe_command, probe_payload
from fleetcheck.connectors.base import CommandResult


def probe_tree(venv: str, signatures=None) -> dict:
    host = Host(name="local", address="local", connection="local", venv=venv)
    if signatures is None:
        signatures = load_playbook().probe_signatures()
    payload = probe_payload(host_plan(host, signatures))
    proc = subprocess.run(["/bin/sh", "-c", probe_command(host)], input=payload,
                          capture_output=True, timeout=60)
    return decode_answer(CommandResult(proc.stdout, proc.stderr, proc.returncode), host)


def findings(facts: dict, check_id: str) -> dict:
    return facts["signatures"][check_id]["findings"]


def dump(facts: dict) -> str:
    return json.dumps(facts, indent=1)[:4000]
