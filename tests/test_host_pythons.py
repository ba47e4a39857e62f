"""Which Python the probe runs under on a host, as Ansible's inventories say it: the
discovery words (`auto`, `auto_silent`, `auto_legacy`, `auto_legacy_silent`) leave it to
fleetcheck's discovery, and a Python older than the probe's floor (3.8) is an `error` of
kind `probe` naming the version, where it is and what is needed. Real interpreters (pyenv's
2.7, 3.6 and 3.7 builds, which the hosts see through their mount namespaces) on real sshd
hosts."""

from __future__ import annotations

import os

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.connectors import declarations
from fleetcheck.inventory import read_inventory
from probe_helpers import ENV

PYENV = os.path.expanduser("~/.pyenv/versions")
OLD = {"2.7": "2.7.18", "3.6": "3.6.15", "3.7": "3.7.16"}
DISCOVERY = ("auto", "auto_silent", "auto_legacy", "auto_legacy_silent")


def old_python(short: str) -> str:
    path = os.path.join(PYENV, OLD[short], "bin", "python" + short)
    assert os.access(path, os.X_OK), ("%s is missing: the old-Python tests need pyenv's %s "
                                      "build (`pyenv install %s`)" % (path, OLD[short],
                                                                      OLD[short]))
    return path


@pytest.mark.unit
@pytest.mark.parametrize("word", DISCOVERY)
def test_ansibles_discovery_words_name_no_interpreter(tmp_path, word):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpus]\ngpu1 ansible_python_interpreter=/usr/bin/python3.11\n"
                         "gpu2 ansible_python_interpreter=%s\n\n[gpus:vars]\nvenv=/opt/ml\n"
                         "ansible_python_interpreter=%s\n" % (word, word))
    hosts = {h.name: h for h in read_inventory([str(inventory)],
                                               declarations=declarations()).hosts}
    assert hosts["gpu1"].interpreter == "/usr/bin/python3.11"  # the host's own wins
    assert hosts["gpu2"].python is None and hosts["gpu2"].interpreter == "/opt/ml/bin/python"


def test_auto_silent_runs_the_probe_under_the_venvs_python(tmp_path, fleet, real_venvs):
    host = fleet.add("gpu-auto", mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=ENV, ansible_python_interpreter="auto_silent")}},
        "--known-hosts", fleet.known_hosts)
    assert run.results is not None, run.stderr
    result = run.host("gpu-auto")
    assert result["error"] is None, result["error"]
    checks = {c["id"]: c for c in result["checks"]}
    assert checks["install-import"]["status"] in ("pass", "skip"), checks["install-import"]
    assert checks["dflash-layer-offset"]["status"] == "pass"


@pytest.mark.parametrize("short", sorted(OLD))
def test_a_python_below_the_floor_is_a_probe_error_naming_it(tmp_path, fleet, short):
    python = old_python(short)
    host = fleet.add("gpu-py%s" % short.replace(".", ""))
    fleet.start()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], ansible_python_interpreter=python)}}, "--known-hosts", fleet.known_hosts)
    assert run.code == 3, (run.code, run.stderr)
    error = run.host(host.name)["error"]
    assert error["kind"] == "probe", error
    assert ("Python %s at %s is older than the probe needs (Python 3.8 or newer)"
            % (OLD[short], python)) in error["message"], error["message"]
    assert "ansible_python_interpreter" in error["message"]
    assert run.host(host.name)["status"] == "error"
