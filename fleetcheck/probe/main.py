"""Entry point of the probe on the host: read the plan (JSON on stdin), gather facts,
print one JSON document. Never imports vllm, never writes; any probe bug still answers
in JSON rather than with a traceback."""

import os
import sys
import time

from fleetcheck.probe import jsonlite
from fleetcheck.probe.files import INSTALL_READER, ProbeFileError
from fleetcheck.probe.install import locate_install, read_version_file, venv_of_site
from fleetcheck.probe.integrity import (compiled_modules, editable_tree, import_check,
                                        installs_running, install_changed_at, record_rows,
                                        uv_leftovers, verify_record)
from fleetcheck.probe.servers import running_servers
from fleetcheck.probe.shared_bytes import build_key, shipment, verify
from fleetcheck.probe.trust import Owner, code_runner, owner_of, trusted

PROBE_VERSION = 1


def probe(plan, ask=None):
    """`ask(question) -> reply` reaches the controller mid-run (shared analysis)."""
    started = time.monotonic()
    facts = {"probe_version": PROBE_VERSION,
             "python": {"executable": sys.executable, "version": sys.version.split()[0]},
             "venv": plan.get("venv"), "errors": []}
    venv = plan.get("venv")
    if venv and not os.path.isdir(venv):
        facts["errors"].append("venv %s: no such directory" % venv)
    servers = running_servers()
    servers["serving_port"] = plan.get("serving_port")
    facts["servers"] = servers
    install = locate_install(plan, servers["servers"])
    facts["install"] = install
    owner = install_owner(install, servers["servers"])
    dists = install["dist_infos"]
    # the build's identity for same_build (and the shared-analysis key): one read of RECORD
    facts["record_sha256"] = build_key(dists[0]["path"]) if dists else None
    code_root = install.get("code_root")
    root = code_root or install["site_packages"]
    # always sent (the controller requires it): with no install, a file that is not there
    facts["version_file"] = read_version_file(
        os.path.join(root, "vllm", "_version.py")) if root else {"path": None, "exists": False}
    facts["signatures"] = {}
    examined = {}  # rel -> sha256 of the files a needle was found in (hashed against RECORD)
    if code_root:
        examined = analyse(plan, install, code_root, facts, ask)
    deadline = started + (plan.get("time_budget_s") or 60.0) - 1.0
    if code_root and any(f.get("kind") == "run" for s in plan.get("signatures", [])
                         for f in s.get("find", {}).values()):
        facts["executed"] = execute_fixes(plan, install, code_root, owner, deadline,
                                          facts["errors"])
    options = plan.get("integrity")
    if options:
        facts["integrity"] = gather_integrity(plan, install, examined, options, deadline,
                                              owner)
    if plan.get("served") is not None:
        try:
            facts["served"] = gather_served(plan, install, code_root, deadline, owner)
        except Exception as exc:  # a bug here must not cost the host's other facts
            facts["served"] = {"servers": [], "named": [],
                               "error": "%s: %s" % (type(exc).__name__, exc)}
    if plan.get("smoke"):
        from fleetcheck.probe.smoke_load import smoke  # only sent, and imported, when planned
        facts["smoke"] = smoke(plan["smoke"], plan.get("prompts") or [], deadline)
    return facts


def install_owner(install, servers):
    """The owner of the server whose install this is: its code runs as that user
    (trust.code_runner). When the install was found through that server and the user is
    another, its files are also read only where that user could read them
    (files.INSTALL_READER): the inventory did not name them."""
    INSTALL_READER[0] = None
    pid = install.get("server_pid")
    if pid is None and install.get("site_real"):
        pid = next((s["pid"] for s in servers
                    if install["site_real"] in (s.get("real_site_dirs") or [])), None)
    owner = owner_of(pid) if pid is not None else None
    if pid is not None and owner is None:  # gone since the scan: trust it no more
        owner = Owner(pid, -1, -1, frozenset(), "(gone)")
    if owner is not None and install.get("server_pid") is not None:
        install["found_through_user"] = owner.name
        if not trusted(owner):
            INSTALL_READER[0] = owner
    return owner


def runner_for(install, plan, owner):
    """(the interpreter, RunAs or None, why not) for running the install's code."""
    interpreter = install.get("interpreter") or plan.get("interpreter") or sys.executable
    runner, why = code_runner(owner, interpreter, install.get("site_packages"))
    return interpreter, runner, why


def execute_fixes(plan, install, code_root, owner, deadline, errors):
    """The fix checks' `run` finders, answered by running the install's code (executor.py)
    on every host: a result of running code is never taken from another host."""
    from fleetcheck.probe.executor import execute
    interpreter, runner, why = runner_for(install, plan, owner)
    venv = plan.get("venv")
    if venv and not install.get("interpreter") and \
            os.path.lexists(os.path.join(venv, "bin", "python")):
        interpreter = os.path.join(venv, "bin", "python")  # the install's own, not the probe's
    try:
        return execute(plan, code_root, interpreter, runner, why, deadline)
    except Exception as exc:  # a bug here must not cost the host's other facts
        errors.append("running the install's code: %s: %s" % (type(exc).__name__, exc))
        return {}


def analyse(plan, install, code_root, facts, ask):
    """Fix signatures, or proof that this host holds the bytes its build's analysis read
    (see shared_bytes.py). Returns the examined files' hashes for the integrity check."""
    reply = {}
    dists = install["dist_infos"]
    if ask is not None and plan.get("share_analysis") and dists and \
            not install.get("editable_source"):
        build = facts["record_sha256"]
        if build:
            reply = ask({"build": build, "code_root": code_root}) or {}
    if reply.get("role") == "verify":
        hashes, why = verify(code_root, reply)
        if hashes is not None:
            facts["signatures"] = None  # the controller fills in the build's analysis
            facts["shared_analysis"] = {"build": reply.get("build"), "files": len(hashes),
                                        "listings": len(reply["walks"])}
            return dict((rel, hashes[rel]) for rel in reply.get("examined", [])
                        if rel in hashes)
        facts["shared_analysis"] = {"build": reply.get("build"), "mismatch": why}
    # imported here: a host that verifies its build's bytes never loads the analysis
    # modules (the bootstrap executes a module when it is first imported); what that saves
    # is benchmarks/probe_cost.py's "shared analysis, follower" row against the lead's
    from fleetcheck.probe.signatures import run_signature
    cache = {}
    walks = {}
    for signature in plan.get("signatures", []):
        facts["signatures"][signature["id"]] = run_signature(code_root, signature, cache,
                                                             walks)
    if reply.get("role") == "lead":
        facts["shared_read"] = shipment(cache, walks)
    # (entries that could not be read are ProbeFileErrors, never examined)
    return dict((entry.rel, entry.sha256) for entry in cache.values()
                if getattr(entry, "examined", False))


def gather_served(plan, install, code_root, deadline, owner):
    """What the servers serve; each server's own log (server_log.py); with a drafter
    found, the keys this install's code reads and the drafter's config as its loader
    loads it (a child process, see config_loader.py). With no server and no drafter
    named, nothing beyond the /proc scan runs."""
    from fleetcheck.probe.server_config import drafter_dirs, server_configs
    out = server_configs(plan)
    options = plan["served"]
    if code_root and out["servers"]:  # no ast loaded where no server runs
        from fleetcheck.probe.config_conversion import decide_methods
        decide_methods(code_root, out["servers"])
    dirs = drafter_dirs(out)
    if dirs and code_root:
        from fleetcheck.probe.config_keys import read_drafters
        models = [s["drafter_model"] for s in out["servers"] if s.get("drafter_model") and
                  str(s.get("method") or "").lower() == "dflash"] + out["named"]
        out["codes"] = read_drafters(code_root, models)
    if out["servers"] and code_root and options.get("log", True):
        from fleetcheck.probe.server_log import attach_logs
        modules = [c.get("module") for c in (out.get("codes") or {}).values()
                   if isinstance(c, dict) and c.get("module")]
        attach_logs(out, plan, code_root, modules[0] if modules else None, deadline)
    if not dirs or not code_root:
        return out
    site = install.get("site_packages")
    if options.get("load_config", True) and site:
        from fleetcheck.probe.config_loader import load_configs, not_loaded
        interpreter, runner, why = runner_for(install, plan, owner)
        timeout = min(float(options.get("load_timeout", 30)), deadline - time.monotonic() - 1)
        targets = [(s.get("target_model") or {}).get("dir") for s in out["servers"]
                   if s.get("drafter_model")]
        dirs += [d for d in targets if d and d not in dirs]  # the target as loaded too
        out["loaded"] = not_loaded(interpreter, why) if runner is None else \
            load_configs(interpreter, site, dirs, timeout, runner)
    if options.get("run_drafter", True):
        from fleetcheck.probe.drafter_run import drafter_facts
        interpreter, runner, why = runner_for(install, plan, owner)
        out["runs"] = drafter_facts(out, interpreter, code_root, runner, why,
                                    min(float(options.get("run_timeout", 30)),
                                        deadline - time.monotonic() - 1))
    return out


def gather_integrity(plan, install, examined, options, deadline, owner):
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
        hash_paths = set(examined) | {"vllm/_version.py"}
        out["record"] = verify_record(site, dists[0]["path"], rows, hash_paths,
                                      options.get("deep"), examined)
    if rows is not None and site:
        out["leftovers"] = uv_leftovers(site, rows)
    if editable:
        out["editable"] = editable_tree(editable)
    touch = [p for p in (plan.get("venv"), site, editable) if p]
    out["in_progress"] = installs_running(touch, system=bool(site) and not venv_of_site(site))
    if dists and site:
        out["changed_at"] = install_changed_at(dists[0]["path"], site, examined)
    if options.get("import_check") and site:
        interpreter, runner, why = runner_for(install, plan, owner)
        if editable:
            tree = out["editable"]
            modules = [("vllm." + n[:-3].split(".")[0], os.path.join(editable, "vllm", n))
                       for n in tree["compiled"]]
        elif rows is not None:
            modules = compiled_modules(site, rows)
        else:
            modules = []
        timeout = min(float(options.get("import_timeout", 20)), deadline - time.monotonic() - 1)
        out["import"] = import_check(interpreter, modules, site, timeout, runner, why)
    return out


def main():
    """The plan is one JSON line on stdin; stdin stays open for the controller's reply
    to a question (one more JSON line), and is never read to its end."""
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin

    def read_json_line():
        line = stream.readline()
        return jsonlite.loads(line)

    def ask(question):
        sys.stdout.write("fleetcheck-ask " + jsonlite.dumps(question) + "\n")
        sys.stdout.flush()
        try:
            return read_json_line()
        except ValueError:
            return {}

    try:
        facts = probe(read_json_line(), ask)
    except Exception as exc:  # a probe bug must still answer in JSON, never a traceback
        facts = {"probe_version": PROBE_VERSION, "fatal": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(jsonlite.dumps(facts, sort_keys=True))
    sys.stdout.flush()
