"""`fleetcheck demo`: the whole flow with no fleet.

Starts real sshd hosts on loopback (one healthy install, one missing the fixes, one
unreachable) serving synthetic install trees, runs the check, writes reports/demo/
(results, report, the inventory the run read), compares what each host came out as with
what it should (the host's status and each fix check's), and cleans up; `--keep` leaves
the fleet up until Ctrl-C, to try commands on. Without root or sshd it says what to
install and runs the same trees with `connection: local`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Callable, NamedTuple

import yaml

from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from fleetcheck.lab.testhosts import (AddressInUse, LoopbackFleet, free_loopback_port,
                                      missing_requirements)
from fleetcheck.status import Status

DEMO_VENV = "/opt/fleetcheck-demo-env"
REPORT_DIR = os.path.join("reports", "demo")


class DemoInstall(NamedTuple):
    """The synthetic install a demo host serves."""
    version: str
    files: dict[str, str]
    commit: str


class Expected(NamedTuple):
    """What a demo host must come out as: the demo checks fleetcheck, not only shows it."""
    status: Status
    fixes: Status | None  # the status of every fix check; None: the host has no checks
    why: str


INSTALLS = {"gpu-healthy": DemoInstall("0.33.0", FIXED, "g4ba787ec9"),
            "gpu-stale": DemoInstall("0.20.1", UNFIXED, "g132765e35")}
EXPECTED = {"gpu-healthy": Expected(Status.PASS, Status.PASS,
                                   "its vLLM 0.33.0 has the three fixes"),
            "gpu-stale": Expected(Status.FAIL, Status.FAIL,
                                  "its vLLM 0.20.1 lacks the three fixes"),
            "gpu-down": Expected(Status.UNREACHABLE, None, "nothing listens on its port")}
EXPECTED_RUN_CODE = 1  # `fleetcheck run`'s: a check failed (on gpu-stale)


class Difference(NamedTuple):
    """One way the demo's run did not come out as EXPECTED."""
    host: str
    what: str  # "status", a fix check's id, or "exit code"
    expected: str
    got: str

    def __str__(self) -> str:
        return "%s %s: expected %s, got %s" % (self.host, self.what, self.expected, self.got)


def stop_as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(run_fleetcheck: Callable[[list[str]], int], keep: bool = False,
             installs: dict[str, DemoInstall] | None = None) -> int:
    """`run_fleetcheck` is the command line's entry point (passed in, so the demo does not
    import the command line that starts it). 0 when every host came out as EXPECTED, else
    1. `installs`: what the healthy and the stale host serve (INSTALLS unless given: a
    test gives other trees to see the demo catch a host that is not what it expects).
    SIGTERM and SIGHUP stop it as Ctrl-C does: its sshd hosts and files never outlive it.
    SIGINT is handled too, not left to Python: a process started as a shell's background
    job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt for it."""
    installs = installs or INSTALLS
    try:  # where its outputs go, before any host starts
        os.makedirs(REPORT_DIR, exist_ok=True)
    except OSError as exc:
        print("fleetcheck: error: %s: cannot write the demo's outputs: %s (run it from a "
              "directory where it can create reports/demo/)"
              % (os.path.abspath(REPORT_DIR), exc.strerror or exc), file=sys.stderr)
        return 2
    previous = {sig: signal.signal(sig, stop_as_ctrl_c) for sig in (signal.SIGINT,
                                                                    signal.SIGTERM,
                                                                    signal.SIGHUP)}
    workdir = tempfile.mkdtemp(prefix="fleetcheck-demo-")
    try:
        healthy = os.path.join(workdir, "healthy-env")
        stale = os.path.join(workdir, "stale-env")
        for venv, name in ((healthy, "gpu-healthy"), (stale, "gpu-stale")):
            install = installs[name]
            write_install(venv, install.version, install.files, commit=install.commit)
        missing = missing_requirements()
        if missing:
            print("fleetcheck demo: real sshd hosts need: %s" % "; ".join(missing))
            print("falling back to connection: local (same checks, no SSH)")
            hosts = {"gpu-healthy": {"connection": "local", "venv": healthy},
                     "gpu-stale": {"connection": "local", "venv": stale}}
            known_hosts = os.path.join(workdir, "known_hosts")
            open(known_hosts, "w").close()  # no SSH host to know
            return _run(run_fleetcheck, hosts, known_hosts, keep)
        with LoopbackFleet(os.path.join(workdir, "fleet")) as fleet:
            good = fleet.add("gpu-healthy", mounts={DEMO_VENV: healthy})
            bad = fleet.add("gpu-stale", mounts={DEMO_VENV: stale})
            dead_address = fleet.next_address()
            if fleet.skipped:
                print("demo: something already listens on %s (another `fleetcheck demo "
                      "--keep`?): its hosts take the next free addresses, %s"
                      % (", ".join(fleet.skipped),
                         ", ".join((good.address, bad.address, dead_address))),
                      file=sys.stderr)
            try:
                fleet.start()
            except AddressInUse as exc:  # taken since its address was chosen
                print("fleetcheck: error: %s" % exc, file=sys.stderr)
                return 2
            hosts = {
                good.name: {"ansible_host": good.address},
                bad.name: {"ansible_host": bad.address},
                "gpu-down": {"ansible_host": dead_address, "port": free_loopback_port(dead_address)},
            }
            for spec in hosts.values():
                spec.update({"ansible_user": "root", "key": fleet.client_key, "venv": DEMO_VENV})
            return _run(run_fleetcheck, hosts, fleet.known_hosts, keep)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(run_fleetcheck: Callable[[list[str]], int], hosts: dict, known_hosts: str,
         keep: bool) -> int:
    inventory = os.path.join(REPORT_DIR, "inventory.yaml")  # kept: the results name it
    results = os.path.join(REPORT_DIR, "results.json")
    with open(inventory, "w", encoding="utf-8") as handle:
        yaml.safe_dump({"all": {"children": {"demo": {"hosts": hosts}}}}, handle, sort_keys=False)
    code = run_fleetcheck(["run", inventory, "--known-hosts", known_hosts, "--timeout", "20",
                           "--json", results, "--html", os.path.join(REPORT_DIR, "report.html")])
    report = os.path.abspath(os.path.join(REPORT_DIR, "report.html"))
    found = read_hosts(results)
    fix_ids = fix_check_ids()
    differences = compare(found, list(hosts), fix_ids, code)
    if differences:
        print("demo: NOT as expected; what differed (host, expected, got):\n%s\nreport: %s"
              % ("\n".join("  " + str(d) for d in differences), report), file=sys.stderr)
    else:
        saw = "\n".join("  " + seen(name, found[name], fix_ids) for name in hosts)
        print("demo: every host came out as it should (fleetcheck run exit code %d: a check "
              "failed, on gpu-stale):\n%s\nreport: %s" % (code, saw, report), file=sys.stderr)
    command = "fleetcheck run %s --known-hosts %s" % (os.path.abspath(inventory), known_hosts)
    if keep:
        print("\nThe demo fleet stays up until Ctrl-C. Its inventory: %s\nTry:\n  %s\n"
              "  %s --limit gpu-stale -v\n  fleetcheck report %s --junit demo.xml\n"
              % (os.path.abspath(inventory), command, command, os.path.abspath(results)),
              file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("demo fleet stopped", file=sys.stderr)
    else:
        print("\nNext: `fleetcheck demo --keep` keeps this fleet up to try commands on; "
              "`fleetcheck examples --copy DIR` gives example inventories to start yours "
              "from; `fleetcheck run hosts.ini` checks your own (Ansible) inventory.",
              file=sys.stderr)
    return 1 if differences else 0


def fix_check_ids() -> list[str]:
    """The fix checks of the playbook the demo runs (the packaged one)."""
    from fleetcheck.playbook import load_playbook
    return [check.id for check in load_playbook().checks]


def read_hosts(results: str) -> dict[str, dict] | str:
    """Each host of the results by name, or why there are none."""
    try:
        with open(results, encoding="utf-8") as handle:
            return {host["name"]: host for host in json.load(handle)["hosts"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return "%s (%s)" % (results, exc)


def compare(found: dict[str, dict] | str, names: list[str], fix_ids: list[str],
            run_code: int) -> list[Difference]:
    """Every way the run differs from EXPECTED: `fleetcheck run`'s exit code, each host's
    status, and each fix check's status (a host that fails for another reason while its
    fixes pass is not the stale host the demo promises)."""
    differences = []
    if run_code != EXPECTED_RUN_CODE:
        differences.append(Difference("fleetcheck run", "exit code", str(EXPECTED_RUN_CODE),
                                      str(run_code)))
    if isinstance(found, str):
        return differences + [Difference("results", "file", "the run's results",
                                         "none readable: " + found)]
    for name in names:
        expected = EXPECTED[name]
        host = found.get(name)
        if host is None:
            differences.append(Difference(name, "status", expected.status,
                                          "no such host in the results"))
            continue
        if host.get("status") != expected.status:
            differences.append(Difference(name, "status", expected.status,
                                          str(host.get("status"))))
        if expected.fixes is None:
            continue
        statuses = {check.get("id"): check.get("status") for check in host.get("checks") or []}
        for check_id in fix_ids:
            got = statuses.get(check_id, "no such check")
            if got != expected.fixes:
                differences.append(Difference(name, check_id, expected.fixes, str(got)))
    return differences


def seen(name: str, host: dict, fix_ids: list[str]) -> str:
    """What a host came out as, read from its results, and why that is right."""
    statuses = {check.get("id"): check.get("status") for check in host.get("checks") or []}
    fixes = "" if EXPECTED[name].fixes is None else "; " + ", ".join(
        "%s %s" % (check_id, statuses.get(check_id)) for check_id in fix_ids)
    return "%s: %s%s (%s)" % (name, host.get("status"), fixes, EXPECTED[name].why)
