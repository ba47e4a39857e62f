"""A connection added from outside fleetcheck: tests/journal_connector, one module and an
entry point in the `fleetcheck.connectors` group, built as a wheel and installed with
fleetcheck's wheel into a fresh venv, is used by `connection: journal`, and its declared
variable is checked (typos included) like fleetcheck's own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv

import pytest
import yaml

from fleet_helpers import ROOT, clean_env, installed_fleetcheck
from fleetcheck.lab.synthetic import FIXED, write_install

PLUGIN = os.path.join(ROOT, "tests", "journal_connector")


@pytest.fixture(scope="module")
def with_plugin(tmp_path_factory, wheel) -> str:
    """bin/ of a fresh venv holding fleetcheck's wheel and the plugin's, non-editable."""
    work = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(PLUGIN, work / "source")  # the build writes beside its sources
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", "-w", str(work / "dist"), str(source)],
                   check=True, capture_output=True)
    (plugin_wheel,) = (work / "dist").iterdir()
    target = work / "venv"
    venv.EnvBuilder(with_pip=True).create(str(target))
    subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", wheel, str(plugin_wheel)], check=True,
                   env=clean_env(), cwd=str(work), capture_output=True)
    return str(target / "bin")


def inventory(tmp_path, host: dict) -> str:
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"audited": host}}}))
    return str(path)


def test_an_installed_package_adds_a_connection_by_entry_point(tmp_path, with_plugin):
    listed = subprocess.run([os.path.join(with_plugin, "python"), "-c",
                             "from fleetcheck.connectors import connection_names; "
                             "print(' '.join(connection_names()))"],
                            capture_output=True, text=True, cwd=str(tmp_path), env=clean_env())
    assert listed.stdout.split() == ["journal", "journal_broken", "kubectl", "local",
                                     "ssh"], listed.stderr
    install = str(tmp_path / "env")
    write_install(install, "0.33.0", FIXED, commit="g4ba787ec9")
    journal = tmp_path / "journal.jsonl"
    run = installed_fleetcheck(with_plugin, tmp_path, "run", inventory(tmp_path, {
        "connection": "journal", "journal_file": str(journal), "venv": install}),
                               "--no-import-check", "--json", "r.json", "--no-html")
    host = json.loads((tmp_path / "r.json").read_text())["hosts"][0]
    assert host["name"] == "audited" and host["error"] is None, run.stdout + run.stderr
    assert host["vllm"]["version"] == "0.33.0"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert entries and {e["host"] for e in entries} == {"audited"}, entries
    assert entries[0]["payload_bytes"] > 1000  # the probe itself went through it


def test_a_plugins_declared_variables_are_checked_like_fleetchecks_own(tmp_path, with_plugin):
    source = inventory(tmp_path, {"connection": "journal", "journal_fiel": "/tmp/j"})
    run = installed_fleetcheck(with_plugin, tmp_path, "run", source)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "%s: host 'audited': field 'journal_fiel': unknown variable: did you mean " \
           "journal_file?" % source in run.stderr
    relative = inventory(tmp_path, {"connection": "journal", "journal_file": "j.log"})
    run = installed_fleetcheck(with_plugin, tmp_path, "run", relative)
    assert run.returncode == 2 and "field 'journal_file': must be an absolute path" in run.stderr


def test_a_packages_entry_point_that_is_no_connector_is_bad_input_naming_the_package(
        tmp_path, with_plugin):
    """Not every host's fleetcheck bug: exit 2 before any host, naming the entry point and
    the package that installed it."""
    run = installed_fleetcheck(with_plugin, tmp_path, "run", inventory(tmp_path, {
        "connection": "journal_broken"}))
    assert run.returncode == 2, run.stdout + run.stderr
    assert ("entry point fleetcheck.connectors journal_broken = "
            "fleetcheck_journal:not_a_connector (package fleetcheck-journal): cannot be used "
            "as the 'journal_broken' connection: LookupError: ") in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and "audited" not in run.stdout


def test_reading_an_inventory_imports_no_ssh_library(tmp_path):
    """Declarations are module data: collecting them imports no connector's library."""
    source = inventory(tmp_path, {"ansible_host": "10.0.0.1", "ansible_kubectl_pod": "web-0",
                                  "proxy_jump": "ops@gate", "container": "vllm"})
    script = ("import sys\nfrom fleetcheck.connectors import declarations\n"
              "from fleetcheck.inventory import load_inventory\n"
              "(host,) = load_inventory(%r, declarations=declarations())\n"
              "print(host.address, host.container, host.proxy_jump[0].host, "
              "host.settings['kubectl_pod'], 'paramiko' in sys.modules)" % source)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=60)
    assert proc.stdout.split() == ["10.0.0.1", "vllm", "gate", "web-0", "False"], proc.stderr
