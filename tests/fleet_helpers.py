"""Running fleetcheck as a user does (a subprocess, reading its JSON) against loopback
hosts: what most end-to-end tests share. Fixtures stay in conftest.py; test modules
import helpers from here, never from conftest or from each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import yaml

from fleetcheck.faults import INJECT_ENV
from fleetcheck.lab.testhosts import LoopbackFleet
from internal_errors import internal_errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
                   env: dict | None = None, cache_home: str | None = None,
                   python: list[str] | None = None) -> CliRun:
    """`python -m fleetcheck run` exactly as a user would call it (in `env`, default this
    process's environment), with a cold analysis cache of its own unless `cache_home`
    (an XDG_CACHE_HOME) is given. `python`: the command that starts the interpreter (a
    wrapper that sets up the process first)."""
    if isinstance(inventory, dict):
        path = tmp_path / "inventory.yaml"
        path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    else:
        path = inventory
    out_json = tmp_path / "out" / "results.json"
    out_html = tmp_path / "out" / "report.html"
    env = dict(os.environ if env is None else env,
               XDG_CACHE_HOME=cache_home or str(tmp_path / ".xdg-cache"))
    proc = subprocess.run([*(python or [sys.executable]), "-m", "fleetcheck", "run", str(path),
                           "--json", str(out_json), "--html", str(out_html), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=str(tmp_path),
                          env=env)
    results = json.loads(out_json.read_text()) if out_json.exists() else None
    html = out_html.read_text() if out_html.exists() else None
    if results is not None and INJECT_ENV not in env:  # module fixtures' runs too
        found = internal_errors(results)
        assert not found, "internal errors in %s:\n%s" % (out_json, "\n".join(found))
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


def clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH: the installed package, not this checkout, must answer."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XDG_CACHE_HOME")}
    env.update(extra)
    return env


def installed_fleetcheck(bin_dir: str, cwd, *args: str, timeout: float = 300,
                         **env: str) -> subprocess.CompletedProcess:
    """The `fleetcheck` command of an installed wheel (the `installed` fixture's bin/), run
    outside the checkout as a user runs it."""
    return subprocess.run([os.path.join(bin_dir, "fleetcheck"), *args], cwd=str(cwd),
                          env=clean_env(**env), capture_output=True, text=True,
                          timeout=timeout)
