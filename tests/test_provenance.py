"""Where each value came from, as an INI inventory with group_vars and host_vars sets it:
an expectation names the vars file and the group it was set on (not the inventory beside
it), and every mistake of every vars file comes out in one run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleet_helpers import ROOT
from fleetcheck.connectors import declarations
from fleetcheck.drafter_expectations import resolve_drafters
from fleetcheck.expectations import CommandLine, resolve
from fleetcheck.expectations import BuildExpectation
from fleetcheck.inventory import read_inventory

pytestmark = pytest.mark.unit


def ini_inventory(tmp_path, prod: str, every: str = "", host: str = "") -> str:
    (tmp_path / "hosts.ini").write_text("[prod]\ngpu1 ansible_host=127.0.0.1\ngpu2\n\n"
                                        "[canary]\ngpu3\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "prod.yml").write_text(prod)
    if every:
        (tmp_path / "group_vars" / "all.yml").write_text(every)
    if host:
        (tmp_path / "host_vars").mkdir()
        (tmp_path / "host_vars" / "gpu1.yml").write_text(host)
    return str(tmp_path / "hosts.ini")


def test_an_expectation_names_the_vars_file_and_group_it_came_from(tmp_path):
    path = ini_inventory(tmp_path, 'fleetcheck_expect_version: "==0.33.0"\n'
                         'expect_commit: "4ba787ec9"\n'
                         'fleetcheck_expect_drafter: z-lab/Qwen3.6-27B-DFlash\n')
    hosts = read_inventory([path], declarations=declarations()).hosts
    expected = resolve(hosts, BuildExpectation(None, None, None), CommandLine(), path)
    prod_file = str(tmp_path / "group_vars" / "prod.yml")
    assert set(expected) == {"gpu1", "gpu2"}
    assert expected["gpu1"].version.source == (
        "inventory %s, group 'prod': fleetcheck_expect_version" % prod_file)
    assert expected["gpu2"].commit.source == "inventory %s, group 'prod': expect_commit" \
        % prod_file
    drafters = resolve_drafters(hosts, None, None, path)
    assert drafters["gpu1"].source == (
        "inventory %s, group 'prod': fleetcheck_expect_drafter" % prod_file)


def test_every_mistake_of_every_vars_file_comes_out_in_one_run(tmp_path):
    path = ini_inventory(tmp_path, 'fleetcheck_expect_version: "=0.33.0"\nbecome: maybe\n',
                         every="venvv: /opt/ml-env\ntimeout: -5\n",
                         host="ansible_port: notaport\n")
    run = subprocess.run([sys.executable, "-m", "fleetcheck", "run", path, "--json",
                          str(tmp_path / "r.json")], capture_output=True, text=True,
                         cwd=str(tmp_path), timeout=60, env={"PYTHONPATH": ROOT,
                                                             "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2, run.stderr
    every = tmp_path / "group_vars" / "all.yml"
    prod = tmp_path / "group_vars" / "prod.yml"
    gpu1 = tmp_path / "host_vars" / "gpu1.yml"
    said = run.stderr.splitlines()
    assert said == [
        "fleetcheck: error: %s: group 'all': field 'venvv': unknown variable: did you mean "
        "venv?" % every,
        "fleetcheck: error: %s: group 'all': field 'timeout': must be a positive number of "
        "seconds" % every,
        "fleetcheck: error: %s: group 'prod': field 'fleetcheck_expect_version': not a PEP "
        "440 version specifier: '=0.33.0' (write e.g. '==0.33.0' or '>=0.33,<0.34')" % prod,
        "fleetcheck: error: %s: group 'prod': field 'become': must be a boolean (true/false, "
        "yes/no), got 'maybe'" % prod,
        "fleetcheck: error: %s: host 'gpu1': field 'ansible_port': must be a port number "
        "1-65535, got 'notaport'" % gpu1], run.stderr
    assert not (tmp_path / "r.json").exists()
