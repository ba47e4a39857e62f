"""The build gate's pure logic: parsing expectations (and refusing bad ones), PEP 440 and
commit-prefix matching, resolution order, and the verdicts on the probe's recorded facts
for the real 0.20.1 and 0.33.0 wheels (plus edits of them for dev and commit-less builds)."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from fleetcheck.checks.build import NO_COMMIT, apply_same_build, expectation_warnings, judge_build
from fleetcheck.checks.version import vllm_info
from fleetcheck.input_error import InputError
from fleetcheck.expectations import (BuildExpectation, CommandLine, Expected, commit_matches,
                                     parse_commit, parse_specifier, playbook_expectation,
                                     resolve, version_matches)
from fleetcheck.connectors import declarations
from fleetcheck.inventory import load_inventory
from fleetcheck.report.diff import diff_runs, diff_text
from fleetcheck.report.html import drift_groups
from fleetcheck.results import HostResult, RunResult, host_status
from probe_helpers import facts_of, recorded

pytestmark = pytest.mark.unit

DEV = "0.1.dev16016+g3cfc8f8b7"
DEV_SHA = "3cfc8f8b7e2d4c6a8b0f1e3d5c7a9b2d4f6e8a0c"


def parse_inventory(data: dict, name: str) -> list:
    """Hosts of an inventory given as data, read from a file of that name."""
    import tempfile
    directory = tempfile.mkdtemp(prefix="fleetcheck-expect-")
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle)
    return load_inventory(path, declarations=declarations())


def dev_facts() -> dict:
    """0.33.0's facts as a dev build from git would report them (PEP 610 vcs_info)."""
    facts = copy.deepcopy(recorded("0.33.0"))
    facts["version_file"].update(version=DEV, commit_id="g3cfc8f8b7")
    dist = facts["install"]["dist_infos"][0]
    dist["version"] = DEV
    dist["direct_url"] = {"url": "https://github.com/vllm-project/vllm.git",
                          "vcs_info": {"vcs": "git", "commit_id": DEV_SHA}}
    return facts


def evidence(check) -> str:
    return "\n".join(e.text for e in check.evidence)


def expect(version: str | None = None, commit: str | None = None,
           same: bool = False) -> BuildExpectation:
    return BuildExpectation(
        Expected(parse_specifier(version, "t", None, "v"), "--expect-version") if version else None,
        Expected(parse_commit(commit, "t", None, "c"), "--expect-commit") if commit else None,
        Expected(True, "--expect-same-build") if same else None)


@pytest.mark.parametrize("spec, version, ok", [
    ("==0.33.0", "0.33.0", True),
    ("==0.33.0", "0.33.0+cu129", True),          # no local label in the spec: ignored
    ("==0.33.0+cu129", "0.33.0", False),         # a local label in the spec must match
    (">=0.33,<0.34", "0.33.1", True),
    (">=0.33,<0.34", "0.34.0", False),
    ("==0.1.dev16016+g3cfc8f8b7", DEV, True),
    ("==0.1.dev16016", DEV, True),
    ("==0.1.dev16016+gdeadbee", DEV, False),
    (">=0.33", "0.34.0rc1", False),              # an unannounced pre-release fails the gate
    (">=0.34.0rc1", "0.34.0rc1", True),          # named in the specifier: accepted
    ("==0.33.*", "0.33.2", True),
])
def test_version_matching_follows_pep_440(spec, version, ok):
    from packaging.version import Version
    matched, why = version_matches(parse_specifier(spec, "t", None, "v"), Version(version))
    assert matched is ok
    if version == "0.34.0rc1" and not ok:
        assert "pre-release" in why


@pytest.mark.parametrize("prefix, found, ok", [
    ("4ba787e", "4ba787ec9", True),
    ("4BA787EC9", "4ba787ec9", True),
    ("4ba787ec9", "g4ba787ec9", True),
    (DEV_SHA, "3cfc8f8b7", True),                # the build records fewer digits: they agree
    ("3cfc8f8b7e2d", DEV_SHA, True),
    ("3cfc8f8", "4ba787ec9", False),
    ("3cfc8f8b7e2e", DEV_SHA, False),
])
def test_commit_prefix_matching(prefix, found, ok):
    assert commit_matches(parse_commit(prefix, "t", None, "c"), found)[0] is ok


def test_commit_a_build_records_that_is_no_sha_fails():
    ok, why = commit_matches("4ba787e", "unknown")
    assert not ok and "not a git sha" in why


@pytest.mark.parametrize("text, needle", [
    ("=0.33", "not a PEP 440 version specifier"),
    ("0.33.0", "did you mean '==0.33.0'"),
    ("", "must be a PEP 440 version specifier"),
    (">=banana", "not a PEP 440 version specifier"),
])
def test_bad_specifiers_are_input_errors(text, needle):
    with pytest.raises(InputError) as err:
        parse_specifier(text, "inv.yaml", "host 'a'", "fleetcheck_expect_version")
    assert needle in str(err.value)
    assert "inv.yaml: host 'a': field 'fleetcheck_expect_version'" in str(err.value)


@pytest.mark.parametrize("text, needle", [
    ("4ba78", "shorter than 7"),
    ("xyz1234", "not hexadecimal"),
    ("4ba787e-", "not hexadecimal"),
    (1234567, "quoted"),
    ("a" * 41, "longer than a sha1"),
])
def test_bad_commit_prefixes_are_input_errors(text, needle):
    with pytest.raises(InputError) as err:
        parse_commit(text, "command line", None, "--expect-commit")
    assert needle in str(err.value) and "--expect-commit" in str(err.value)


def test_playbook_expect_is_validated():
    assert playbook_expectation({"version": "==0.33.0", "same_build": True}, "p.yaml").is_set()
    for raw, field in (({"version": "=1"}, "version"), ({"commit": "abc"}, "commit"),
                       ({"same_build": "yes"}, "same_build"), ({"versoin": "==1"}, "versoin")):
        with pytest.raises(InputError) as err:
            playbook_expectation(raw, "p.yaml")
        assert str(err.value).startswith("p.yaml: expect: field '%s'" % field), err.value


def test_resolution_command_line_then_inventory_then_playbook_per_field():
    hosts = parse_inventory({"all": {
        "vars": {"fleetcheck_expect_version": "==0.20.1", "fleetcheck_expect_commit": "132765e"},
        "children": {"canary": {"vars": {"fleetcheck_expect_version": "==0.33.0"},
                                "hosts": {"c1": None}},
                     "prod": {"hosts": {"p1": None}}}}}, "inv.yaml")
    playbook = playbook_expectation({"version": ">=0.1", "same_build": True}, "p.yaml")
    got = resolve(hosts, playbook, CommandLine(), "inv.yaml")
    assert str(got["c1"].version.value) == "==0.33.0"
    assert got["c1"].commit.value == "132765e"  # from all: the inventory merges per var
    # where it was set: the file, the group there, the variable as written
    assert got["p1"].version.source == "inventory %s, group 'all': fleetcheck_expect_version" \
        % hosts[0].origins["expect_version"].source
    assert got["p1"].same_build.source == "playbook p.yaml: expect.same_build"
    cli = resolve(hosts, playbook, CommandLine(version="==0.34.0"), "inv.yaml")
    assert {str(e.version.value) for e in cli.values()} == {"==0.34.0"}
    assert cli["c1"].version.source == "--expect-version"
    assert cli["c1"].commit.source.startswith("inventory")
    assert resolve(hosts[:0], BuildExpectation(), CommandLine(), "inv.yaml") == {}


def test_a_bad_inventory_value_names_the_file_and_group_that_set_it_and_its_hosts():
    hosts = parse_inventory({"all": {"children": {"canary": {
        "vars": {"fleetcheck_expect_commit": "4ba78"}, "hosts": {"c1": None, "c2": None}}}}},
        "inv.yaml")
    with pytest.raises(InputError) as err:
        resolve(hosts, BuildExpectation(), CommandLine(), "inv.yaml")
    path = hosts[0].origins["expect_commit"].source
    assert path.endswith("/inv.yaml")
    assert str(err.value) == (
        "%s: group 'canary' (for host 'c1' and 1 other host(s) with the same value): field "
        "'fleetcheck_expect_commit': commit prefix '4ba78' is shorter than 7 hex digits" % path)


def test_a_bad_value_in_a_host_vars_file_names_that_file_and_the_name_written(tmp_path):
    (tmp_path / "hosts.ini").write_text("[gpus]\ngpu1\ngpu2\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu2.yml").write_text("expect_version: '=0.33'\n")
    hosts = load_inventory(str(tmp_path / "hosts.ini"), declarations=declarations())
    with pytest.raises(InputError) as err:
        resolve(hosts, BuildExpectation(), CommandLine(), str(tmp_path / "hosts.ini"))
    assert str(err.value).startswith(
        "%s: host 'gpu2': field 'expect_version': not a PEP 440 version specifier: '=0.33'"
        % (tmp_path / "host_vars" / "gpu2.yml")), str(err.value)


def test_version_and_commit_verdicts_show_expected_and_found_with_sources():
    check = judge_build(expect("==0.33.0", "4ba787e"), facts_of(recorded("0.33.0")))
    assert check.status == "pass", check.message
    assert check.message == ("on the expected build: version 0.33.0 matches ==0.33.0; commit "
                             "4ba787ec9 matches 4ba787e")
    assert evidence(check) == (
        "version: expected ==0.33.0 (from --expect-version), found 0.33.0 (from "
        "vllm-0.33.0.dist-info/METADATA)\ncommit: expected 4ba787e (from --expect-commit), found "
        "4ba787ec9 (from vllm/_version.py)")
    old = judge_build(expect("==0.33.0", "4ba787e"), facts_of(recorded("0.20.1")))
    assert old.status == "fail"
    assert old.message == ("off the expected build: version 0.20.1 is not ==0.33.0; commit "
                           "132765e35 is not 4ba787e")
    assert ("version: expected ==0.33.0 (from --expect-version), found 0.20.1 (from "
            "vllm-0.20.1.dist-info/METADATA)") in evidence(old)
    assert "commit: expected 4ba787e (from --expect-commit), found 132765e35" in evidence(old)


def test_dev_build_commit_comes_from_vcs_info():
    check = judge_build(expect("==" + DEV, "3cfc8f8b7"), facts_of(dev_facts()))
    assert check.status == "pass", check.message
    assert "found %s (from vllm-0.33.0.dist-info/direct_url.json)" % DEV_SHA in evidence(check)


def test_a_build_without_a_commit_fails_when_one_is_expected():
    facts = copy.deepcopy(recorded("0.33.0"))
    facts["version_file"]["commit_id"] = None
    check = judge_build(expect(commit="4ba787e"), facts_of(facts))
    assert check.status == "fail" and NO_COMMIT in check.message
    assert judge_build(expect("==0.33.0"), facts_of(facts)).status == "pass"  # no commit asked: fine


def test_no_install_fails_rather_than_passes():
    facts = copy.deepcopy(recorded("0.33.0"))
    facts["install"]["dist_infos"] = []
    facts["version_file"] = {"exists": False}
    check = judge_build(expect("==0.33.0"), facts_of(facts))
    assert check.status == "fail" and "no vllm install found" in check.message


def host(name: str, facts: dict, expectation: BuildExpectation, record: str) -> HostResult:
    facts = facts_of(dict(facts, record_sha256=record))
    checks = [judge_build(expectation, facts)]
    return HostResult(name=name, address=name, groups=[], status=host_status(checks, None),
                      vllm=vllm_info(facts), checks=checks)


def test_same_build_names_the_majority_and_the_host_that_differs():
    same = expect(">=0.33", same=True)
    hosts = [host("a", recorded("0.33.0"), same, "r1"), host("b", recorded("0.33.0"), same, "r1"),
             host("c", recorded("0.33.0"), same, "r2"),
             host("other", recorded("0.20.1"), expect("==0.20.1", same=True), "r3")]
    hosts = apply_same_build(hosts)
    assert [h.status for h in hosts] == ["pass", "pass", "fail", "pass"]
    assert hosts[2].checks[0].message.endswith(
        "same_build: not the majority build of the hosts expected on version >=0.33 (differs "
        "in RECORD sha256)")
    assert ("same_build (from --expect-same-build): holds 0.33.0 @ 4ba787ec9, RECORD sha256 r2; "
            "the majority build of the hosts expected on version >=0.33 (2 of 3 hosts) is "
            "0.33.0 @ 4ba787ec9, RECORD sha256 r1; differs in RECORD sha256; hosts off it: c"
            ) in evidence(hosts[2].checks[0])
    assert "(differing: c)" in hosts[0].checks[0].message
    assert hosts[0].checks[0].details.same_build.differing == ("c",)


def test_same_build_tie_names_no_odd_one_out_and_fails_no_host():
    same = expect(same=True)
    hosts = [host("a", recorded("0.33.0"), same, "r1"), host("b", recorded("0.20.1"), same, "r2")]
    assert hosts[0].checks[0].status == "skip"  # only same_build: decided after all hosts
    hosts = apply_same_build(hosts)
    assert [h.checks[0].status for h in hosts] == ["error", "error"]
    message = hosts[0].checks[0].message
    assert "2 builds among the fleet, none the majority, so no host can be named the odd one " \
        "out" in message
    assert "0.33.0 @ 4ba787ec9, RECORD sha256 r1: a" in message and "pin the build" in message
    assert "1 x 0.33.0 @ 4ba787ec9, RECORD sha256 r1" in evidence(hosts[1].checks[0])


def test_a_host_off_the_expected_version_is_not_counted_for_same_build():
    """The canary recipe: gpu01 on the expected 0.33.0, gpu02 still on 0.20.1. Only gpu02
    fails, for its version; gpu01 is the whole comparison and passes."""
    same = expect("==0.33.0", same=True)
    hosts = [host("gpu01", recorded("0.33.0"), same, "r1"),
             host("gpu02", recorded("0.20.1"), same, "r2")]
    hosts = apply_same_build(hosts)
    assert [h.checks[0].status for h in hosts] == ["pass", "fail"]
    assert hosts[1].checks[0].message == "off the expected build: version 0.20.1 is not ==0.33.0"
    assert "not compared with the other hosts (this host is off the expected version)" in \
        evidence(hosts[1].checks[0])
    assert "same build as the majority" in hosts[0].checks[0].message
    assert hosts[0].checks[0].details.same_build.hosts == 1


def test_an_expectation_no_host_holds_is_a_warning():
    hosts = [host("a", recorded("0.33.0"), expect("==0.34.0"), "r"),
             host("b", recorded("0.20.1"), expect("==0.34.0"), "r"),
             host("c", recorded("0.33.0"), expect("==0.33.0"), "r")]
    assert expectation_warnings(hosts) == [
        "expected version ==0.34.0 (from --expect-version) matches none of the 2 host(s) it "
        "applies to: a, b"]
    assert expectation_warnings(hosts[2:]) == []


def test_builds_table_marks_expected_build_and_hosts_off_it():
    e = expect("==0.33.0")
    run = RunResult(started_at="t", inventory="i", playbook="p", complete=True, hosts=[
        host("a", recorded("0.33.0"), e, "r"), host("b", recorded("0.20.1"), e, "q")])
    rows = {g["version"]: g for g in drift_groups(run)}
    assert rows["0.33.0"]["expected"] == {"version ==0.33.0": ["a"]}
    assert rows["0.20.1"]["off"][0]["host"] == "b"


def test_diff_reports_moves_onto_and_off_the_expected_build():
    e = expect("==0.33.0")
    old = RunResult(started_at="1", inventory="i", playbook="p", complete=True, hosts=[
        host("a", recorded("0.20.1"), e, "q"), host("b", recorded("0.33.0"), e, "r")])
    new = RunResult(started_at="2", inventory="i", playbook="p", complete=True, hosts=[
        host("a", recorded("0.33.0"), e, "r"), host("b", recorded("0.20.1"), e, "q")])
    result = diff_runs(old, new)
    moves = {h["name"]: [c for c in h["changes"] if c["what"] == "expected build"][0]
             for h in result["hosts"]}
    assert moves["a"]["moved"] == "moved onto the expected build" and not moves["a"]["worse"]
    assert moves["b"]["moved"] == "moved off the expected build" and moves["b"]["worse"]
    text = "\n".join(diff_text(result))
    assert "moved off the expected build: version 0.20.1 is not ==0.33.0  (worse)" in text
    assert result["worse"]


def test_documented_canary_recipe_expects_two_builds():
    page = open(os.path.join(os.path.dirname(__file__), "..", "docs", "checks.md"),
                encoding="utf-8").read()
    block = page.split("<!-- example-file: rollout.yaml -->\n```yaml\n", 1)[1].split("```", 1)[0]
    import yaml
    hosts = parse_inventory(yaml.safe_load(block), "rollout.yaml")
    got = resolve(hosts, BuildExpectation(), CommandLine(same_build=True), "rollout.yaml")
    assert set(got) == {h.name for h in hosts} == {"gpu-healthy", "gpu-stale"}
    canary = {name for name, e in got.items() if str(e.version.value) == "==0.33.0"}
    assert canary == {"gpu-healthy"}
    assert {(str(e.version.value), e.commit.value) for e in got.values()} == {
        ("==0.33.0", "4ba787ec9"), ("==0.20.1", "132765e35")}
