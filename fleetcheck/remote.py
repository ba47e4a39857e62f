"""How the probe travels: the remote command line, the stdin payload, and its answer.

The command carries no inventory value except the interpreter path, shell-quoted; the
plan (venv, signatures) travels as JSON on stdin, so nothing from the inventory is ever
interpreted by a shell.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from functools import lru_cache
from typing import Any

from fleetcheck.inventory import Host
from fleetcheck.transport import CommandResult, TransportError

BOOTSTRAP = ("import sys;b=sys.stdin.buffer;n=int(b.readline());"
             "exec(compile(b.read(n),'fleetcheck-probe','exec'),"
             "{'__name__':'__fleetcheck_probe__'})")


@lru_cache(maxsize=1)
def probe_source() -> bytes:
    with open(os.path.join(os.path.dirname(__file__), "probe.py"), "rb") as handle:
        return handle.read()


def probe_command(host: Host) -> str:
    """POSIX sh: try the host's interpreter, fall back to python3 when it does not start
    (a half-built venv), then run the bootstrap that reads the probe from stdin."""
    first = shlex.quote(host.interpreter)
    return ("PY=%s; \"$PY\" -c '' </dev/null >/dev/null 2>&1 || PY=python3; "
            "exec \"$PY\" -c %s" % (first, shlex.quote(BOOTSTRAP)))


def probe_payload(plan: dict[str, Any]) -> bytes:
    source = probe_source()
    return b"%d\n" % len(source) + source + json.dumps(plan).encode("utf-8")


def host_plan(host: Host, signatures: list[dict[str, Any]]) -> dict[str, Any]:
    return {"venv": host.venv, "site_packages": host.site_packages, "signatures": signatures}


def printable(data: bytes, limit: int = 200) -> str:
    """A short, terminal-safe rendering of bytes a host sent."""
    text = data[:limit].decode("utf-8", "replace")
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "?", text)


def decode_answer(result: CommandResult, host: Host) -> dict[str, Any]:
    """The probe's facts, or a TransportError saying why the answer is not one."""
    if result.exit_status == 127 or (result.exit_status != 0 and not result.stdout and
                                     b"not found" in result.stderr):
        raise TransportError("probe", "no Python interpreter: tried %s and python3 (%s)"
                             % (host.interpreter, printable(result.stderr).strip()))
    try:
        facts = json.loads(result.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise TransportError(
            "protocol", "answer is not the probe's JSON (exit %d; stdout starts %r; stderr %r)"
            % (result.exit_status, printable(result.stdout, 80), printable(result.stderr, 200)))
    if not isinstance(facts, dict) or "probe_version" not in facts:
        raise TransportError("protocol", "answer is JSON but not the probe's facts")
    if facts.get("fatal"):
        raise TransportError("probe", "probe failed on the host: %s" % facts["fatal"])
    return facts
