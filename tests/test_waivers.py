"""Waivers over real sshd hosts: a PR canary that predates one fix is accepted for a while.
`fleetcheck_waive` on a group (and a playbook's `waive:` for one build) turns that check's
fail into `waived` with its reason in the JSON, the terminal, the HTML and JUnit; after
its date the check fails again saying the waiver expired; an unreachable host stays
unreachable whatever it waives."""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET

import pytest
import yaml

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.input_error import InputError
from fleetcheck.lab.synthetic import UNFIXED, write_install
from fleetcheck.lab.testhosts import free_loopback_port
from fleetcheck.waivers import parse_waivers
from probe_helpers import ENV

FIXES = ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop")
TODAY = datetime.datetime.now(datetime.timezone.utc).date()
LATER = (TODAY + datetime.timedelta(days=30)).isoformat()
EARLIER = (TODAY - datetime.timedelta(days=1)).isoformat()
REASON = "PR canary 40898 predates this fix; rollout tracked in OPS-12"


def waive(checks, until: str) -> dict:
    return {check: {"reason": REASON, "until": until} for check in checks}


def test_a_waived_fail_is_waived_everywhere_until_its_date_then_fails_again(tmp_path, fleet):
    stale = str(tmp_path / "stale")
    write_install(stale, "0.20.1", UNFIXED, commit="g132765e35")
    canary = fleet.add("canary-1", mounts={ENV: stale})
    lapsed = fleet.add("lapsed-1", mounts={ENV: stale})
    fleet.start()
    dead = fleet.next_address()
    hosts = ssh_hosts(fleet, [canary, lapsed], venv=ENV)
    hosts["down-1"] = {"ansible_host": dead, "port": free_loopback_port(dead),
                       "key": fleet.client_key, "fleetcheck_waive": waive(FIXES, LATER)}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "canary": {"vars": {"fleetcheck_waive": waive(FIXES[:2], LATER)},
                   "hosts": {"canary-1": hosts["canary-1"], "down-1": hosts["down-1"]}},
        "lapsed": {"vars": {"fleetcheck_waive": waive(FIXES, EARLIER)},
                   "hosts": {"lapsed-1": hosts["lapsed-1"]}}}}}))
    playbook = tmp_path / "canary.yaml"  # the playbook waives the third fix for this build
    playbook.write_text(yaml.safe_dump({"extends": "dflash", "waive": {"0.20.1": {
        "dflash-cache-drop": {"reason": "superseded upstream", "until": LATER}}}}))
    run = run_fleetcheck(tmp_path, str(inventory), "--known-hosts", fleet.known_hosts,
                         "--junit", str(tmp_path / "out" / "junit.xml"), "--playbook",
                         str(playbook), "--no-import-check")
    assert run.results is not None, run.stderr
    for check_id in FIXES[:2]:
        check = run.check("canary-1", check_id)
        assert check["status"] == "waived", check
        assert check["message"].startswith(
            "waived until %s: %s (set in inventory %s, group 'canary': fleetcheck_waive); "
            "the failure: " % (LATER, REASON, inventory)), check["message"]
        assert check["details"]["waiver"] == {
            "reason": REASON, "until": LATER, "expired": False,
            "source": "inventory %s, group 'canary': fleetcheck_waive" % inventory}
    by_build = run.check("canary-1", "dflash-cache-drop")
    assert by_build["status"] == "waived" and "superseded upstream (set in playbook %s: " \
        "waive.0.20.1)" % playbook in by_build["message"], by_build
    assert run.host("canary-1")["status"] == "warn"  # ready, with something to read
    # after its date the waiver no longer holds, and the message says so
    for check_id in FIXES[:2]:
        check = run.check("lapsed-1", check_id)
        assert check["status"] == "fail"
        assert check["message"].startswith("waiver expired on %s (%s" % (EARLIER, REASON))
        assert check["details"]["waiver"]["expired"] is True
    assert run.host("lapsed-1")["status"] == "fail"
    # a waiver never hides that a host could not be checked
    assert run.host("down-1")["status"] == "unreachable"
    assert "waived" not in {c["status"] for c in run.host("down-1")["checks"]}
    assert run.code == 1  # lapsed-1 fails
    # the terminal, the HTML and JUnit say it too
    assert "waived until %s: %s" % (LATER, REASON) in " ".join(run.stdout.split())
    assert "canary-1" in run.stdout and "waived" in run.stdout
    assert 'class="s-waived"' in run.html and REASON in run.html
    suites = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    waived = [case for case in suites.iter("testcase")
              if case.get("name") == "dflash-swa" and case.get("classname", "").endswith(
                  "canary-1")]
    (case,) = waived
    (skipped,) = case.findall("skipped")
    assert skipped.get("message").startswith("waived: waived until %s" % LATER)
    assert case.find("failure") is None


def test_only_waived_failures_pass_the_gate(tmp_path, fleet):
    stale = str(tmp_path / "stale")
    write_install(stale, "0.20.1", UNFIXED, commit="g132765e35")
    host = fleet.add("canary-2", mounts={ENV: stale})
    fleet.start()
    entry = ssh_hosts(fleet, [host], venv=ENV)
    entry["canary-2"]["fleetcheck_waive"] = waive(FIXES, LATER)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": entry}}, "--known-hosts",
                         fleet.known_hosts, "--no-import-check")
    assert [run.check("canary-2", c)["status"] for c in FIXES] == ["waived"] * 3
    assert run.code == 0, run.stdout


@pytest.mark.unit
@pytest.mark.parametrize("raw, field, problem", [
    ({"dflash-swa": {"reason": "x"}}, "fleetcheck_waive.dflash-swa.until",
     "must be a date, YYYY-MM-DD (a waiver always ends), got None"),
    ({"dflash-swa": {"until": "2030-01-01"}}, "fleetcheck_waive.dflash-swa.reason",
     "say why the failure is accepted"),
    ({"dflash-swa": {"reason": "x", "until": "soon"}}, "fleetcheck_waive.dflash-swa.until",
     "got 'soon'"),
    ({"dflash-swa": {"reason": "x", "until": "2030-01-01", "who": "me"}},
     "fleetcheck_waive.dflash-swa", "(nothing else)"),
    ([], "fleetcheck_waive", "must be a mapping"),
])
def test_a_bad_waiver_names_its_file_group_and_field(raw, field, problem):
    with pytest.raises(InputError) as raised:
        parse_waivers(raw, "group_vars/canary.yml", "group 'canary'", "fleetcheck_waive", "")
    text = str(raised.value)
    assert text.startswith("group_vars/canary.yml: group 'canary': field '%s': " % field), text
    assert problem in text
