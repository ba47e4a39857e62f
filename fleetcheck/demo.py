"""`fleetcheck demo`: the whole flow with no fleet.

Starts real sshd hosts on loopback (one healthy install, one missing the fixes, one
unreachable) serving synthetic install trees, runs the check, writes reports/demo/
(results, report, the inventory the run read), says whether each host came out as it
should, and cleans up; `--keep` leaves the fleet up until Ctrl-C, to try commands on.
Without root or sshd it says what to install and runs the same trees with
`connection: local`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Callable

import yaml

from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from fleetcheck.lab.testhosts import LoopbackFleet, free_loopback_port, missing_requirements
from fleetcheck.status import Status

DEMO_VENV = "/opt/fleetcheck-demo-env"
REPORT_DIR = os.path.join("reports", "demo")


# what each demo host must come out as: the demo checks fleetcheck, not only shows it
EXPECTED = {"gpu-healthy": (Status.PASS, "its vLLM 0.33.0 has the three fixes"),
            "gpu-stale": (Status.FAIL, "its vLLM 0.20.1 lacks the three fixes"),
            "gpu-down": (Status.UNREACHABLE, "nothing listens on its port")}


def stop_as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(run_fleetcheck: Callable[[list[str]], int], keep: bool = False) -> int:
    """`run_fleetcheck` is the command line's entry point (passed in, so the demo does not
    import the command line that starts it). 0 when every host came out as it should.
    SIGTERM and SIGHUP stop it as Ctrl-C does: its sshd hosts and files never outlive it."""
    previous = {sig: signal.signal(sig, stop_as_ctrl_c) for sig in (signal.SIGTERM,
                                                                    signal.SIGHUP)}
    workdir = tempfile.mkdtemp(prefix="fleetcheck-demo-")
    try:
        healthy = os.path.join(workdir, "healthy-env")
        stale = os.path.join(workdir, "stale-env")
        write_install(healthy, "0.33.0", FIXED, commit="g4ba787ec9")
        write_install(stale, "0.20.1", UNFIXED, commit="g132765e35")
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
            fleet.start()
            dead_address = fleet.next_address()
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
    os.makedirs(REPORT_DIR, exist_ok=True)
    inventory = os.path.join(REPORT_DIR, "inventory.yaml")  # kept: the results name it
    results = os.path.join(REPORT_DIR, "results.json")
    with open(inventory, "w", encoding="utf-8") as handle:
        yaml.safe_dump({"all": {"children": {"demo": {"hosts": hosts}}}}, handle, sort_keys=False)
    code = run_fleetcheck(["run", inventory, "--known-hosts", known_hosts, "--timeout", "20",
                           "--json", results, "--html", os.path.join(REPORT_DIR, "report.html")])
    wrong = unexpected(results, hosts)
    report = os.path.abspath(os.path.join(REPORT_DIR, "report.html"))
    if wrong:
        print("demo: NOT as expected (exit code %d): %s; report: %s"
              % (code, "; ".join(wrong), report), file=sys.stderr)
    else:
        print("demo: every host came out as it should (exit code %d): %s; report: %s"
              % (code, "; ".join("%s %s (%s)" % (name, EXPECTED[name][0], EXPECTED[name][1])
                                 for name in hosts), report), file=sys.stderr)
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
    return 1 if wrong else 0


def unexpected(results: str, hosts: dict) -> list[str]:
    """Each demo host that did not come out as EXPECTED, in words."""
    try:
        with open(results, encoding="utf-8") as handle:
            found = {h["name"]: h["status"] for h in json.load(handle)["hosts"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return ["no results to compare (%s)" % exc]
    return ["%s is %s, expected %s (%s)" % (name, found.get(name, "missing"), EXPECTED[name][0],
                                           EXPECTED[name][1])
            for name in hosts if found.get(name) != EXPECTED[name][0]]
