"""The command line, and the composition root: arguments, the run put together from the
modules below it (inventory, playbook, expectations, runner, renderers), and exit codes, so
no other module needs to know them all.

Exit codes: 0 every host passes (warnings allowed); 1 a check failed; 2 bad input
(inventory, playbook, options); 3 no failure, but a host was unreachable or errored, or
the run was incomplete; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Callable, NoReturn

from fleetcheck import __version__
from fleetcheck.descriptors import shortfall
from fleetcheck.input_error import InputError
from fleetcheck.drafter_expectations import parse_drafter, resolve_drafters
from fleetcheck.expectations import CommandLine, resolve
from fleetcheck.inventory import Host, apply_limit, read_inventory
from fleetcheck.inventory.script import DEFAULT_SCRIPT_TIMEOUT
from fleetcheck.node_agent import add_node_parser
from fleetcheck.patches import read_patch
from fleetcheck.playbook import Playbook, load_playbook, load_playbooks
from fleetcheck.report.html import render_html
from fleetcheck.report.terminal import Progress, render_summary
from fleetcheck.faults import describe
from fleetcheck.results import ResultsFileError, ResultsWriter, RunResult, load_json, merge_runs
from fleetcheck.runner import (DEFAULT_PARALLEL, DEFAULT_TIMEOUT, RunOptions, host_smoke,
                               run_fleet)
from fleetcheck.smoke_settings import check_override, smoke_plan
from fleetcheck.text import counted, is_clean_name, neutral

if TYPE_CHECKING:  # `run` loads the SSH library; report, diff, judge and bundle never do
    import paramiko

    from fleetcheck.connectors.ssh import KnownHosts

DESCRIPTION = ("Before a vLLM rollout, check every box of a fleet over SSH (or in its containers): "
               "which fixes the code on disk has, with evidence, which build and commit it "
               "runs, whether the install is whole, and (with --smoke) the speculative-"
               "decoding acceptance its server reaches. Writes HTML, JSON and JUnit; the exit "
               "code gates a CI job.")
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_CLOSED_STDOUT = 141  # 128 + SIGPIPE, as a shell reports a program its pipe closed on


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got %d" % value)
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number (seconds)" % text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number, got %s" % text)
    return value


RUN_EPILOG = """exit codes:
  0    every host passes (warnings allowed)
  1    a check failed on some host
  2    bad input: inventory, playbook or option (the message names file, host and field)
  3    no failure, but a host was unreachable or errored, the run was incomplete, or an
       output could not be written
  130  interrupted (Ctrl-C); the outputs are written, marked incomplete

examples:
  fleetcheck run hosts.ini
  fleetcheck run hosts.ini --limit 'gpus:!canary' --json out.json --junit out.xml
  fleetcheck run -i hosts.ini -i ./cmdb_inventory.py -j 64 --timeout 30
  fleetcheck run hosts.ini --expect-version '==0.33.0' --expect-same-build
  fleetcheck run hosts.ini --smoke"""


DEMO_EPILOG = """exit codes:
  0    every host came out as it should: gpu-healthy passes the three fix checks,
       gpu-stale fails each of them, gpu-down is unreachable, and `fleetcheck run`
       exits 1 (a check failed); what each host came out as is printed
  1    something differed: each difference is printed as host, check (or status),
       expected, got
  2    it cannot write its outputs (reports/demo/ under the current directory), or
       a loopback address it chose was taken before its sshd started there
  130  interrupted (Ctrl-C) before the comparison; the fleet is stopped
With --keep, the Ctrl-C that stops the fleet after the comparison exits 0 or 1 as above."""


class Parser(argparse.ArgumentParser):
    """argparse, its errors said as every other input error is: `fleetcheck: error:
    command line: field '--parallel': must be at least 1, got 0` (after the usage)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        argument = re.match(r"argument ([^:]+): (.*)$", message, re.S)
        if argument:
            names = argument.group(1).split("/")
            name = next((n for n in names if n.startswith("--")), names[-1])
            message = "field '%s': %s" % (name, argument.group(2))
        self.exit(EXIT_INPUT, "fleetcheck: error: command line: %s\n" % message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fleetcheck", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version="fleetcheck " + __version__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="check every host of an inventory",
                         description="Check every host of an inventory over SSH: the installed "
                                     "vLLM's version and commit, each fix in the code on disk "
                                     "(with evidence), the install's integrity, and optionally "
                                     "a speculative-decoding smoke load.",
                         epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("inventory", nargs="?",
                     help="Ansible inventory: INI, YAML or JSON file, directory, or executable")
    run.add_argument("-i", "--inventory", dest="sources", action="append", default=[],
                     metavar="SOURCE", help="another inventory source (repeatable; merged in "
                                            "order, as Ansible merges -i)")
    run.add_argument("--inventory-timeout", type=positive_float, default=DEFAULT_SCRIPT_TIMEOUT,
                     help="deadline for a dynamic inventory script (default %.0fs)"
                          % DEFAULT_SCRIPT_TIMEOUT)
    run.add_argument("--playbook", action="append",
                     help="fix signatures (default: the packaged dflash.yaml); repeat it to "
                          "add another playbook's checks")
    run.add_argument("--patch", dest="patches", action="append", default=[], metavar="FILE",
                     help="a pull request's diff (git diff, format-patch series or diff -u) "
                     "checked as one more check; repeatable")
    run.add_argument("--json", dest="json_path", help="results JSON; - for stdout (the "
                                                      "summary then goes to stderr); default: "
                                                      "beside --html, else reports/<time>/")
    html = run.add_mutually_exclusive_group()
    html.add_argument("--html", dest="html_path", help="HTML report (default: beside the "
                                                       "JSON; none with --json -)")
    html.add_argument("--no-html", action="store_true", help="write no HTML report")
    run.add_argument("-j", "--parallel", type=positive_int, default=DEFAULT_PARALLEL,
                     help="hosts checked at once (default %d)" % DEFAULT_PARALLEL)
    run.add_argument("--limit", help="Ansible host pattern: a,b or a:b, !x excludes, &x "
                                     "intersects, ~regex, @file")
    run.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT,
                     help="deadline per host, whole host (default %.0fs)" % DEFAULT_TIMEOUT)
    run.add_argument("--known-hosts", default=os.environ.get("FLEETCHECK_KNOWN_HOSTS"),
                     help="known_hosts file (default $FLEETCHECK_KNOWN_HOSTS, else "
                          "~/.ssh/known_hosts); a file given must exist unless "
                          "--host-key-policy accept-new, which starts it")
    run.add_argument("--ssh-config", default=os.environ.get("FLEETCHECK_SSH_CONFIG"),
                     help="ssh config file (default $FLEETCHECK_SSH_CONFIG, else "
                          "~/.ssh/config if present)")
    run.add_argument("--host-key-policy", choices=["strict", "accept-new"], default="strict",
                     help="strict: unknown hosts refused; accept-new: trust on first use "
                          "(a changed key is always refused)")
    run.add_argument("--deep", action="store_true",
                     help="hash every file RECORD lists (default: sizes for all, hashes for "
                          "the files the checks read)")
    run.add_argument("--no-import-check", action="store_true",
                     help="do not load vllm's compiled modules in the venv's interpreter")
    run.add_argument("--no-integrity", action="store_true", help="skip the install-* checks")
    run.add_argument("--no-config-load", action="store_true",
                     help="do not load a served drafter's config with the install's own "
                          "loader (a child importing torch and transformers, ~5 s of CPU "
                          "per host); drafter-loaded is then a skip")
    run.add_argument("--no-shared-analysis", action="store_true",
                     help="analyse the fix code on every host (default: once per build, the "
                          "build's other hosts prove by sha256 they hold the same bytes)")
    run.add_argument("--no-cache", action="store_true",
                     help="neither use nor keep the controller's cache of fix analyses "
                          "($XDG_CACHE_HOME/fleetcheck/analyses)")
    smoke = run.add_mutually_exclusive_group()
    smoke.add_argument("--smoke", dest="smoke", action="store_true", default=None,
                       help="run the speculative-decoding smoke load (overrides smoke.enabled)")
    smoke.add_argument("--no-smoke", dest="smoke", action="store_false",
                       help="no smoke load, whatever the playbook says")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="show evidence for passing checks too")
    run.add_argument("--retries", type=int, default=1,
                     help="retries of transient connection failures (default 1)")

    run.add_argument("--junit", dest="junit_path", help="also write JUnit XML here")
    run.add_argument("--metrics", dest="metrics_path", metavar="PATH",
                     help="also write the verdicts as Prometheus metrics here (text format, "
                          "replaced atomically: a node_exporter textfile *.prom)")
    run.add_argument("--expect-version", metavar="SPEC",
                     help="PEP 440 specifier every host must match, e.g. '==0.33.0' "
                          "(overrides playbook expect: and fleetcheck_expect_version)")
    run.add_argument("--expect-commit", metavar="PREFIX",
                     help="commit prefix (7+ hex digits) every host's build must record "
                          "(overrides playbook expect: and fleetcheck_expect_commit)")
    run.add_argument("--expect-same-build", action="store_true",
                     help="hosts expected on one build must hold the same (version, commit, "
                          "RECORD sha256)")
    run.add_argument("--expect-drafter", metavar="REPO[@REV]",
                     help="the DFlash drafter every server must serve, optionally at a "
                          "snapshot sha prefix (overrides playbook expect.drafter and "
                          "fleetcheck_expect_drafter)")

    report = sub.add_parser("report", help="re-render (and merge) saved results")
    report.add_argument("results", nargs="+", help="results JSON file(s); several are merged")
    report.add_argument("--html", dest="html_path", help="write the HTML report here")
    report.add_argument("--junit", dest="junit_path", help="write JUnit XML here")
    report.add_argument("--json", dest="json_path", help="write the (merged) results here")

    diff = sub.add_parser(
        "diff", help="what changed between two runs; exit 1 if worse",
        description="What changed per host between two saved runs (results JSON): status, "
                    "version, commit, each check, integrity findings, acceptance; every new "
                    "failure or error with its message. Exit 1 when anything got worse (a "
                    "gate: a host or check moved to fail or error, a new host not passing, "
                    "acceptance down by more than 10%), 0 otherwise, 2 on a file that is not "
                    "results.",
        epilog="example: fleetcheck diff reports/before/results.json reports/after/results.json")
    diff.add_argument("old", help="results JSON of the earlier run (the baseline)")
    diff.add_argument("new", help="results JSON of the later run, compared with the baseline")
    diff.add_argument("--json", action="store_true",
                      help="the changes as JSON on stdout (hosts, added, removed, worse)")

    demo = sub.add_parser("demo", help="run the whole flow on a generated loopback fleet",
                          description="Start three real sshd hosts on loopback (a healthy "
                                      "install, one missing the fixes, one down),\ncheck them "
                                      "into reports/demo/ and compare what each came out as "
                                      "with what it should.",
                          epilog=DEMO_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--keep", action="store_true",
                      help="keep the demo fleet up after the run, its inventory printed, to "
                           "try commands on; Ctrl-C stops it")
    examples = sub.add_parser("examples", help="the example inventories shipped with "
                                               "fleetcheck: where they are, or a copy")
    examples.add_argument("--copy", metavar="DIR",
                          help="copy them into DIR (created if needed; an existing file is "
                               "never overwritten)")
    bundle = sub.add_parser("probe-bundle", help="write the probe, plan inside, as one "
                                                 "script for another engine to run")
    bundle.add_argument("--playbook", action="append",
                        help="fix signatures (default: the packaged dflash.yaml); repeatable")
    bundle.add_argument("--patch", dest="patches", action="append", default=[], metavar="FILE",
                        help="a pull request's diff (git diff, format-patch series or diff -u) "
                        "checked as one more check; repeatable")
    bundle.add_argument("--host", help="host name the facts carry (default: the node's "
                                       "hostname, or the script's own --host)")
    bundle.add_argument("--venv", help="the Python environment holding vLLM (as the "
                                       "inventory's venv; the script's --venv overrides it)")
    bundle.add_argument("--python", help="interpreter for the import check (default "
                                         "<venv>/bin/python)")
    bundle.add_argument("--site-packages", help="explicit site-packages")
    bundle.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT,
                        help="the probe's time budget (default %.0fs)" % DEFAULT_TIMEOUT)
    bundle.add_argument("--deep", action="store_true", help="hash every file RECORD lists")
    bundle.add_argument("--no-import-check", action="store_true",
                        help="do not load vllm's compiled modules")
    bundle.add_argument("--no-integrity", action="store_true", help="skip the install-* checks")
    bundle.add_argument("--expect-drafter", metavar="REPO[@REV]",
                        help="the drafter `judge --expect-drafter` will hold the nodes to: "
                             "the probe resolves it on each node, served or not (overrides "
                             "the playbook's expect.drafter)")

    judge = sub.add_parser("judge", help="turn facts from probe-bundle scripts into results")
    judge.add_argument("facts", nargs="*", help="facts files (a document, JSON lines, or "
                                                "`ansible --tree` output); none or - : stdin")
    judge.add_argument("-i", "--inventory", dest="inventory", action="append", default=[],
                       metavar="SOURCE", help="the inventory of the hosts the facts are from: "
                       "their groups, variables, expectations and waivers (as for run)")
    judge.add_argument("--playbook", action="append",
                       help="the playbook the bundle was written from; repeatable")
    judge.add_argument("--patch", dest="patches", action="append", default=[], metavar="FILE",
                       help="as given to probe-bundle")
    judge.add_argument("--json", dest="json_path", help="results JSON, - for stdout (as for run)")
    judge_html = judge.add_mutually_exclusive_group()
    judge_html.add_argument("--html", dest="html_path", help="HTML report (as for run)")
    judge_html.add_argument("--no-html", action="store_true", help="write no HTML report")
    judge.add_argument("--junit", dest="junit_path", help="also write JUnit XML here")
    judge.add_argument("--metrics", dest="metrics_path", metavar="PATH",
                       help="also write Prometheus metrics here (as for run)")
    judge.add_argument("-v", "--verbose", action="store_true",
                       help="show evidence for passing checks too")
    judge.add_argument("--no-import-check", action="store_true",
                       help="as given to probe-bundle")
    judge.add_argument("--no-integrity", action="store_true", help="as given to probe-bundle")
    judge.add_argument("--expect-version", metavar="SPEC", help="as for run")
    judge.add_argument("--expect-commit", metavar="PREFIX", help="as for run")
    judge.add_argument("--expect-same-build", action="store_true", help="as for run")
    judge.add_argument("--expect-drafter", metavar="REPO[@REV]", help="as for run")
    add_node_parser(sub)
    return parser


def ssh_config_path(path: str | None) -> str:
    return path or os.path.expanduser("~/.ssh/config")


def load_ssh_config(path: str | None) -> "paramiko.SSHConfig | None":
    from fleetcheck.connectors.ssh import enable_match_exec, paramiko  # its lean import
    path = ssh_config_path(path)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            if re.search(r"(?im)^\s*match\b.*\bexec\b", handle.read()):
                enable_match_exec()
        return paramiko.SSHConfig.from_path(path)
    except (OSError, paramiko.SSHException) as exc:
        raise InputError(path, None, None, "cannot parse ssh config: %s" % exc)


def known_hosts_for(args: argparse.Namespace) -> "KnownHosts":
    """The run's known_hosts: a file named with --known-hosts must exist (read as empty,
    every host would be refused as unknown) unless accept-new is to start it; each key
    accept-new adds is said on stderr."""
    from fleetcheck.connectors.ssh import KnownHosts
    path = args.known_hosts or os.path.expanduser("~/.ssh/known_hosts")
    if args.known_hosts and not os.path.exists(path) and args.host_key_policy != "accept-new":
        raise InputError(path, None, "--known-hosts", "no such file: every host would be "
                         "refused as unknown; give the file that holds your hosts' keys, or "
                         "--host-key-policy accept-new to start it")
    try:
        return KnownHosts(path, args.host_key_policy,
                          on_added=lambda line: print("fleetcheck: %s" % line, file=sys.stderr))
    except ValueError as exc:
        raise InputError(path, None, "--known-hosts", str(exc))


def refuse_missing_keys(hosts: list[Host], inventory_name: str) -> None:
    """An inventory's key file is read on this machine: one that does not exist is bad
    input now, not an auth error on every host that names it."""
    for host in hosts:
        if host.connection == "ssh" and host.key and \
                not os.path.isfile(os.path.expanduser(host.key)):
            origin = host.origins.get("key")
            source, where, variable = origin if origin else (
                inventory_name, "host '%s'" % host.name, "key")
            raise InputError(source, where, variable, "no such key file on this machine: %s%s"
                             % (host.key, "" if where == "host '%s'" % host.name else
                                " (for host '%s')" % host.name))


def default_report_dir() -> str:
    """reports/<time>/, claimed by creating it: a second run (or `judge` call) in the
    same second gets reports/<time>-2/ rather than overwriting the first's results. A
    directory that cannot be made is left to the writers, whose failure names it."""
    stamp = os.path.join("reports", datetime.now().strftime("%Y%m%d-%H%M%S"))
    try:
        os.makedirs("reports", exist_ok=True)
    except OSError:
        return stamp
    directory, number = stamp, 1
    while True:
        try:
            os.mkdir(directory)
            return directory
        except FileExistsError:
            number += 1
            directory = "%s-%d" % (stamp, number)
        except OSError:
            return directory


STDOUT = "-"


@dataclass
class Outputs:
    """Where a run's outputs go: `json` is a path or STDOUT (then the terminal summary
    goes to stderr and no checkpoint file is kept); None: not written."""
    json: str
    html: str | None
    junit: str | None

    @property
    def piped(self) -> bool:
        return self.json == STDOUT


def refuse_stdout_but_json(args: argparse.Namespace) -> None:
    """One stdout: only the results may go there."""
    for name, value in (("--html", args.html_path), ("--junit", args.junit_path),
                        ("--metrics", getattr(args, "metrics_path", None))):
        if value == STDOUT:
            raise InputError("command line", None, name, "only --json can be - (stdout)")


def outputs_for(args: argparse.Namespace) -> Outputs:
    """What was asked for, and the rest beside it: `--json out/r.json` puts the HTML at
    out/r.html (unless --no-html), `--html F` the JSON beside F, neither both into
    reports/<time>/; with `--json -` nothing is written unless asked."""
    json_path, html_path, junit_path = args.json_path, args.html_path, args.junit_path
    refuse_stdout_but_json(args)
    no_html = getattr(args, "no_html", False)
    if json_path == STDOUT:
        return Outputs(STDOUT, html_path, junit_path)
    if json_path is None and html_path is None:
        directory = default_report_dir()
        return Outputs(os.path.join(directory, "results.json"),
                       None if no_html else os.path.join(directory, "report.html"), junit_path)
    if json_path is None:
        return Outputs(os.path.splitext(html_path)[0] + ".json", html_path, junit_path)
    if html_path is None and not no_html:
        html_path = os.path.splitext(json_path)[0] + ".html"
    return Outputs(json_path, html_path, junit_path)


def lock_given_outputs(args: argparse.Namespace, outputs: Outputs) -> list[int]:
    """Every output path given or derived from one given, locked for this run (a default
    reports/<timestamp>/ directory is this run's own already)."""
    from fleetcheck.output_lock import lock_outputs
    if args.json_path is None and args.html_path is None and args.junit_path is None:
        return []
    paths = [("--json", outputs.json)] if not outputs.piped else []
    paths += [("--html", outputs.html)] if outputs.html else []
    paths += [("--junit", outputs.junit)] if outputs.junit else []
    if args.json_path is None and args.html_path is None:
        paths = [p for p in paths if p[0] == "--junit"]
    return lock_outputs(paths)


def said_where(outputs: Outputs) -> None:
    """Where each output went (stderr when the results themselves are on stdout)."""
    lines = [("results", outputs.json if not outputs.piped else "stdout"),
             ("report", outputs.html), ("junit", outputs.junit)]
    print("\n".join("%-8s %s" % (label + ":", path) for label, path in lines if path),
          file=sys.stderr if outputs.piped else sys.stdout)


def command_run(args: argparse.Namespace) -> int:
    sources = ([args.inventory] if args.inventory else []) + args.sources
    if not sources:
        raise InputError("command line", None, "inventory", "give an inventory (positional "
                         "or -i SOURCE)")
    from fleetcheck.connectors import declarations
    from fleetcheck.expectations import inventory_checks
    from fleetcheck.waivers import check_inventory_waivers, host_waivers
    inventory = read_inventory(sources, args.inventory_timeout,
                               {"smoke": check_override, **inventory_checks(),
                                "waive": check_inventory_waivers},
                               declarations=declarations())
    inventory_name = " + ".join(sources)
    hosts = apply_limit(inventory.hosts, args.limit, inventory_name, inventory.groups)
    from fleetcheck.connectors import check_connections
    check_connections(sorted({host.connection for host in hosts}))  # before any host
    playbook = tuned_playbook(args)
    if args.ssh_config and not os.path.exists(args.ssh_config):
        raise InputError(args.ssh_config, None, "--ssh-config", "no such file")
    from fleetcheck.connectors.ssh import SshSettings, resolve_endpoints
    known_hosts = known_hosts_for(args)
    settings = SshSettings(known_hosts=known_hosts, ssh_config=load_ssh_config(args.ssh_config),
                           retries=max(0, args.retries),
                           ssh_config_path=ssh_config_path(args.ssh_config))
    resolve_endpoints([host.connection_settings() for host in hosts], settings)
    refuse_missing_keys(hosts, inventory_name)
    for warning in inventory.warnings:
        print("fleetcheck: warning: %s" % warning, file=sys.stderr)
    for note in inventory.notes + settings.notes:
        print("fleetcheck: note: %s" % note, file=sys.stderr)
    expected = resolve(hosts, playbook.expect, CommandLine(
        args.expect_version, args.expect_commit, args.expect_same_build), args.inventory)
    options = RunOptions(settings=settings, parallel=args.parallel, timeout=args.timeout,
                         smoke=args.smoke, share_analysis=not args.no_shared_analysis,
                         analysis_cache=None if args.no_cache else cache_directory(),
                         expected=expected,
                         drafters=resolve_drafters(hosts, playbook.expect_drafter,
                                                   args.expect_drafter, args.inventory),
                         load_config=not args.no_config_load,
                         waivers=host_waivers(hosts, inventory_name))
    refuse_stdout_but_json(args)
    prove_smoke_templates(hosts, playbook, options)
    short = shortfall(args.parallel, len(hosts))
    if short:
        raise InputError("command line", None, "-j", short)
    outputs = outputs_for(args)  # last: the default one claims its directory
    held = lock_given_outputs(args, outputs)  # until every output is written
    writer = ResultsWriter(outputs.json)
    interrupt_on_sigterm()
    with Progress(len(hosts)) as progress:
        run = run_fleet(hosts, playbook, options, inventory_name=inventory_name,
                        on_start=progress.started, on_done=progress.finished,
                        checkpoint=None if outputs.piped else Checkpoints(writer))
    failed = write_outputs(run, writer, outputs, verbose=args.verbose)
    for fd in held:
        os.close(fd)
    said_where(outputs)
    failed += write_metrics_output(run, args.metrics_path, outputs)
    if not run.complete:
        print("fleetcheck: interrupted: %s not finished; outputs marked incomplete"
              % counted(len(run.not_finished), "host"), file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # do not wait for hosts still inside their deadlines
    return exit_code(run, failed)


def interrupt_on_sigterm() -> None:
    """SIGTERM (a CI job cancelled, a supervisor stopping) stops a run as Ctrl-C does:
    the hosts' probes are told to stop and the outputs are written, marked incomplete."""
    import signal

    def interrupt(signum: int, frame: object) -> NoReturn:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def cache_directory() -> str:
    from fleetcheck.analysis_cache import default_directory
    return default_directory()


def prove_smoke_templates(hosts: list[Host], playbook: Playbook, options: RunOptions) -> None:
    """Every launch command rendered for every host before any host is contacted: an
    undefined name is exit 2 now, not a failure at the first host (see smoke_settings.py)."""
    for host in hosts:
        smoke = host_smoke(host, playbook, options.smoke)
        if smoke is not None and smoke.mode == "launch":
            smoke_plan(host, smoke)


class Checkpoints:
    """The runner's checkpoint callback: a failing write (disk full, directory gone) is
    said once on stderr and tried again next time; it never stops the run."""

    def __init__(self, writer: ResultsWriter):
        self.writer = writer
        self.warned = False

    def __call__(self, partial: RunResult) -> None:
        try:
            self.writer.write(partial)
        except Exception as exc:
            if not self.warned:
                print("fleetcheck: warning: %s: cannot write the results checkpoint: %s: %s"
                      % (self.writer.path, type(exc).__name__, exc), file=sys.stderr)
                self.warned = True


def write_outputs(run: RunResult, writer: ResultsWriter | None, outputs: Outputs,
                  verbose: bool = False) -> list[str]:
    """JSON first, then each renderer on its own: an output that fails is named on stderr
    (with fleetcheck's internal-error message) and every other output is still written.
    Returns the outputs that failed."""
    html_path, junit_path = outputs.html, outputs.junit
    failed = []
    closed: list[str] = []

    def attempt(label: str, where: str, write: Callable[[], None]) -> None:
        try:
            write()
        except BrokenPipeError:  # stdout's reader went away: the other outputs still go out
            closed.append(label)
            closed_stdout()
        except OSError as exc:  # the machine's doing (a missing directory, a full disk)
            failed.append(label)
            print("fleetcheck: error: %s: the %s could not be written: %s: %s"
                  % (where, label, type(exc).__name__, exc), file=sys.stderr)
        except Exception as exc:
            failed.append(label)
            print("fleetcheck: error: %s: the %s could not be written: %s" % (
                where, label, describe(exc, "writing the %s" % label)), file=sys.stderr)

    if writer is not None and outputs.piped:
        attempt("results JSON", "stdout", lambda: sys.stdout.write("".join(writer.parts(run))))
    elif writer is not None:
        attempt("results JSON", writer.path, lambda: writer.write(run))
    if html_path:
        attempt("HTML report", html_path, lambda: render_html(run, html_path))
    if junit_path:
        def junit() -> None:
            from fleetcheck.report.junit import write_junit  # only --junit needs it
            write_junit(run, junit_path)
        attempt("JUnit XML", junit_path, junit)
    summary_to = sys.stderr if outputs.piped else sys.stdout
    attempt("terminal summary", "stderr" if outputs.piped else "stdout",
            lambda: render_summary(run, summary_to, verbose=verbose))
    if closed:  # every file is written: now the quiet exit of a closed stdout
        raise BrokenPipeError("stdout closed while writing the %s" % closed[0])
    return failed


def write_metrics_output(run: RunResult, path: str | None, outputs: Outputs) -> list[str]:
    """--metrics: the Prometheus text, after the other outputs; a failure is named on
    stderr and makes a passing run 3, as any output's."""
    if not path:
        return []
    from fleetcheck.report.metrics import write_metrics  # only --metrics needs it
    try:
        write_metrics(run, path)
    except OSError as exc:
        print("fleetcheck: error: %s: the metrics could not be written: %s: %s"
              % (path, type(exc).__name__, exc), file=sys.stderr)
        return ["metrics"]
    print("%-8s %s" % ("metrics:", path), file=sys.stderr if outputs.piped else sys.stdout)
    return []


def exit_code(run: RunResult, failed_outputs: list[str]) -> int:
    """The run's code; an output that could not be written makes a passing run 3."""
    code = run.exit_code()
    return 3 if failed_outputs and code == 0 else code


def load_results(paths: list[str]) -> RunResult:
    runs = []
    for path in paths:
        try:
            runs.append(load_json(path))
        except OSError as exc:
            raise InputError(path, None, None, "cannot read: %s" % (exc.strerror or exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            refuse_facts(path)
            if isinstance(exc, ResultsFileError):
                detail = exc.problem
            else:
                detail = "field %s missing" % exc if isinstance(exc, KeyError) else str(exc)
            raise InputError(path, None, None, "not a fleetcheck results file (%s)" % detail)
    if len(runs) == 1:
        return runs[0]
    from fleetcheck.checks.build import expectation_warnings
    merged = merge_runs(runs, paths)
    return replace(merged, warnings=expectation_warnings(merged.hosts))  # every file's hosts


def refuse_facts(path: str) -> None:
    """Facts handed where results are read: name the command that reads them."""
    from fleetcheck.judge import holds_facts  # only a file that is not results needs it
    if holds_facts(path):
        raise InputError(path, None, None, "this is probe facts (what a `fleetcheck "
                         "probe-bundle` script prints), not results: `fleetcheck judge %s` "
                         "judges them" % shlex.quote(path))


def command_report(args: argparse.Namespace) -> int:
    run = load_results(args.results)
    refuse_stdout_but_json(args)
    outputs = Outputs(args.json_path, args.html_path, args.junit_path)
    writer = ResultsWriter(args.json_path) if args.json_path else None
    failed = write_outputs(run, writer, outputs)
    if args.json_path or args.html_path or args.junit_path:
        said_where(outputs)
    else:  # only what is asked is written: never a file beside an input
        print("nothing written (--html FILE, --junit FILE or --json FILE write the report)",
              file=sys.stderr)
    if not run.complete:
        print("fleetcheck: these results are incomplete (complete: false): %s not "
              "finished" % counted(len(run.not_finished), "host"), file=sys.stderr)
    return exit_code(run, failed)


def say_replaced_checks(playbook: Playbook) -> None:
    """A playbook of one's own without `extends:` runs instead of the packaged checks:
    said, since the DFlash checks are then not run."""
    packaged = load_playbook()
    if any(playbook.check_sources.get(c.id) == packaged.source for c in packaged.checks) or \
            playbook.source == packaged.source:
        return
    missing = [c.id for c in packaged.checks if c.id not in playbook.check_sources]
    if missing:
        print("fleetcheck: note: %s replaces the packaged checks (%s are not run); "
              "`extends: dflash` in it adds its checks to them instead"
              % (playbook.source, ", ".join(missing)), file=sys.stderr)


def tuned_playbook(args: argparse.Namespace) -> Playbook:
    """The playbook with the command line's integrity switches applied."""
    playbook = load_playbooks(args.playbook)
    for path in getattr(args, "patches", None) or []:
        playbook.add_patch(read_patch(path), path)
    say_replaced_checks(playbook)
    if getattr(args, "deep", False):
        playbook.integrity.deep = True
    if args.no_import_check:
        playbook.integrity.import_check = False
    if args.no_integrity:
        playbook.integrity.enabled = False
    return playbook


def command_probe_bundle(args: argparse.Namespace) -> int:
    from fleetcheck.bundle import probe_script
    for name, value in (("--venv", args.venv), ("--python", args.python),
                        ("--site-packages", args.site_packages)):
        if value is not None and (not value.startswith("/") or not is_clean_name(value)):
            raise InputError("command line", None, name, "must be an absolute path")
    if args.host is not None and (not args.host or not is_clean_name(args.host)):
        raise InputError("command line", None, "--host", "must be a printable name")
    drafter = parse_drafter(args.expect_drafter, "command line", None, "--expect-drafter",
                            "--expect-drafter") if args.expect_drafter is not None else None
    sys.stdout.write(probe_script(tuned_playbook(args), args.host, args.venv, args.python,
                                  args.site_packages, args.timeout, drafter))
    return 0


def command_judge(args: argparse.Namespace) -> int:
    from fleetcheck.judge import judge_facts
    playbook = tuned_playbook(args)
    inventory = None
    if args.inventory:
        from fleetcheck.connectors import declarations
        from fleetcheck.expectations import inventory_checks
        from fleetcheck.waivers import check_inventory_waivers
        read = read_inventory(args.inventory, DEFAULT_SCRIPT_TIMEOUT,
                              {"smoke": check_override, **inventory_checks(),
                               "waive": check_inventory_waivers}, declarations=declarations())
        inventory = (" + ".join(args.inventory), read.hosts)
    run = judge_facts(args.facts, playbook, CommandLine(
        args.expect_version, args.expect_commit, args.expect_same_build, args.expect_drafter),
        inventory)
    outputs = outputs_for(args)
    failed = write_outputs(run, ResultsWriter(outputs.json), outputs, verbose=args.verbose)
    said_where(outputs)
    failed += write_metrics_output(run, args.metrics_path, outputs)
    return exit_code(run, failed)


def command_diff(args: argparse.Namespace) -> int:
    from fleetcheck.report.diff import diff_runs, diff_text  # only `diff` needs them
    result = diff_runs(load_results([args.old]), load_results([args.new]))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(neutral(line) for line in diff_text(result)))
    return 1 if result["worse"] else 0


def command_node(args: argparse.Namespace) -> int:
    if args.npd:  # NPD's plugin: the last round's verdict, never a probe
        from fleetcheck.npd import verdict
        if not args.json_path:
            raise InputError("command line", None, "--json", "--npd reads the agent's "
                             "last round: give the agent's --json PATH")
        code, line = verdict(args.json_path, args.max_age)
        print(line)
        return code
    from fleetcheck.node_agent import command_node as run_node
    return run_node(args, tuned_playbook(args))


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")


def command_examples(args: argparse.Namespace) -> int:
    """Print where the packaged example inventories are, or copy them out (never over a
    file that exists)."""
    files = sorted(os.path.relpath(os.path.join(d, n), EXAMPLES)
                   for d, _, names in os.walk(EXAMPLES) for n in names)
    if not args.copy:
        print("example inventories in %s:\n%s" % (EXAMPLES, "\n".join("  " + f for f in files)))
        return 0
    for rel in files:
        target = os.path.join(args.copy, rel)
        if os.path.lexists(target):
            raise InputError(target, None, None, "exists already: fleetcheck examples never "
                             "overwrites a file (copy into an empty directory)")
    for rel in files:
        target = os.path.join(args.copy, rel)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(EXAMPLES, rel), target)
        except OSError as exc:
            raise InputError(target, None, None, "cannot write: %s" % (exc.strerror or exc))
    print("copied %s into %s: edit the addresses, then `fleetcheck run %s`" % (
        counted(len(files), "file"), args.copy, os.path.join(args.copy, "example.yaml")))
    return 0


def run_command(args: argparse.Namespace) -> int:
    if args.command == "run":
        return command_run(args)
    if args.command == "report":
        return command_report(args)
    if args.command == "diff":
        return command_diff(args)
    if args.command == "probe-bundle":
        return command_probe_bundle(args)
    if args.command == "judge":
        return command_judge(args)
    if args.command == "demo":
        from fleetcheck.demo import run_demo
        return run_demo(main, keep=args.keep)
    if args.command == "examples":
        return command_examples(args)
    if args.command == "node":
        return command_node(args)
    return EXIT_INPUT


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = run_command(args)
        # what is still buffered goes out here, so a closed stdout is caught below and
        # not left to the interpreter's last flush (a traceback-like message, exit 120)
        sys.stdout.flush()
        return code
    except InputError as exc:
        for error in getattr(exc, "errors", [exc]):
            print("fleetcheck: error: %s" % error, file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return closed_stdout()


def closed_stdout() -> int:
    """The reader of stdout went away (`fleetcheck diff --json a b | head`): a quiet exit
    as a program killed by SIGPIPE, with stdout pointed at /dev/null so the interpreter's
    last flush says nothing either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_STDOUT
