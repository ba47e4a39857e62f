"""Command line: argument parsing and exit codes only.

Exit codes: 0 every host passes (warnings allowed); 1 a check failed; 2 bad input
(inventory, playbook, options); 3 no failure, but a host was unreachable or errored, or
the run was incomplete; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime
from typing import Callable

from fleetcheck import __version__
from fleetcheck.input_error import InputError
from fleetcheck.drafter_expectations import resolve_drafters
from fleetcheck.expectations import CommandLine, resolve
from fleetcheck.inventory import Host, apply_limit, read_inventory
from fleetcheck.inventory.script import DEFAULT_SCRIPT_TIMEOUT
from fleetcheck.playbook import Playbook, load_playbook
from fleetcheck.report.html import render_html
from fleetcheck.report.terminal import Progress, render_summary
from fleetcheck.faults import describe
from fleetcheck.results import ResultsFileError, ResultsWriter, RunResult, load_json, merge_runs
from fleetcheck.runner import (DEFAULT_PARALLEL, DEFAULT_TIMEOUT, RunOptions, host_smoke,
                               run_fleet)
from fleetcheck.smoke_settings import check_override, smoke_plan
from fleetcheck.text import counted, is_clean_name, neutral
from fleetcheck.connectors.ssh import KnownHosts, SshSettings, enable_match_exec, paramiko

DESCRIPTION = ("Before a vLLM rollout, check every box of a fleet over SSH (or in its containers): "
               "which fixes the code on disk has, with evidence, which build and commit it "
               "runs, whether the install is whole, and (with --smoke) the speculative-"
               "decoding acceptance its server reaches. Writes HTML, JSON and JUnit; the exit "
               "code gates a CI job.")
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetcheck", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version="fleetcheck " + __version__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="check every host of an inventory")
    run.add_argument("inventory", nargs="?",
                     help="Ansible inventory: INI, YAML or JSON file, directory, or executable")
    run.add_argument("-i", "--inventory", dest="sources", action="append", default=[],
                     metavar="SOURCE", help="another inventory source (repeatable; merged in "
                                            "order, as Ansible merges -i)")
    run.add_argument("--inventory-timeout", type=positive_float, default=DEFAULT_SCRIPT_TIMEOUT,
                     help="deadline for a dynamic inventory script (default %.0fs)"
                          % DEFAULT_SCRIPT_TIMEOUT)
    run.add_argument("--playbook", help="fix signatures (default: the packaged dflash.yaml)")
    run.add_argument("--json", dest="json_path", help="results JSON (default reports/<time>/)")
    run.add_argument("--html", dest="html_path", help="HTML report (default reports/<time>/)")
    run.add_argument("-j", "--parallel", type=positive_int, default=DEFAULT_PARALLEL,
                     help="hosts checked at once (default %d)" % DEFAULT_PARALLEL)
    run.add_argument("--limit", help="Ansible host pattern: a,b or a:b, !x excludes, &x "
                                     "intersects, ~regex, @file")
    run.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT,
                     help="deadline per host, whole host (default %.0fs)" % DEFAULT_TIMEOUT)
    run.add_argument("--known-hosts", default=os.path.expanduser("~/.ssh/known_hosts"),
                     help="known_hosts file (default ~/.ssh/known_hosts)")
    run.add_argument("--ssh-config", help="ssh config file (default ~/.ssh/config if present)")
    run.add_argument("--host-key-policy", choices=["strict", "accept-new"], default="strict",
                     help="strict: unknown hosts refused; accept-new: trust on first use "
                          "(a changed key is always refused)")
    run.add_argument("--deep", action="store_true",
                     help="hash every file RECORD lists (default: sizes for all, hashes for "
                          "the files the checks read)")
    run.add_argument("--no-import-check", action="store_true",
                     help="do not load vllm's compiled modules in the venv's interpreter")
    run.add_argument("--no-integrity", action="store_true", help="skip the install-* checks")
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

    diff = sub.add_parser("diff", help="what changed between two runs; exit 1 if worse")
    diff.add_argument("old")
    diff.add_argument("new")
    diff.add_argument("--json", action="store_true", help="machine-readable output")

    sub.add_parser("demo", help="run the whole flow on a generated loopback fleet")
    bundle = sub.add_parser("probe-bundle", help="write the probe, plan inside, as one "
                                                 "script for another engine to run")
    bundle.add_argument("--playbook", help="fix signatures (default: the packaged dflash.yaml)")
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

    judge = sub.add_parser("judge", help="turn facts from probe-bundle scripts into results")
    judge.add_argument("facts", nargs="*", help="facts files (a document, JSON lines, or "
                                                "`ansible --tree` output); none or - : stdin")
    judge.add_argument("--playbook", help="the playbook the bundle was written from")
    judge.add_argument("--json", dest="json_path", help="results JSON (default reports/<time>/)")
    judge.add_argument("--html", dest="html_path", help="HTML report (default reports/<time>/)")
    judge.add_argument("--junit", dest="junit_path", help="also write JUnit XML here")
    judge.add_argument("-v", "--verbose", action="store_true",
                       help="show evidence for passing checks too")
    judge.add_argument("--no-import-check", action="store_true",
                       help="as given to probe-bundle")
    judge.add_argument("--no-integrity", action="store_true", help="as given to probe-bundle")
    judge.add_argument("--expect-version", metavar="SPEC", help="as for run")
    judge.add_argument("--expect-commit", metavar="PREFIX", help="as for run")
    judge.add_argument("--expect-same-build", action="store_true", help="as for run")
    judge.add_argument("--expect-drafter", metavar="REPO[@REV]", help="as for run")
    return parser


def load_ssh_config(path: str | None) -> "paramiko.SSHConfig | None":
    path = path or os.path.expanduser("~/.ssh/config")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            if re.search(r"(?im)^\s*match\b.*\bexec\b", handle.read()):
                enable_match_exec()
        return paramiko.SSHConfig.from_path(path)
    except (OSError, paramiko.SSHException) as exc:
        raise InputError(path, None, None, "cannot parse ssh config: %s" % exc)


def default_report_dir() -> str:
    return os.path.join("reports", datetime.now().strftime("%Y%m%d-%H%M%S"))


def command_run(args: argparse.Namespace) -> int:
    sources = ([args.inventory] if args.inventory else []) + args.sources
    if not sources:
        raise InputError("fleetcheck run", None, "inventory", "give an inventory (positional "
                         "or -i SOURCE)")
    inventory = read_inventory(sources, args.inventory_timeout, {"smoke": check_override})
    inventory_name = " + ".join(sources)
    hosts = apply_limit(inventory.hosts, args.limit, inventory_name, inventory.groups)
    playbook = tuned_playbook(args)
    if args.ssh_config and not os.path.exists(args.ssh_config):
        raise InputError(args.ssh_config, None, "--ssh-config", "no such file")
    try:
        known_hosts = KnownHosts(args.known_hosts, args.host_key_policy)
    except ValueError as exc:
        raise InputError(args.known_hosts, None, "--known-hosts", str(exc))
    settings = SshSettings(known_hosts=known_hosts, ssh_config=load_ssh_config(args.ssh_config),
                           retries=max(0, args.retries))
    expected = resolve(hosts, playbook.expect, CommandLine(
        args.expect_version, args.expect_commit, args.expect_same_build), args.inventory)
    options = RunOptions(settings=settings, parallel=args.parallel, timeout=args.timeout,
                         smoke=args.smoke, share_analysis=not args.no_shared_analysis,
                         analysis_cache=None if args.no_cache else cache_directory(),
                         expected=expected,
                         drafters=resolve_drafters(hosts, playbook.expect_drafter,
                                                   args.expect_drafter, args.inventory))
    report_dir = None
    if not args.json_path or not args.html_path:
        report_dir = default_report_dir()
    json_path = args.json_path or os.path.join(report_dir, "results.json")
    html_path = args.html_path or os.path.join(report_dir, "report.html")
    prove_smoke_templates(hosts, playbook, options)
    writer = ResultsWriter(json_path)
    with Progress(len(hosts)) as progress:
        run = run_fleet(hosts, playbook, options, inventory_name=inventory_name,
                        on_start=progress.started, on_done=progress.finished,
                        checkpoint=Checkpoints(writer))
    failed = write_outputs(run, writer, html_path, args.junit_path, verbose=args.verbose)
    print("results: %s\nreport:  %s%s" % (json_path, html_path,
                                          "\njunit:   " + args.junit_path if args.junit_path else ""))
    if not run.complete:
        print("fleetcheck: interrupted: %s not finished; outputs marked incomplete"
              % counted(len(run.not_finished), "host"), file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # do not wait for hosts still inside their deadlines
    return exit_code(run, failed)


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
                print("fleetcheck: warning: cannot write the results checkpoint %s: %s: %s"
                      % (self.writer.path, type(exc).__name__, exc), file=sys.stderr)
                self.warned = True


def write_outputs(run: RunResult, writer: ResultsWriter | None, html_path: str | None,
                  junit_path: str | None, verbose: bool = False) -> list[str]:
    """JSON first, then each renderer on its own: an output that fails is named on stderr
    (with fleetcheck's internal-error message) and every other output is still written.
    Returns the outputs that failed."""
    failed = []

    def attempt(label: str, write: Callable[[], None]) -> None:
        try:
            write()
        except OSError as exc:  # the machine's doing (a missing directory, a full disk)
            failed.append(label)
            print("fleetcheck: error: the %s could not be written: %s: %s"
                  % (label, type(exc).__name__, exc), file=sys.stderr)
        except Exception as exc:
            failed.append(label)
            print("fleetcheck: error: the %s could not be written: %s" % (
                label, describe(exc, "writing the %s" % label)), file=sys.stderr)

    if writer is not None:
        attempt("results JSON (%s)" % writer.path, lambda: writer.write(run))
    if html_path:
        attempt("HTML report (%s)" % html_path, lambda: render_html(run, html_path))
    if junit_path:
        def junit() -> None:
            from fleetcheck.report.junit import write_junit  # only --junit needs it
            write_junit(run, junit_path)
        attempt("JUnit XML (%s)" % junit_path, junit)
    attempt("terminal summary", lambda: render_summary(run, verbose=verbose))
    return failed


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
        except ResultsFileError as exc:
            raise InputError(path, None, None, "not a fleetcheck results file (%s)" % exc.problem)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            detail = "field %s missing" % exc if isinstance(exc, KeyError) else str(exc)
            raise InputError(path, None, None, "not a fleetcheck results file (%s)" % detail)
    return runs[0] if len(runs) == 1 else merge_runs(runs, paths)


def command_report(args: argparse.Namespace) -> int:
    run = load_results(args.results)
    if not (args.html_path or args.junit_path or args.json_path):
        args.html_path = os.path.splitext(args.results[0])[0] + ".html"
    writer = ResultsWriter(args.json_path) if args.json_path else None
    failed = write_outputs(run, writer, args.html_path, args.junit_path)
    for label, path in (("results", args.json_path), ("report", args.html_path),
                        ("junit", args.junit_path)):
        if path:
            print("%s: %s" % (label, path))
    if not run.complete:
        print("fleetcheck: these results are incomplete (complete: false): %s not "
              "finished" % counted(len(run.not_finished), "host"), file=sys.stderr)
    return exit_code(run, failed)


def tuned_playbook(args: argparse.Namespace) -> Playbook:
    """The playbook with the command line's integrity switches applied."""
    playbook = load_playbook(args.playbook)
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
    sys.stdout.write(probe_script(tuned_playbook(args), args.host, args.venv, args.python,
                                  args.site_packages, args.timeout))
    return 0


def command_judge(args: argparse.Namespace) -> int:
    from fleetcheck.judge import judge_facts
    playbook = tuned_playbook(args)
    run = judge_facts(args.facts, playbook, CommandLine(
        args.expect_version, args.expect_commit, args.expect_same_build, args.expect_drafter))
    report_dir = None if args.json_path and args.html_path else default_report_dir()
    json_path = args.json_path or os.path.join(report_dir, "results.json")
    html_path = args.html_path or os.path.join(report_dir, "report.html")
    failed = write_outputs(run, ResultsWriter(json_path), html_path, args.junit_path,
                           verbose=args.verbose)
    print("results: %s\nreport:  %s%s" % (json_path, html_path,
                                          "\njunit:   " + args.junit_path if args.junit_path else ""))
    return exit_code(run, failed)


def command_diff(args: argparse.Namespace) -> int:
    from fleetcheck.report.diff import diff_runs, diff_text  # only `diff` needs them
    result = diff_runs(load_results([args.old]), load_results([args.new]))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(neutral(line) for line in diff_text(result)))
    return 1 if result["worse"] else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
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
            return run_demo(main)
    except InputError as exc:
        print("fleetcheck: error: %s" % exc, file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_INPUT
