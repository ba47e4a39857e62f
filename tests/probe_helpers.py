"""Run the real probe locally (same bytes, same bootstrap as over SSH) on a tree."""

from __future__ import annotations

import json
import os
import shutil
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


def linked_copy(source: str, target: str) -> str:
    """A copy of an install made of hard links: fast, and an edited file is replaced (see
    rewrite), never written through into the cached original."""
    shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    return target


def rewrite(path: str, data: bytes) -> None:
    os.unlink(path)
    with open(path, "wb") as handle:
        handle.write(data)


def site_packages(venv: str) -> str:
    lib = os.path.join(venv, "lib")
    return os.path.join(lib, os.listdir(lib)[0], "site-packages")


def edited_copy(source: str, target: str, edits: dict) -> str:
    """A linked copy of a real install with {rel: [(old, new), ...]} applied; each `old`
    must be in the file (so a test cannot silently edit nothing)."""
    linked_copy(source, target)
    site = site_packages(target)
    for rel, replacements in edits.items():
        path = os.path.join(site, rel)
        data = open(path, "rb").read().decode("utf-8") if os.path.exists(path) else ""
        for old, new in replacements:
            assert old in data, (rel, old)
            data = data.replace(old, new, 1)
        if os.path.exists(path):
            rewrite(path, data.encode("utf-8"))
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(data)
    return target
