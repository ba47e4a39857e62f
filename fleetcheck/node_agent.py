"""`fleetcheck node`: the probe and the judge on one node, for a DaemonSet container with
`hostPID: true` (or a root process on the node itself).

Each round finds every vLLM server process in the node's PID namespace and judges each
server's install as that server's container sees it: the probe runs in fleetcheck's own
interpreter, chrooted into the server's root (`/proc/PID/root`, in its working directory
`/proc/PID/cwd`), so it reads the container's files and /proc as `podman exec` would,
with the same check plan, trust rules and playbook as `run` (runner.check_host). One
target per mount namespace: the servers of one container are judged together. `--venv`
adds the node's own install, read through the root of the node's PID 1.

The container's own code runs from here only as the fix checks' child does everywhere:
as `nobody` (never root), confined (probe/executor.py). Its interpreter and libraries
are another user's, and the agent holds privileges over the whole node, so the checks
that load the install otherwise (install-import, drafter-loaded) are not run on
containers' installs.

A round's results go out as the results JSON, as Prometheus text for node_exporter's
textfile collector, and a line on stdout; `--every` repeats rounds until SIGTERM."""

from __future__ import annotations

import argparse
import copy
import os
import re
import shlex
import signal
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from fleetcheck import __version__
from fleetcheck.checks.plan import finish_run
from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.connectors import Registry
from fleetcheck.connectors.base import (Answerer, CommandResult, Connector, Deadline, EngineLog,
                                        Session)
from fleetcheck.connectors.container import cri_text
from fleetcheck.connectors.local import LocalSession
from fleetcheck.expectations import CommandLine, resolve
from fleetcheck.faults import describe
from fleetcheck.input_error import InputError
from fleetcheck.inventory import Host
from fleetcheck.playbook import Playbook
from fleetcheck.probe.context import server_script
from fleetcheck.results import HostResult, ResultsWriter, RunResult, now_iso
from fleetcheck.runner import DEFAULT_TIMEOUT, RunOptions, check_host
from fleetcheck.shared_analysis import SharedAnalysis
from fleetcheck.text import is_clean_name, printable
from fleetcheck.wire_protocol import BOOTSTRAP

PROC = "/proc"
POD_LOGS = "/var/log/containers"  # kubelet's links to each container's current log
MAX_CMDLINE_BYTES = 64 * 1024
MAX_ENVIRON_BYTES = 1024 * 1024
MAX_LABEL = 63  # a DNS label: what a pod's hostname is
# what the probe may import once chrooted (its own modules travel on stdin): loaded first
PRELOAD = ("ast", "binascii", "bisect", "collections", "copy", "hashlib", "http.client",
           "itertools", "json", "marshal", "re", "select", "shutil", "signal", "socket",
           "stat", "subprocess", "tempfile", "threading", "time", "types", "urllib.parse",
           "zlib", "fnmatch", "glob", "encodings.idna", "email.parser", "_json",
           # the executor's child is confined with these before it runs the install's code
           "resource", "ctypes", "pwd")
NODE_INSTALL = "node"  # the label of the node's own install (--venv)


@dataclass(frozen=True)
class ServerRoot:
    """The servers of one container (one mount namespace), seen from the node."""

    pid: int  # the first server's pid, whose root and cwd the probe enters
    pids: tuple[int, ...]
    namespace: str  # its mount namespace (`mnt:[4026532...]`), checked again on entering
    label: str  # the pod's hostname (its HOSTNAME), else pid-N
    cwd: str  # the first server's working directory, as its container names it
    container_id: str | None = None  # the runtime's id, from the server's cgroup


def read_bounded(path: str, limit: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(limit)


def environ_value(pid: int, name: str) -> str | None:
    """One variable of a process's environment (hostile input: bounded, and only a clean
    DNS-label-like value is kept)."""
    try:
        data = read_bounded("%s/%d/environ" % (PROC, pid), MAX_ENVIRON_BYTES)
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            value = item[len(prefix):].decode("ascii", "replace")
            if 0 < len(value) <= MAX_LABEL and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*",
                                                            value):
                return value
    return None


CONTAINER_ID = re.compile(rb"(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])")
MAX_CGROUP_BYTES = 64 * 1024


def container_id(pid: int, proc: str = PROC) -> str | None:
    """The container's id as its runtime names it (containerd, CRI-O, Podman all put the
    64-hex id in the container's cgroup path), or None."""
    try:
        data = read_bounded("%s/%d/cgroup" % (proc, pid), MAX_CGROUP_BYTES)
    except OSError:
        return None
    found = CONTAINER_ID.findall(data)
    return found[-1].decode("ascii") if found else None


def pod_log(pod_logs: str, cid: str) -> str | None:
    """kubelet's symlink to a container's current log: `POD_NAMESPACE_CONTAINER-ID.log`
    under /var/log/containers."""
    suffix = "-%s.log" % cid
    try:
        names = os.listdir(pod_logs)
    except OSError:
        return None
    found = [name for name in names if name.endswith(suffix)]
    return os.path.join(pod_logs, found[0]) if len(found) == 1 else None


def read_pod_log(path: str, head_bytes: int, tail_bytes: int) -> EngineLog:
    """A CRI log's head and, when longer, its tail, as the lines the server wrote."""
    source = "kubelet's log %s" % printable(os.path.realpath(path).encode("utf-8", "replace"),
                                            300)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return EngineLog(source, b"", None, "not a regular file")
            head = handle.read(head_bytes + 1)
            tail = None
            if len(head) > head_bytes:
                handle.seek(max(0, os.fstat(fd).st_size - tail_bytes))
                tail = handle.read(tail_bytes)
    except OSError as exc:
        return EngineLog(source, b"", None, "cannot read: %s" % (exc.strerror or exc))
    if tail is None:
        return EngineLog(source, cri_text(head), None)
    head = head[:head_bytes]
    head = head[:head.rfind(b"\n") + 1]  # a CRI line cut inside its text is no whole one
    return EngineLog(source, cri_text(head), cri_text(tail))


def server_pids(proc: str = PROC) -> list[int]:
    """Every process of the PID namespace whose command line is a vLLM server's."""
    found = []
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            raw = read_bounded("%s/%s/cmdline" % (proc, name), MAX_CMDLINE_BYTES)
        except OSError:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
        if argv and server_script(argv) is not None:
            found.append(int(name))
    return sorted(found)


def server_roots(proc: str = PROC) -> list[ServerRoot]:
    """The node's servers grouped by mount namespace (a container), in pid order; a
    process that is gone, or whose namespace cannot be read, is passed over."""
    groups: dict[str, list[int]] = {}
    namespaces: dict[int, str] = {}
    for pid in server_pids(proc):
        try:
            namespace = os.readlink("%s/%d/ns/mnt" % (proc, pid))
        except OSError:
            continue
        groups.setdefault(namespace, []).append(pid)
        namespaces[pid] = namespace
    roots = []
    labels: dict[str, int] = {}
    for pids in groups.values():
        first = pids[0]
        try:
            cwd = os.readlink("%s/%d/cwd" % (proc, first))
        except OSError:
            cwd = "/"
        label = environ_value(first, "HOSTNAME") or "pid-%d" % first
        labels[label] = labels.get(label, 0) + 1
        roots.append(ServerRoot(first, tuple(pids), namespaces[first], label,
                                cwd if cwd.startswith("/") else "/", container_id(first, proc)))
    # two containers of one pod share its hostname: each named by its pid too
    return [replace(r, label="%s-pid-%d" % (r.label, r.pid)) if labels[r.label] > 1 else r
            for r in roots]


class ChrootSession(Session):
    """Runs the probe's bootstrap in this interpreter, chrooted into a server's root (see
    node_chroot.py), with the local session's pipes, dialogue, deadline and cancel. A
    container's own stream is kubelet's log of it (served-log reads it)."""

    reads_engine_log = True

    def __init__(self, deadline: Deadline, target: "NodeTarget"):
        self.local = LocalSession(deadline)
        self.target = target

    def command(self) -> str:
        from fleetcheck import node_chroot
        with open(node_chroot.__file__, encoding="utf-8") as handle:
            prelude = handle.read()
        code = prelude + "\n" + BOOTSTRAP
        target = self.target
        return "exec %s -S -I -B -c %s" % (shlex.quote(sys.executable), " ".join(
            shlex.quote(part) for part in (code, target.root, target.cwd, ",".join(PRELOAD),
                                           target.namespace)))

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        """`command` is the probe's usual one (for an interpreter on the host); this
        session runs the same bootstrap in its own trusted interpreter instead."""
        return self.local.run(self.command(), payload, cancel, answer)

    def engine_log(self, head_bytes: int, tail_bytes: int,
                   cancel: threading.Event | None = None) -> EngineLog | None:
        target = self.target
        if target.container_id is None or target.pod_logs is None:
            return None
        path = pod_log(target.pod_logs, target.container_id)
        if path is None:
            return EngineLog("kubelet's log of container %s" % target.container_id[:12], b"",
                             None, "no log of it under %s" % target.pod_logs)
        return read_pod_log(path, head_bytes, tail_bytes)

    def close(self) -> None:
        self.local.close()

    def placement(self) -> dict[str, str] | None:
        return dict(self.target.where)


@dataclass(frozen=True)
class NodeTarget:
    """One thing a round judges: a container's servers, or the node's own install."""

    name: str
    root: str
    cwd: str
    namespace: str
    where: dict[str, str]
    venv: str | None = None
    runs_install_code: bool = False  # only the node's own install: root's files
    container_id: str | None = None
    pod_logs: str | None = None  # kubelet's /var/log/containers


class NodeConnector(Connector):
    """Opens a ChrootSession for each target of the round, by its name."""

    connection = "local"

    def __init__(self, targets: dict[str, NodeTarget]):
        super().__init__(None)
        self.by_name = targets

    def open(self, host: ConnectionSettings, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        deadline.left()
        target = self.by_name[host.name]
        return ChrootSession(deadline, target)


class NodeRegistry(Registry):
    def __init__(self, connector: NodeConnector):
        super().__init__(None)
        self.connector = connector

    def for_host(self, host: ConnectionSettings) -> Connector:
        return self.connector


@dataclass
class NodeOptions:
    node: str
    venv: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    analysis_cache: str | None = None
    proc: str = PROC
    pod_logs: str = POD_LOGS
    expect: CommandLine = field(default_factory=CommandLine)  # --expect-version, -commit


def round_targets(options: NodeOptions) -> list[NodeTarget]:
    targets = []
    for found in server_roots(options.proc):
        # for the results, as the container connector's: how the probe got in, and where
        where = {"engine": "node", "name": found.label, "pid": str(found.pid),
                 "pids": ",".join(str(p) for p in found.pids)}
        if found.container_id:
            where["id"] = found.container_id
        targets.append(NodeTarget(
            name="%s/%s" % (options.node, found.label),
            root="%s/%d/root" % (options.proc, found.pid), cwd=found.cwd,
            namespace=found.namespace, where=where, container_id=found.container_id,
            pod_logs=options.pod_logs))
    if options.venv:
        try:
            namespace = os.readlink("%s/1/ns/mnt" % options.proc)
        except OSError as exc:  # the probe's own start then says why
            namespace = "(%s)" % (exc.strerror or exc)
        targets.append(NodeTarget(name="%s/%s" % (options.node, NODE_INSTALL),
                                  root="%s/1/root" % options.proc, cwd="/",
                                  namespace=namespace,
                                  where={"engine": "node", "pid": "1", "name": NODE_INSTALL},
                                  venv=options.venv, runs_install_code=True))
    return targets


def without_install_code(playbook: Playbook) -> Playbook:
    """The playbook for a container's install: its compiled modules are not loaded."""
    changed = copy.deepcopy(playbook)
    changed.integrity.import_check = False
    return changed


def node_round(playbook: Playbook, options: NodeOptions,
               cancel: threading.Event | None = None) -> RunResult:
    """One round: every target judged in turn (a node has a few), then the checks that
    compare them; the results are a run like `run`'s, one host per target."""
    started_at, started = now_iso(), time.monotonic()
    targets = round_targets(options)
    registry = NodeRegistry(NodeConnector({t.name: t for t in targets}))
    signatures = playbook.probe_signatures()
    cache = None
    if options.analysis_cache is not None:
        from fleetcheck.analysis_cache import AnalysisCache
        cache = AnalysisCache(options.analysis_cache, signatures)
    shared = SharedAnalysis(signatures, cache)
    sealed = without_install_code(playbook)
    hosts = [Host(name=t.name, address=options.node, connection="local", venv=t.venv,
                  groups=[options.node]) for t in targets]
    run_options = RunOptions(settings=None, parallel=1, timeout=options.timeout, smoke=False,
                             analysis_cache=options.analysis_cache,
                             expected=resolve(hosts, playbook.expect, options.expect, "node"))
    results: list[HostResult] = []
    complete = True
    for target, host in zip(targets, hosts):
        if cancel is not None and cancel.is_set():
            complete = False
            break
        chosen = playbook if target.runs_install_code else sealed
        judged = check_host(host, chosen, signatures, replace(
            run_options, load_config=target.runs_install_code), cancel, shared, registry)
        results.extend(alone(judged, playbook, started_at))
    return RunResult(started_at=started_at, inventory="node %s" % options.node,
                     playbook=playbook.source, fleetcheck_version=__version__,
                     hosts=results, complete=complete, finished_at=now_iso(),
                     duration_s=round(time.monotonic() - started, 3),
                     not_finished=[t.name for t in targets[len(results):]] if not complete
                     else [])


def alone(judged: list[HostResult], playbook: Playbook, started_at: str) -> list[HostResult]:
    """A target's results with the checks that compare hosts run on it alone: the
    containers of one node may serve different models, builds and drafters on purpose;
    drift across the fleet is Prometheus' to see (docs/kubernetes.md's alerting rules)."""
    run = RunResult(started_at=started_at, inventory="", playbook=playbook.source,
                    hosts=judged, complete=True)
    return list(finish_run(run, playbook, {}).hosts)


DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")


def duration(text: str) -> float:
    """`30`, `30s`, `5m` or `1h`, in seconds (at least one)."""
    match = DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError("%r is not a duration (30s, 5m, 1h)" % text)
    seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2) or "s"]
    if seconds < 1:
        raise argparse.ArgumentTypeError("must be at least 1s, got %s" % text)
    return seconds


def add_node_parser(sub: Any) -> None:
    node = sub.add_parser(
        "node", help="check this node's vLLM servers from a DaemonSet (hostPID)",
        description="Check every vLLM server running on this node, each install as its "
                    "container sees it (/proc/PID/root), with the checks of `run`: for a "
                    "DaemonSet with hostPID. Writes the results JSON, Prometheus text for "
                    "node_exporter's textfile collector, or answers node-problem-detector "
                    "(--npd) from the last round's JSON.",
        epilog="exit codes (--once): as `run`: 0 pass, 1 a check failed, 2 bad input, 3 a "
               "target errored. --every: 0 when stopped by SIGTERM or SIGINT. --npd: 0 "
               "every check passes or warns, 1 a check fails, 3 unknown (no recent round, "
               "or a target not judged).")
    when = node.add_mutually_exclusive_group(required=True)
    when.add_argument("--once", action="store_true", help="one round, then exit")
    when.add_argument("--every", type=duration, metavar="DURATION",
                      help="a round, then another after DURATION (30s, 5m, 1h) until SIGTERM")
    when.add_argument("--npd", action="store_true",
                      help="node-problem-detector's custom plugin: one line (80 characters "
                           "at most) from the last round's --json file, never a probe")
    node.add_argument("--json", dest="json_path", metavar="PATH",
                      help="the round's results JSON (replaced atomically each round); "
                           "--npd reads it")
    node.add_argument("--textfile", metavar="PATH",
                      help="the round's Prometheus metrics, for node_exporter's textfile "
                           "collector (a *.prom file, replaced atomically)")
    node.add_argument("--venv", help="also check the node's own install at this path (read "
                                     "through the root of the node's PID 1)")
    node.add_argument("--playbook", help="fix signatures (default: the packaged dflash.yaml)")
    node.add_argument("--pod-logs", default=POD_LOGS, metavar="DIR",
                      help="kubelet's links to each container's log, which served-log reads "
                           "(default %s)" % POD_LOGS)
    node.add_argument("--node-name", help="the node's name in the results (default: "
                                          "$NODE_NAME, else the hostname)")
    node.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                      help="deadline per target (default %.0fs)" % DEFAULT_TIMEOUT)
    node.add_argument("--expect-version", metavar="SPEC",
                      help="PEP 440 specifier every server's install must match (as for run; "
                           "overrides the playbook's expect:)")
    node.add_argument("--expect-commit", metavar="PREFIX",
                      help="commit prefix every server's install must record (as for run)")
    node.add_argument("--max-age", type=duration, default=900.0, metavar="DURATION",
                      help="--npd: a round older than this is no verdict (default 15m)")
    node.add_argument("--no-cache", action="store_true",
                      help="neither use nor keep the cache of fix analyses")
    node.add_argument("--no-integrity", action="store_true", help="skip the install-* checks")
    node.add_argument("--no-import-check", action="store_true",
                      help="do not load the compiled modules of the --venv install (a "
                           "container's are never loaded)")


def node_name(given: str | None) -> str:
    name = given or os.environ.get("NODE_NAME") or socket.gethostname()
    if not name or not is_clean_name(name) or "/" in name:
        raise InputError("command line", None, "--node-name", "must be a printable name "
                         "without '/'")
    return name


class Stop:
    """SIGTERM and SIGINT set an event: the round in flight is cancelled (its probe is
    killed) and the sleep between rounds ends at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.previous: dict[int, Any] = {}
        for number in (signal.SIGTERM, signal.SIGINT):
            self.previous[number] = signal.signal(number, self.handle)

    def handle(self, number: int, frame: Any) -> None:
        self.event.set()

    def restore(self) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


def write_round(run: RunResult, json_path: str | None, textfile: str | None) -> list[str]:
    """Each output of the round; a failure is said on stderr, and the next round tries
    again."""
    failed = []
    if json_path:
        try:
            ResultsWriter(json_path).write(run)
        except OSError as exc:
            failed.append(json_path)
            print("fleetcheck: error: %s: the results could not be written: %s"
                  % (json_path, exc), file=sys.stderr)
    if textfile:
        from fleetcheck.report.metrics import write_metrics
        try:
            write_metrics(run, textfile)
        except OSError as exc:
            failed.append(textfile)
            print("fleetcheck: error: %s: the metrics could not be written: %s"
                  % (textfile, exc), file=sys.stderr)
    return failed


def round_line(run: RunResult) -> str:
    counts: dict[str, int] = {}
    for host in run.hosts:
        counts[host.status] = counts.get(host.status, 0) + 1
    told = ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items())) or "no vLLM server"
    return "%s fleetcheck node: %s in %.1fs" % (run.finished_at, told, run.duration_s)


def command_node(args: argparse.Namespace, playbook: Playbook) -> int:
    if args.venv is not None and (not args.venv.startswith("/") or
                                  not is_clean_name(args.venv)):
        raise InputError("command line", None, "--venv", "must be an absolute path")
    for name, value in (("--json", args.json_path), ("--textfile", args.textfile)):
        if value == "-":
            raise InputError("command line", None, name, "a file is needed: rounds replace "
                             "it (see `fleetcheck report FILE` to read one)")
    if args.timeout <= 0:
        raise InputError("command line", None, "--timeout", "must be a positive number")
    expect = CommandLine(args.expect_version, args.expect_commit)
    resolve([], playbook.expect, expect, "node")  # a bad value is exit 2 before any round
    options = NodeOptions(node=node_name(args.node_name), venv=args.venv, timeout=args.timeout,
                          pod_logs=args.pod_logs, expect=expect)
    if not args.no_cache:
        from fleetcheck.analysis_cache import default_directory
        options.analysis_cache = default_directory()
    stop = Stop()
    try:
        while True:
            try:
                run = node_round(playbook, options, stop.event)
            except Exception as exc:  # a bug costs this round, never the agent
                if args.once:
                    raise
                print("fleetcheck: error: %s" % describe(exc, "running a round"),
                      file=sys.stderr, flush=True)
                if stop.event.wait(args.every):
                    return 0
                continue
            if stop.event.is_set() and not args.once:
                return 0  # a round cut short never replaces the last whole one
            failed = write_round(run, args.json_path, args.textfile)
            print(round_line(run), flush=True)
            if args.once:
                from fleetcheck.report.terminal import render_summary
                render_summary(run, sys.stdout)
                code = run.exit_code()
                return 3 if failed and code == 0 else code
            if stop.event.wait(args.every):
                return 0
    finally:
        stop.restore()
