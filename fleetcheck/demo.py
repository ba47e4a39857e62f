"""`fleetcheck demo`: the whole flow with no fleet.

Starts real sshd hosts on loopback (one healthy install, one missing the fixes, one
unreachable) serving synthetic install trees, runs the check, writes
reports/demo/report.html and cleans up. Without root or sshd it says what to install and
runs the same trees with `connection: local`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Callable

import yaml

from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from fleetcheck.lab.testhosts import LoopbackFleet, free_loopback_port, missing_requirements

DEMO_VENV = "/opt/fleetcheck-demo-env"
REPORT_DIR = os.path.join("reports", "demo")


def run_demo(run_fleetcheck: Callable[[list[str]], int]) -> int:
    """`run_fleetcheck` is the command line's entry point (passed in, so the demo does not
    import the command line that starts it)."""
    workdir = tempfile.mkdtemp(prefix="fleetcheck-demo-")
    try:
        healthy = os.path.join(workdir, "healthy-env")
        stale = os.path.join(workdir, "stale-env")
        write_install(healthy, "0.33.0", FIXED, commit="g4ba787ec9")
        write_install(stale, "0.20.1", UNFIXED, commit="g132765e35")
        inventory = os.path.join(workdir, "demo-inventory.yaml")
        missing = missing_requirements()
        if missing:
            print("fleetcheck demo: real sshd hosts need: %s" % "; ".join(missing))
            print("falling back to connection: local (same checks, no SSH)")
            hosts = {"gpu-healthy": {"connection": "local", "venv": healthy},
                     "gpu-stale": {"connection": "local", "venv": stale}}
            known_hosts = os.path.join(workdir, "known_hosts")
            return _run(run_fleetcheck, inventory, hosts, known_hosts)
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
            return _run(run_fleetcheck, inventory, hosts, fleet.known_hosts)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(run_fleetcheck: Callable[[list[str]], int], inventory: str, hosts: dict,
         known_hosts: str) -> int:
    with open(inventory, "w", encoding="utf-8") as handle:
        yaml.safe_dump({"all": {"children": {"demo": {"hosts": hosts}}}}, handle, sort_keys=False)
    code = run_fleetcheck(["run", inventory, "--known-hosts", known_hosts, "--timeout", "20",
                     "--json", os.path.join(REPORT_DIR, "results.json"),
                     "--html", os.path.join(REPORT_DIR, "report.html")])
    print("demo report: %s (exit code %d: the stale host fails, as it should)"
          % (os.path.abspath(os.path.join(REPORT_DIR, "report.html")), code), file=sys.stderr)
    return 0 if code in (1, 3) else 1
