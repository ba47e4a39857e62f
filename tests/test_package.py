"""fleetcheck as a user installs it: a wheel built from this tree, installed (not editable)
with its dependencies from PyPI into a fresh venv, run from a directory outside the repo so
the checkout cannot be imported. Editable installs hide missing package data."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile

import pytest
import yaml

from fleet_helpers import ROOT, clean_env, installed_fleetcheck as fleetcheck, ssh_hosts
from probe_helpers import ENV, wait_listening
from fleetcheck.lab.synthetic import FIXED, write_install

pytestmark = pytest.mark.unit

PACKAGE = os.path.join(ROOT, "fleetcheck")
STANDIN = os.path.join(ROOT, "tests", "standin_vllm.py")


def test_every_data_file_is_in_the_wheel(wheel):
    on_disk = set()
    for directory, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith(".pyc"):
                on_disk.add(os.path.relpath(os.path.join(directory, name), ROOT))
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {n for n in archive.namelist() if n.startswith("fleetcheck/")}
        metadata = archive.read(next(n for n in archive.namelist()
                                     if n.endswith(".dist-info/METADATA"))).decode()
    assert "fleetcheck/prompts/smoke-v1.json" in on_disk
    assert on_disk - in_wheel == set()
    requires = re.findall(r"^Requires-Dist: (.*)$", metadata, re.M)
    fabric = [r for r in requires if r.startswith("fabric")]
    assert fabric and all('extra == "bench"' in r for r in fabric), requires


def test_no_runtime_module_imports_fabric():
    """fabric is the benchmark's baseline (the `bench` extra), not a runtime dependency."""
    importers = []
    for directory, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as handle:
                    if re.search(r"^\s*(import|from) fabric\b", handle.read(), re.M):
                        importers.append(os.path.relpath(path, ROOT))
    assert importers == []


def test_installed_without_fabric_and_import_writes_nothing_to_home(installed, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    python = os.path.join(installed, "python")
    no_fabric = subprocess.run([python, "-c", "import fabric"], env=clean_env(),
                               cwd=str(tmp_path), capture_output=True)
    assert no_fabric.returncode != 0
    version = fleetcheck(installed, tmp_path, "--version", HOME=str(home))
    assert version.returncode == 0 and "0.1.0" in version.stdout + version.stderr
    imported = subprocess.run([python, "-c", "import fleetcheck, fleetcheck.cli, "
                               "fleetcheck.report.html, fleetcheck.demo; "
                               "print(fleetcheck.__file__)"], env=clean_env(HOME=str(home)),
                              cwd=str(tmp_path), capture_output=True, text=True, check=True)
    assert imported.stdout.startswith(os.path.dirname(installed))  # the venv, not the checkout
    assert os.listdir(home) == []


def test_demo_smoke_run_and_report_from_the_installed_package(installed, tmp_path, fleet):
    demo = fleetcheck(installed, tmp_path, "demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    demo_results = json.loads((tmp_path / "reports" / "demo" / "results.json").read_text())
    assert {h["name"]: h["status"] for h in demo_results["hosts"]} == {
        "gpu-healthy": "pass", "gpu-stale": "fail", "gpu-down": "unreachable"}

    install = str(tmp_path / "env")
    write_install(install, "0.33.0", FIXED)
    host = fleet.add("gpu-smoke", mounts={ENV: install})
    fleet.start()
    state = str(tmp_path / "standin.state.json")
    server = fleet.spawn_on(host, "exec %s %s --bind %s --port 8000 --scenario healthy "
                            "--state %s" % (sys.executable, STANDIN, host.address, state))
    try:
        hosts = ssh_hosts(fleet, [host], venv=ENV, vllm_url="http://%s:8000" % host.address,
                          smoke={"requests": 4, "max_tokens": 32, "time_budget_s": 30})
        inventory = tmp_path / "inventory.yaml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
        wait_listening(host.address, 8000)
        run = fleetcheck(installed, tmp_path, "run", str(inventory), "--smoke",
                         "--known-hosts", fleet.known_hosts, "--no-import-check",
                         "--json", "out/results.json", "--html", "out/report.html")
    finally:
        server.kill()
        server.wait()
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    (checked,) = results["hosts"]
    smoke = {c["id"]: c for c in checked["checks"]}["smoke-acceptance"]
    assert smoke["status"] == "pass", smoke
    assert checked["smoke"]["accepted_tokens"] == json.load(open(state))["accepted_tokens"] > 0

    report = fleetcheck(installed, tmp_path, "report", "out/results.json",
                        "--html", "again.html", "--junit", "junit.xml")
    assert report.returncode == 0, report.stdout + report.stderr
    assert "smoke-acceptance" in (tmp_path / "junit.xml").read_text()
    assert "gpu-smoke" in (tmp_path / "again.html").read_text()
