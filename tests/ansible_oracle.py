"""`ansible-inventory --list` as the oracle: what Ansible itself makes of an inventory,
and the same view of fleetcheck's reading, to compare them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

from fleetcheck.inventory.model import InventoryData


def ansible_inventory() -> str:
    """The real executable beside this Python (a pyenv shim adds ~0.2 s per call)."""
    beside = os.path.join(os.path.dirname(sys.executable), "ansible-inventory")
    found = beside if os.path.exists(beside) else shutil.which("ansible-inventory")
    assert found, "ansible-core must be installed (test extra)"
    return found


def oracle(sources: list[str], cwd: str, limit: str | None = None) -> dict[str, Any]:
    """Ansible's --list answer. cwd: an empty directory, so that no playbook-adjacent
    group_vars of the caller's directory are read."""
    command = [ansible_inventory()]
    for source in sources:
        command += ["-i", source]
    command.append("--list")
    if limit:
        command += ["--limit", limit]
    env = dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="true",
               ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="true", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def oracle_members(answer: dict[str, Any]) -> dict[str, set[str]]:
    """group -> every host in it, children's included."""
    def hosts_of(group: str, seen: frozenset = frozenset()) -> set[str]:
        body = answer.get(group, {})
        found = set(body.get("hosts", []))
        for child in body.get("children", []):
            if child not in seen:
                found |= hosts_of(child, seen | {group})
        return found
    return {g: hosts_of(g) for g in answer if g != "_meta"}


def oracle_hosts(answer: dict[str, Any]) -> list[str]:
    """Every host of the answer (--limit applied): _meta.hostvars leaves out hosts that
    have no variables at all."""
    return sorted(set(answer["_meta"]["hostvars"]) | oracle_members(answer).get("all", set()))


def our_hostvars(data: InventoryData) -> dict[str, dict[str, Any]]:
    return {host: {name: setting.value for name, setting in data.merged_vars(host).items()}
            for host in data.hosts}


def our_members(data: InventoryData) -> dict[str, set[str]]:
    members: dict[str, set[str]] = {}
    for host in data.hosts:
        for group in data.host_groups(host):
            members.setdefault(group, set()).add(host)
    return members
