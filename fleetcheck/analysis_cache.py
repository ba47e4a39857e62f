"""The controller's cache of fix analyses, for gates re-run many times a day on the same
builds: a build's shared analysis (see shared_analysis.py) is kept on the controller,
keyed by the build (its RECORD sha256), the playbook's signatures and fleetcheck's own
code, so a later run sends each host the verify reply at once and no host ships bytes.
Every host still proves by sha256 that it holds the bytes the cached analysis read; one
that does not analyses its own files, so a cached verdict is exactly a cold run's.

Under $XDG_CACHE_HOME/fleetcheck/analyses (default ~/.cache/fleetcheck/analyses), one
JSON file per entry, written atomically; bounded to MAX_ENTRIES files and MAX_BYTES,
least recently used (by mtime, touched on every hit) dropped first. Nothing is written
until a run learns an analysis. A file that cannot be read or does not fit is a miss:
the cache only ever saves work, never decides."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from fleetcheck import __version__
from fleetcheck.atomic_file import write_atomically

MAX_ENTRIES = 64
MAX_BYTES = 64 << 20
SUFFIX = ".analysis.json"


def default_directory() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fleetcheck", "analyses")


def code_digest() -> str:
    """fleetcheck's version and the probe's code: a development checkout whose analysis
    changed under the same version never reuses an analysis it would not make."""
    from fleetcheck.wire_protocol import probe_modules
    return hashlib.sha256(__version__.encode() + b"\0" + probe_modules(False)).hexdigest()


class AnalysisCache:
    """Entries for one playbook's signatures."""

    def __init__(self, directory: str, signatures: list[dict[str, Any]],
                 max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES):
        self.directory = directory
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.playbook = hashlib.sha256(json.dumps(signatures, sort_keys=True)
                                       .encode("utf-8")).hexdigest()
        self.code = code_digest()

    def key(self, build: str) -> dict[str, str]:
        return {"build": build, "playbook": self.playbook, "code": self.code}

    def path(self, build: str) -> str:
        digest = hashlib.sha256(json.dumps(self.key(build), sort_keys=True).encode()).hexdigest()
        return os.path.join(self.directory, digest + SUFFIX)

    def get(self, build: str) -> tuple[str, bytes] | None:
        """(the analysis as JSON text, the verify reply) for this build, or None."""
        path = self.path(build)
        try:
            with open(path, "rb") as handle:
                entry = json.loads(handle.read().decode("utf-8"))
            if entry.get("key") != self.key(build):
                return None
            signatures, reply = entry["signatures"], entry["reply"]
            json.loads(signatures)
            if not isinstance(reply, str) or json.loads(reply).get("role") != "verify":
                return None
            os.utime(path)  # recently used
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return signatures, reply.encode("utf-8")

    def put(self, build: str, signatures: str, reply: bytes) -> None:
        """Store atomically, then keep the bounds. A cache that cannot be written costs
        only the next run's warm start."""
        entry = json.dumps({"key": self.key(build), "signatures": signatures,
                            "reply": reply.decode("utf-8")})
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            write_atomically(self.path(build), [entry], private=True)
            self.prune()
        except OSError:
            pass

    def prune(self) -> None:
        entries = []
        for name in os.listdir(self.directory):
            if name.endswith(SUFFIX):
                try:
                    stat = os.stat(os.path.join(self.directory, name))
                except OSError:
                    continue
                entries.append((stat.st_mtime, stat.st_size, name))
        entries.sort(reverse=True)  # newest first
        total = 0
        for index, (_, size, name) in enumerate(entries):
            total += size
            if index >= self.max_entries or total > self.max_bytes:
                try:
                    os.unlink(os.path.join(self.directory, name))
                except OSError:
                    pass
