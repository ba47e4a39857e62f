"""Entry point of the probe on the host: read the plan (JSON on stdin), gather facts,
print one JSON document. Never imports vllm, never writes; any probe bug still answers
in JSON rather than with a traceback."""

import json
import os
import sys
import time

from fleetcheck.probe.files import ProbeFileError
from fleetcheck.probe.install import locate_install, read_version_file
from fleetcheck.probe.integrity import (compiled_modules, editable_tree, import_check,
                                        installs_running, record_rows, verify_record)
from fleetcheck.probe.signatures import run_signature

PROBE_VERSION = 1


def probe(plan):
    started = time.monotonic()
    facts = {"probe_version": PROBE_VERSION,
             "python": {"executable": sys.executable, "version": sys.version.split()[0]},
             "venv": plan.get("venv"), "errors": []}
    venv = plan.get("venv")
    if venv and not os.path.isdir(venv):
        facts["errors"].append("venv %s: no such directory" % venv)
    install = locate_install(plan)
    facts["install"] = install
    code_root = install.get("code_root")
    root = code_root or install["site_packages"]
    facts["version_file"] = read_version_file(
        os.path.join(root, "vllm", "_version.py")) if root else None
    facts["signatures"] = {}
    cache = {}
    walks = {}
    if code_root:
        for signature in plan.get("signatures", []):
            facts["signatures"][signature["id"]] = run_signature(code_root, signature, cache,
                                                                 walks)
    deadline = started + (plan.get("time_budget_s") or 60.0) - 1.0
    options = plan.get("integrity")
    if options:
        facts["integrity"] = gather_integrity(plan, install, cache, options, deadline)
    if plan.get("smoke"):
        from fleetcheck.probe.smoke import smoke  # only sent, and imported, when planned
        facts["smoke"] = smoke(plan["smoke"], plan.get("prompts") or [], deadline)
    return facts


def gather_integrity(plan, install, cache, options, deadline):
    """Facts for the install-* checks (see integrity.py)."""
    site = install["site_packages"]
    dists = install["dist_infos"]
    out = {}
    editable = install.get("editable_source")
    rows = None
    if dists:
        try:
            rows = record_rows(dists[0]["path"])
        except ProbeFileError as exc:
            out["record"] = {"dist_info": os.path.basename(dists[0]["path"]), "error": str(exc)}
    if rows is not None and not editable:
        examined = [entry for entry in cache.values() if getattr(entry, "examined", False)]
        # (entries that could not be read are ProbeFileErrors, never examined)
        hash_paths = set(entry.rel for entry in examined) | {"vllm/_version.py"}
        known = dict((entry.rel, entry.sha256) for entry in examined)
        out["record"] = verify_record(site, dists[0]["path"], rows, hash_paths,
                                      options.get("deep"), known)
    if editable:
        out["editable"] = editable_tree(editable)
    touch = [p for p in (plan.get("venv"), site, editable) if p]
    out["in_progress"] = installs_running(touch)
    if options.get("import_check") and site:
        interpreter = plan.get("interpreter") or sys.executable
        if editable:
            tree = out["editable"]
            modules = [("vllm." + n[:-3].split(".")[0], os.path.join(editable, "vllm", n))
                       for n in tree["compiled"]]
        elif rows is not None:
            modules = compiled_modules(site, rows)
        else:
            modules = []
        timeout = min(float(options.get("import_timeout", 20)), deadline - time.monotonic() - 1)
        out["import"] = import_check(interpreter, modules, site, timeout)
    return out


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


