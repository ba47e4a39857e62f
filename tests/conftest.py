"""Shared test parts: real vLLM wheels installed into cached venvs, real sshd hosts on
loopback, and running fleetcheck as a user does (a subprocess, reading its JSON)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import os
import tempfile
from dataclasses import dataclass

import pytest
import yaml

from fleetcheck.lab.wheels import real_install
from fleetcheck.lab.testhosts import LoopbackFleet

# fleetcheck's analysis cache lives under XDG_CACHE_HOME: never the user's during tests
# (run_fleetcheck gives each run a cache of its own; tests of the cache set theirs)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="fleetcheck-tests-xdg-")
REAL_VERSIONS = ("0.20.1", "0.33.0")
_third_octets = itertools.count(20)


@pytest.fixture(scope="session")
def real_venvs() -> dict[str, str]:
    return {version: real_install(version) for version in REAL_VERSIONS}


@pytest.fixture
def fleet(tmp_path):
    """Real sshd hosts on their own 127.0.N.x addresses; stopped after the test."""
    loopback = LoopbackFleet(str(tmp_path / "fleet"), first_octet=next(_third_octets))
    try:
        yield loopback
    finally:
        loopback.stop()


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str
    results: dict | None
    html: str | None

    def host(self, name: str) -> dict:
        return next(h for h in self.results["hosts"] if h["name"] == name)

    def check(self, host: str, check_id: str) -> dict:
        return next(c for c in self.host(host)["checks"] if c["id"] == check_id)


def run_fleetcheck(tmp_path, inventory: dict | str, *args: str, timeout: float = 300,
                   env: dict | None = None, cache_home: str | None = None) -> CliRun:
    """`python -m fleetcheck run` exactly as a user would call it (in `env`, default this
    process's environment), with a cold analysis cache of its own unless `cache_home`
    (an XDG_CACHE_HOME) is given."""
    if isinstance(inventory, dict):
        path = tmp_path / "inventory.yaml"
        path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    else:
        path = inventory
    out_json = tmp_path / "out" / "results.json"
    out_html = tmp_path / "out" / "report.html"
    env = dict(os.environ if env is None else env,
               XDG_CACHE_HOME=cache_home or str(tmp_path / ".xdg-cache"))
    proc = subprocess.run([sys.executable, "-m", "fleetcheck", "run", str(path),
                           "--json", str(out_json), "--html", str(out_html), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=str(tmp_path),
                          env=env)
    results = json.loads(out_json.read_text()) if out_json.exists() else None
    html = out_html.read_text() if out_html.exists() else None
    return CliRun(proc.returncode, proc.stdout, proc.stderr, results, html)


def ssh_hosts(fleet: LoopbackFleet, hosts, **extra) -> dict:
    """Inventory entries for fleet hosts, with the fleet's client key."""
    entries = {}
    for host in hosts:
        entry = {"ansible_host": host.address, "ansible_user": "root", "key": fleet.client_key}
        if host.port != 22:
            entry["port"] = host.port
        entry.update(extra)
        entries[host.name] = entry
    return entries
