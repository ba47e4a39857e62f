"""Entry point of the probe on the host: read the plan (JSON on stdin), gather facts,
print one JSON document. Never imports vllm, never writes; any probe bug still answers
in JSON rather than with a traceback."""

import json
import os
import sys

from fleetcheck.probe.install import locate_install, read_version_file
from fleetcheck.probe.signatures import run_signature

PROBE_VERSION = 1


def probe(plan):
    facts = {"probe_version": PROBE_VERSION,
             "python": {"executable": sys.executable, "version": sys.version.split()[0]},
             "venv": plan.get("venv"), "errors": []}
    venv = plan.get("venv")
    if venv and not os.path.isdir(venv):
        facts["errors"].append("venv %s: no such directory" % venv)
    install = locate_install(plan)
    facts["install"] = install
    root = install["site_packages"]
    facts["version_file"] = read_version_file(
        os.path.join(root, "vllm", "_version.py")) if root else None
    facts["signatures"] = {}
    if root and install["package_dir"]:
        cache = {}
        for signature in plan.get("signatures", []):
            facts["signatures"][signature["id"]] = run_signature(root, signature, cache)
    return facts


def main():
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin
    raw = stream.read()
    plan = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    try:
        facts = probe(plan)
    except Exception as exc:  # a probe bug must still answer in JSON, never a traceback
        facts = {"probe_version": PROBE_VERSION, "fatal": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(facts, sort_keys=True))
    sys.stdout.flush()


