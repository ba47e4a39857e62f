"""`judge -i INVENTORY`: facts an engine gathered get the inventory's groups, variables,
expectations and waivers, as `run` gives them; an inventory host with no facts is in the
results saying so. A file that is not facts (Ansible's console output) is exit 2 saying
what it looks like and how to collect facts, never a phantom host."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fleet_helpers import ROOT
from fleetcheck.lab.synthetic import FIXED, write_install

pytestmark = pytest.mark.unit

ENV = dict(os.environ, PYTHONPATH=ROOT)


def fleetcheck(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetcheck", *args], capture_output=True,
                          text=True, cwd=str(tmp_path), timeout=120, env=ENV)


def gathered(tmp_path, host: str, venv: str) -> str:
    """What an engine brings back: the bundle run on the node, its stdout saved."""
    script = fleetcheck(tmp_path, "probe-bundle", "--venv", venv, "--no-import-check")
    assert script.returncode == 0, script.stderr
    (tmp_path / "probe.py").write_text(script.stdout)
    facts = subprocess.run([sys.executable, str(tmp_path / "probe.py"), "--host", host],
                           capture_output=True, text=True, check=True, env=ENV).stdout
    (tmp_path / "facts").mkdir(exist_ok=True)
    path = tmp_path / "facts" / (host + ".json")
    path.write_text(facts)
    return str(path)


def test_judge_with_an_inventory_brings_groups_expectations_and_every_host(tmp_path):
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED, commit="g4ba787ec9")
    facts = gathered(tmp_path, "gpu1", venv)
    (tmp_path / "hosts.ini").write_text("[canary]\ngpu1\n\n[prod]\ngpu2\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "canary.yml").write_text('fleetcheck_expect_version: "==0.33.0"\n')
    run = fleetcheck(tmp_path, "judge", facts, "-i", "hosts.ini", "--no-import-check",
                     "--json", "r.json", "--no-html")
    results = json.loads((tmp_path / "r.json").read_text())
    hosts = {h["name"]: h for h in results["hosts"]}
    assert list(hosts) == ["gpu1", "gpu2"], run.stderr  # inventory order, every host
    assert hosts["gpu1"]["groups"] == ["canary"]
    build = next(c for c in hosts["gpu1"]["checks"] if c["id"] == "build-expected")
    assert build["status"] == "pass", build
    assert build["details"]["expected"]["version"]["source"] == \
        "inventory %s, group 'canary': fleetcheck_expect_version" \
        % (tmp_path / "group_vars" / "canary.yml")
    assert hosts["gpu2"]["groups"] == ["prod"]
    assert hosts["gpu2"]["error"]["kind"] == "probe"
    assert hosts["gpu2"]["error"]["message"].startswith("no facts for this host in %s" % facts)
    assert run.returncode == 3  # gpu2 was never checked
    assert results["inventory"] == "hosts.ini + facts: %s" % facts


def test_ansibles_console_output_is_refused_saying_what_it_is(tmp_path):
    console = tmp_path / "ansible-output.txt"
    console.write_text("gpu1 | CHANGED | rc=0 >>\n{\"probe_version\": 1, \"host\": \"gpu1\"}\n"
                       "gpu2 | UNREACHABLE! => {\n    \"changed\": false\n}\n")
    run = fleetcheck(tmp_path, "judge", str(console), "--json", "r.json")
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(
        "fleetcheck: error: %s: line 1: this looks like Ansible's console output (`gpu1 | "
        "CHANGED | rc=0 >>`), not the probe's facts: collect facts with `ansible all -i "
        "INVENTORY -m script -a 'probe.py --host {{ inventory_hostname }}' --tree facts/`"
        % console), run.stderr
    assert not (tmp_path / "r.json").exists()
