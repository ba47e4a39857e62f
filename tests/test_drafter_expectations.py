"""The expected drafter: REPO[@REV] parsed and refused with the place it was given,
resolved command line > inventory > playbook; a bad value on the command line is exit 2
before any host is contacted."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest
import yaml

from fleetcheck.drafter_expectations import parse_drafter, resolve_drafters
from fleetcheck.input_error import InputError
from fleetcheck.connectors import declarations
from fleetcheck.inventory import load_inventory
from fleetcheck.playbook import load_playbook

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hosts_of(data: dict) -> list:
    directory = tempfile.mkdtemp(prefix="fleetcheck-drafter-")
    path = os.path.join(directory, "inv.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle)
    return load_inventory(path, declarations=declarations())


def test_repo_and_revision_are_parsed():
    got = parse_drafter("z-lab/Qwen3.6-27B-DFlash@4BA787EC9", "s", None, "f", "label")
    assert (got.repo, got.revision, got.label()) == (
        "z-lab/Qwen3.6-27B-DFlash", "4ba787ec9", "z-lab/Qwen3.6-27B-DFlash@4ba787ec9")
    assert parse_drafter("/models/drafter", "s", None, "f", "l").revision is None


@pytest.mark.parametrize("text, words", [
    ("z-lab/a b", "neither a hub id"), ("a/b/c", "neither a hub id"), ("../x", "neither"),
    ("z-lab/x@main", "not a commit sha prefix"), ("z-lab/x@4ba78", "not a commit sha"),
    ("", "must be a drafter"), (3, "must be a drafter")])
def test_bad_drafters_are_input_errors_naming_the_field(text, words):
    with pytest.raises(InputError) as err:
        parse_drafter(text, "p.yaml", "expect", "drafter", "playbook")
    assert str(err.value).startswith("p.yaml: expect: field 'drafter'") and words in str(err.value)


def test_command_line_then_inventory_then_playbook(tmp_path):
    hosts = hosts_of({"all": {"children": {
        "canary": {"vars": {"fleetcheck_expect_drafter": "z-lab/new@aaaaaaa"},
                   "hosts": {"c1": None}},
        "prod": {"hosts": {"p1": None}}}}})
    playbook_file = tmp_path / "p.yaml"
    packaged = yaml.safe_load(open(load_playbook().source))
    packaged["expect"] = {"drafter": "z-lab/old"}
    playbook_file.write_text(yaml.safe_dump(packaged))
    playbook = load_playbook(str(playbook_file))
    got = resolve_drafters(hosts, playbook.expect_drafter, None, "inv.yaml")
    assert got["c1"].label() == "z-lab/new@aaaaaaa"
    assert got["c1"].source == "inventory %s, group 'canary': fleetcheck_expect_drafter" \
        % hosts[0].origins["expect_drafter"].source
    assert got["p1"].label() == "z-lab/old"
    assert got["p1"].source == "playbook %s: expect.drafter" % playbook_file
    cli = resolve_drafters(hosts, playbook.expect_drafter, "z-lab/cli", "inv.yaml")
    assert {e.source for e in cli.values()} == {"--expect-drafter"}


def test_a_bad_inventory_drafter_names_the_file_and_group_that_set_it():
    hosts = hosts_of({"all": {"children": {"canary": {
        "vars": {"fleetcheck_expect_drafter": "not a repo"}, "hosts": {"c1": None}}}}})
    with pytest.raises(InputError) as err:
        resolve_drafters(hosts, None, None, "inv.yaml")
    assert str(err.value).startswith("%s: group 'canary': field 'fleetcheck_expect_drafter'"
                                     % hosts[0].origins["expect_drafter"].source), err.value


def test_a_bad_expect_drafter_is_exit_2_before_any_host(tmp_path):
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"h1": {"ansible_host": "127.0.0.9"}}}}))
    proc = subprocess.run([sys.executable, "-m", "fleetcheck", "run", str(inventory),
                           "--expect-drafter", "z-lab/x@zzz", "--json", str(tmp_path / "o.json")],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=60,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 2, proc.stderr
    assert "command line: field '--expect-drafter'" in proc.stderr
    assert not (tmp_path / "o.json").exists()


def test_a_probe_bundle_resolves_the_playbooks_drafter_where_no_server_runs(tmp_path):
    """probe-bundle carries the playbook's expect.drafter in its plan, so `judge` can
    say on a node without a server that the drafter is not there."""
    packaged = yaml.safe_load(open(load_playbook().source))
    packaged["expect"] = {"drafter": "z-lab/not-on-this-node"}
    playbook = tmp_path / "p.yaml"
    playbook.write_text(yaml.safe_dump(packaged))
    env = dict(os.environ, PYTHONPATH=ROOT, HF_HUB_CACHE=str(tmp_path / "empty-hub"))
    script = subprocess.run([sys.executable, "-m", "fleetcheck", "probe-bundle", "--playbook",
                             str(playbook)], capture_output=True, text=True, check=True,
                            env=env).stdout
    (tmp_path / "probe.py").write_text(script)
    facts = subprocess.run([sys.executable, str(tmp_path / "probe.py"), "--host", "node1"],
                           capture_output=True, text=True, check=True, env=env).stdout
    (tmp_path / "node1.json").write_text(facts)
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-m", "fleetcheck", "judge", str(tmp_path / "node1.json"),
                    "--playbook", str(playbook), "--json", str(out), "--html",
                    str(tmp_path / "out.html")], capture_output=True, text=True, env=env,
                   cwd=str(tmp_path))
    import json
    host = json.loads(out.read_text())["hosts"][0]
    check = next(c for c in host["checks"] if c["id"] == "drafter-config")
    assert check["status"] == "fail", check
    assert "z-lab/not-on-this-node is not in the hub cache %s" % (tmp_path / "empty-hub") \
        in check["message"]


def test_judge_refuses_an_expected_drafter_its_facts_were_not_gathered_for(tmp_path):
    """`judge --expect-drafter` on facts of a bundle written without it is exit 2 saying
    how to write the bundle; a bundle written with `probe-bundle --expect-drafter` is
    judged on it (the drafter is not on the node: drafter-config fails, as in `run`)."""
    import json

    env = dict(os.environ, PYTHONPATH=ROOT, HF_HUB_CACHE=str(tmp_path / "empty-hub"))
    wanted = "z-lab/wanted-DFlash"

    def facts_of(*bundle_args: str) -> str:
        script = subprocess.run([sys.executable, "-m", "fleetcheck", "probe-bundle",
                                 *bundle_args], capture_output=True, text=True, check=True,
                                env=env).stdout
        (tmp_path / "probe.py").write_text(script)
        out = tmp_path / ("node1-%d.json" % len(bundle_args))
        out.write_text(subprocess.run([sys.executable, str(tmp_path / "probe.py"), "--host",
                                       "node1"], capture_output=True, text=True, check=True,
                                      env=env).stdout)
        return str(out)

    def judge(facts: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fleetcheck", "judge", facts,
                               "--expect-drafter", wanted, "--json", str(tmp_path / "o.json"),
                               "--html", str(tmp_path / "o.html")], capture_output=True,
                              text=True, env=env, cwd=str(tmp_path), timeout=120)

    refused = judge(facts_of())
    assert refused.returncode == 2, refused.stderr
    assert "host 'node1': field '--expect-drafter'" in refused.stderr
    assert "not gathered for the expected drafter %s" % wanted in refused.stderr
    assert "fleetcheck probe-bundle --expect-drafter %s" % wanted in refused.stderr
    assert not (tmp_path / "o.json").exists()
    judged = judge(facts_of("--expect-drafter", wanted))
    assert judged.returncode == 1, judged.stderr
    host = json.loads((tmp_path / "o.json").read_text())["hosts"][0]
    check = next(c for c in host["checks"] if c["id"] == "drafter-config")
    assert check["status"] == "fail", check
    assert "%s is not in the hub cache %s" % (wanted, tmp_path / "empty-hub") in check["message"]
    bad = subprocess.run([sys.executable, "-m", "fleetcheck", "probe-bundle",
                          "--expect-drafter", "z-lab/x@zzz"], capture_output=True, text=True,
                         env=env)
    assert bad.returncode == 2 and "command line: field '--expect-drafter'" in bad.stderr
