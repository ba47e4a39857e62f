"""No internal error goes unseen: after every test, each fleetcheck results document it left
under its tmp_path is read, and a host or check that ended in fleetcheck's own bug fails the
test. A test that injects faults on purpose says so with `@pytest.mark.internal_errors`."""

from __future__ import annotations

import json
import os

MARKER = "internal_errors"
SKIP_DIRS = {"site-packages", "dist-packages", "node_modules", ".xdg-cache", "__pycache__",
             "proc", "sys", "dev"}
MAX_BYTES = 64 * 1024 * 1024


def results_documents(top: str):
    """(path, document) for each JSON file under `top` that is a fleetcheck results
    document (schema_version and a hosts list)."""
    for directory, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not os.path.islink(
            os.path.join(directory, d))]
        for name in files:
            if not name.endswith(".json"):
                continue
            path = os.path.join(directory, name)
            try:
                if not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES:
                    continue
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and "schema_version" in data and isinstance(
                    data.get("hosts"), list):
                yield path, data


def internal_errors(data: dict) -> list[str]:
    """'host: message' for every internal error of a results document: a host's error of
    kind internal, one recorded beside its checks, or a check that errored on a bug."""
    found = []
    for host in data["hosts"]:
        name = host.get("name")
        error = host.get("error") or {}
        if error.get("kind") == "internal":
            found.append("%s: %s" % (name, error.get("message")))
        for extra in host.get("internal_errors") or []:
            found.append("%s: %s" % (name, extra.get("message")))
        for check in host.get("checks") or []:
            if check.get("status") == "error" and "internal error while" in str(
                    check.get("message")):
                found.append("%s %s: %s" % (name, check.get("id"), check.get("message")))
    return found
