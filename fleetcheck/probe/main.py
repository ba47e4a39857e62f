"""Entry point of the probe on the host: read the plan (JSON on stdin), gather facts,
print one JSON document. Never imports vllm, never writes; any probe bug still answers
in JSON rather than with a traceback."""

import os
import sys
import time

from fleetcheck.probe import jsonlite
from fleetcheck.probe.context import ProbeContext
from fleetcheck.probe.files import ProbeFileError
from fleetcheck.probe.install import locate_install, read_version_file, venv_of_site, which
from fleetcheck.probe.integrity import (compiled_modules, editable_tree, import_check,
                                        installs_running, install_changed_at, record_rows,
                                        uv_leftovers, verify_record)
from fleetcheck.probe.servers import running_servers
from fleetcheck.probe.shared_bytes import build_key, shipment, verify
from fleetcheck.probe.trust import Owner, code_runner, owner_of, reading_as, trusted

PROBE_VERSION = 1


def probe(plan, ask=None, stop_watch=None):
    """`ask(question) -> reply` reaches the controller mid-run (shared analysis);
    `stop_watch(event)` sets the event once stdin ends (see stop_signals)."""
    started = time.monotonic()
    context = ProbeContext(plan, started)
    facts = {"probe_version": PROBE_VERSION,
             "python": {"executable": sys.executable, "version": sys.version.split()[0]},
             "venv": plan.get("venv"), "errors": []}
    venv = plan.get("venv")
    if venv and not os.path.isdir(venv):
        facts["errors"].append("venv %s: no such directory" % venv)
    servers = running_servers(context)
    servers["serving_port"] = plan.get("serving_port")
    facts["servers"] = servers
    install = locate_install(plan, servers["servers"],
                             dict((s.pid, s.owner) for s in context.servers))
    facts["install"] = install
    owner = install_owner(install, servers["servers"], context)
    site_real = install.get("site_real")
    context.judged = set(s["pid"] for s in servers["servers"] if s["rank"] == 0 or
                         (site_real and site_real in s["real_site_dirs"]))
    dists = install["dist_infos"]
    code_root = install.get("code_root")
    root = code_root or install["site_packages"]
    facts["signatures"] = {}
    examined = {}  # rel -> sha256 (None: not read yet) of the files the verdicts rest on,
    # hashed against RECORD: those a needle was found in and those the executor ran
    ran = set()
    # install code runs outside reading_as (trust.code_runner refuses it there): as the
    # site's owner, or an unprivileged user of its own when that is root (executor.py);
    # before the analysis, which ships and verifies the files it ran with its own
    if code_root and any(f.get("kind") == "run" for s in plan.get("signatures", [])
                         for f in s.get("find", {}).values()):
        facts["executed"], ran = execute_fixes(plan, install, code_root, owner, context,
                                               facts["errors"])
    with reading_as(context.install_reader):
        # the build's identity for same_build (and the shared-analysis key): one read of RECORD
        facts["record_sha256"] = build_key(dists[0]["path"]) if dists else None
        # always sent (the controller requires it): with no install, a file that is not there
        facts["version_file"] = read_version_file(
            os.path.join(root, "vllm", "_version.py")) if root else {"path": None,
                                                                     "exists": False}
        if code_root:
            examined = analyse(plan, install, code_root, facts, ask, ran)
        if plan.get("patches"):
            facts["patches"] = gather_patches(plan["patches"], code_root, dists,
                                              context.deadline)
    options = plan.get("integrity")
    if options:
        facts["integrity"] = gather_integrity(plan, install, examined, options, context,
                                              owner)
    if plan.get("served") is not None:
        try:
            facts["served"] = gather_served(plan, install, code_root, context, owner)
        except Exception as exc:  # a bug here must not cost the host's other facts
            facts["served"] = {"servers": [], "named": [],
                               "error": "%s: %s" % (type(exc).__name__, exc)}
    if plan.get("smoke"):
        from fleetcheck.probe.smoke_load import smoke  # only sent, and imported, when planned
        with stop_signals(plan, stop_watch) as stop:
            facts["smoke"] = smoke(plan["smoke"], plan.get("prompts") or [], context, stop)
    return facts


class stop_signals(object):
    """The smoke load's stop: set by SIGINT or SIGTERM (a Ctrl-C reaches a local probe, in
    fleetcheck's process group) and, when the controller holds stdin open to the end, by
    its close (the run was cancelled, or the connection lost), so the load stops and a
    server it launched is torn down. Signal handlers are restored on the way out."""

    def __init__(self, plan, stop_watch):
        import threading
        self.stop = threading.Event()
        self.watch = stop_watch if plan.get("input_held") else None
        self.saved = []

    def __enter__(self):
        import signal
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.saved.append((sig, signal.signal(sig, self.on_signal)))
            except (ValueError, OSError):  # not the main thread
                pass
        if self.watch is not None:
            self.watch(self.stop)
            try:  # the controller waits for a probe that says this, after a cancel
                sys.stderr.write("fleetcheck-probe: stdin's end stops the smoke load\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
        return self.stop

    def on_signal(self, signum, frame):
        self.stop.set()

    def __exit__(self, *exc):
        import signal
        for sig, handler in self.saved:
            signal.signal(sig, handler)
        return False


def install_owner(install, servers, context):
    """The owner of the server whose install this is: its code runs as that user
    (trust.code_runner). When the install was found through that server and the user is
    another, its files are also read only as that user (context.install_reader, used
    with trust.reading_as): the inventory did not name them."""
    pid = install.get("server_pid")
    if pid is None and install.get("site_real"):
        pid = next((s["pid"] for s in servers
                    if install["site_real"] in (s.get("real_site_dirs") or [])), None)
    server = context.server(pid) if pid is not None else None
    owner = server.owner if server is not None else None
    if pid is not None and (owner is None or owner_of(pid) is None):  # gone since the scan
        owner = Owner(pid, -1, -1, frozenset(), "(gone)")
    if owner is not None and install.get("server_pid") is not None:
        install["found_through_user"] = owner.name
        if not trusted(owner):
            context.install_reader = owner
    return owner


def runner_for(install, plan, owner, context):
    """(the interpreter, RunAs or None, why not) for running the install's code: decided
    once per run (the closure check lstats the whole install)."""
    interpreter = install.get("interpreter") or plan.get("interpreter") or sys.executable
    if "/" not in interpreter:
        # a name (a container's `python3`): the file PATH finds, as the install was found
        interpreter = which(interpreter) or interpreter
    key = (interpreter, owner.uid if owner is not None else None)
    if key not in context.code_runners:
        context.code_runners[key] = code_runner(owner, interpreter,
                                                install.get("site_packages"), context.deadline)
    runner, why = context.code_runners[key]
    return interpreter, runner, why


def execute_fixes(plan, install, code_root, owner, context, errors):
    """The fix checks' `run` finders, answered by running the install's code (executor.py)
    on every host: a result of running code is never taken from another host. Returns
    (facts, the files relative to code_root the answers rest on)."""
    from fleetcheck.probe.executor import execute
    venv = plan.get("venv")
    if venv and not install.get("interpreter") and \
            os.path.lexists(os.path.join(venv, "bin", "python")):
        # the install's own interpreter, not the probe's
        install = dict(install, interpreter=os.path.join(venv, "bin", "python"))
    interpreter, runner, why = runner_for(install, plan, owner, context)
    try:
        return execute(plan, code_root, interpreter, runner, why, context.deadline)
    except Exception as exc:  # a bug here must not cost the host's other facts
        why = "running the install's code: %s: %s" % (type(exc).__name__, exc)
        errors.append(why)
        # each check it was to decide is an error saying so (no findings: never a verdict)
        return dict((signature["id"], {"findings": {}, "errors": [why]})
                    for signature in plan.get("signatures", []) if any(
                        f.get("kind") == "run" for f in signature.get("find", {}).values())
                    ), set()


def analyse(plan, install, code_root, facts, ask, ran):
    """Fix signatures, or proof that this host holds the bytes its build's analysis read
    and its executor ran (see shared_bytes.py). Returns the hashes (None: not read here)
    of the files the verdicts rest on, for the integrity check: those a needle was found
    in and those the executor ran (`ran`)."""
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
            examined = dict((rel, hashes.get(rel)) for rel in ran)
            examined.update((rel, hashes[rel]) for rel in reply.get("examined", [])
                            if rel in hashes)
            return examined
        facts["shared_analysis"] = {"build": reply.get("build"), "mismatch": why}
    # imported here: a host that verifies its build's bytes never loads the analysis
    # modules (the bootstrap executes a module when it is first imported); what that saves
    # is benchmarks/probe_cost.py's "shared analysis, follower" row against the lead's
    from fleetcheck.probe.signatures import load_source, run_signature
    cache = {}
    walks = {}
    for signature in plan.get("signatures", []):
        facts["signatures"][signature["id"]] = run_signature(code_root, signature, cache,
                                                             walks)
    examined = dict((rel, None) for rel in ran)
    if reply.get("role") == "lead":
        # the files this host's executor ran ship too: a host of the build whose copy of
        # one differs is then told so, and analyses its own files
        for rel in sorted(ran):
            entry = load_source(code_root, rel, cache)
            examined[rel] = getattr(entry, "sha256", None)
        facts["shared_read"] = shipment(cache, walks)
    # (entries that could not be read are ProbeFileErrors, never examined)
    examined.update((entry.rel, entry.sha256) for entry in cache.values()
                    if getattr(entry, "examined", False))
    return examined


def gather_patches(patches, code_root, dists, deadline):
    """Which hunks of each pull request's diff the install has (patch_presence.py); no
    verdicts where no code was found (the check says why)."""
    if not code_root:
        return {}
    from fleetcheck.probe.patch_presence import check_patches
    return check_patches(code_root, dists[0]["path"] if dists else None, patches, deadline)


def gather_served(plan, install, code_root, context, owner):
    """What the servers serve; each server's own log (server_log.py); with a drafter
    found, the keys this install's code reads and the drafter's config as its loader
    loads it (a child process, see config_loader.py). With no server and no drafter
    named, nothing beyond the /proc scan runs. The servers are read as their owners
    could read them; the install's code as context.install_reader."""
    from fleetcheck.probe.server_config import drafter_dirs, server_configs
    deadline = context.deadline
    out = server_configs(plan, context)
    options = plan["served"]
    if code_root and out["servers"]:  # no ast loaded where no server runs
        from fleetcheck.probe.config_conversion import decide_methods
        with reading_as(context.install_reader):
            decide_methods(code_root, out["servers"])
    dirs = drafter_dirs(out)
    if dirs and code_root:
        from fleetcheck.probe.config_keys import read_drafters
        models = [s["drafter_model"] for s in out["servers"] if s.get("drafter_model") and
                  str(s.get("method") or "").lower() == "dflash"] + out["named"]
        with reading_as(context.install_reader):
            out["codes"] = read_drafters(code_root, models)
    if out["servers"] and code_root and options.get("log", True):
        from fleetcheck.probe.server_log import attach_logs
        modules = [c.get("module") for c in (out.get("codes") or {}).values()
                   if isinstance(c, dict) and c.get("module")]
        attach_logs(out, plan, code_root, modules[0] if modules else None, context)
    if not dirs or not code_root:
        return out
    site = install.get("site_packages")
    if options.get("load_config", True) and site:
        from fleetcheck.probe.config_loader import load_configs, not_loaded
        interpreter, runner, why = runner_for(install, plan, owner, context)
        timeout = min(float(options.get("load_timeout", 30)), deadline - time.monotonic() - 1)
        targets = [(s.get("target_model") or {}).get("dir") for s in out["servers"]
                   if s.get("drafter_model")]
        dirs += [d for d in targets if d and d not in dirs]  # the target as loaded too
        from fleetcheck.probe.drafter_build import build_requests
        out["loaded"] = not_loaded(interpreter, why) if runner is None else \
            load_configs(interpreter, site, drafter_groups(out, dirs, runner, context),
                         timeout, build_requests(out, dirs))
    if options.get("run_drafter", True):
        from fleetcheck.probe.drafter_run import drafter_facts
        interpreter, runner, why = runner_for(install, plan, owner, context)
        out["runs"] = drafter_facts(out, interpreter, code_root, runner, why,
                                    min(float(options.get("run_timeout", 30)),
                                        deadline - time.monotonic() - 1))
    return out


def drafter_groups(served, dirs, runner, context):
    """[(RunAs or None, [drafter dirs])]: each drafter directory is loaded as the owner
    of the server that names it (a target's directory too: it is loaded beside its
    drafter) (one of root's or the probe's user's: as the install's
    `runner`), so a directory another user chose is never read by the loader with more
    rights than that user's (None: the probe cannot switch to that user, so it is not
    loaded); a directory only an expectation names, as the install's runner."""
    from fleetcheck.probe.trust import RunAs, home_of
    owners = {}
    for entry in served["servers"]:
        server = context.server(entry["pid"])
        for model in (entry.get("drafter_model") or {}, entry.get("target_model") or {}):
            if model.get("dir") in dirs and server is not None and server.owner is not None:
                owners.setdefault(model["dir"], server.owner)
    groups = []
    for directory in dirs:
        owner = owners.get(directory)
        if owner is None or trusted(owner):
            who = runner
        elif owner.uid >= 0 and os.geteuid() == 0:
            who = RunAs(owner.uid, owner.gid, home_of(owner.uid), owner.name)
        else:
            who = None
        group = next((g for g in groups if (g[0] and g[0].uid) == (who and who.uid)), None)
        if group is None:
            groups.append((who, [directory]))
        else:
            group[1].append(directory)
    return groups


def gather_integrity(plan, install, examined, options, context, owner):
    """Facts for the install-* checks (see integrity.py); the install's files read as
    context.install_reader, its code run as trust.code_runner says (outside that read)."""
    deadline = context.deadline
    site = install["site_packages"]
    dists = install["dist_infos"]
    out = {}
    editable = install.get("editable_source")
    rows = None
    with reading_as(context.install_reader):
        if dists:
            try:
                rows = record_rows(dists[0]["path"])
            except ProbeFileError as exc:
                out["record"] = {"dist_info": os.path.basename(dists[0]["path"]),
                                 "error": str(exc)}
        if rows is not None and not editable:
            hash_paths = set(examined) | {"vllm/_version.py"}
            out["record"] = verify_record(site, dists[0]["path"], rows, hash_paths,
                                          options.get("deep"), examined)
        if rows is not None and site:
            out["leftovers"] = uv_leftovers(site, rows)
        if editable:
            out["editable"] = editable_tree(editable)
        if dists and site:
            out["changed_at"] = install_changed_at(dists[0]["path"], site, examined)
    touch = [p for p in (plan.get("venv"), site, editable) if p]
    out["in_progress"] = installs_running(touch, system=bool(site) and not venv_of_site(site),
                                          table=context.table)
    if options.get("import_check") and site:
        interpreter, runner, why = runner_for(install, plan, owner, context)
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


def stop_at_deadline(plan):
    """The probe's last resort (signal.alarm): once its time budget has passed, the
    controller has stopped waiting, so whatever still blocks (a reply that never comes,
    a read that should have been bounded) must not keep the probe running, often as
    root. It answers why and exits; the children it started die at their own timeouts,
    which the same deadline bounds."""
    try:  # the C module: `signal` imports enum, start-up CPU on every host
        import _signal as signal
    except ImportError:
        import signal
    budget = plan.get("time_budget_s") if isinstance(plan, dict) else None
    budget = float(budget) if isinstance(budget, (int, float)) and budget > 0 else 60.0

    def stop(signum, frame):
        os.write(1, ("\n" + jsonlite.dumps({
            "probe_version": PROBE_VERSION,
            "fatal": "the probe passed its deadline (%.0f s) and stopped itself" % budget})
        ).encode("utf-8"))
        os._exit(0)  # the probe always exits 0: its answer says what happened

    signal.signal(signal.SIGALRM, stop)
    signal.alarm(int(budget) + 1)


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

    def stop_watch(event):
        """After the plan and the one reply, nothing more comes on stdin: its end is the
        controller closing it."""
        import threading

        def watch():
            try:
                while stream.read(1):
                    pass
            except (OSError, ValueError):
                pass
            event.set()
        threading.Thread(target=watch, daemon=True).start()

    try:
        plan = read_json_line()
        stop_at_deadline(plan)
        facts = probe(plan, ask, stop_watch)
    except Exception as exc:  # a probe bug must still answer in JSON, never a traceback
        facts = {"probe_version": PROBE_VERSION, "fatal": "%s: %s" % (type(exc).__name__, exc)}
    try:
        sys.stdout.write(jsonlite.dumps(facts, sort_keys=True))
        sys.stdout.flush()
    except (OSError, ValueError):  # the controller is gone (cancelled): nobody to answer
        pass
