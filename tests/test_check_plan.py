"""The check plan (checks/plan.py): one ordered list of checks that judged hosts, hosts
never judged and the wire decoder all take, so a partial answer cannot pass with fewer
checks, and a host looks the same in every report whether it answered or not."""

from __future__ import annotations

import copy
import json

import pytest

from fleetcheck.checks.plan import CheckPlan, MissingFacts
from fleetcheck.connectors.base import CommandResult, TransportError
from fleetcheck.expectations import BuildExpectation
from fleetcheck.inventory import Host
from fleetcheck.playbook import load_playbook
from fleetcheck.smoke_settings import SmokeSettings
from fleetcheck.wire_protocol import decode_answer
from probe_helpers import facts_of, recorded

pytestmark = pytest.mark.unit

FIXES = ["dflash-layer-offset", "dflash-swa", "dflash-cache-drop"]
INTEGRITY = ["install-record", "install-leftovers", "install-metadata", "install-import",
             "install-in-progress", "install-running"]
PLAYBOOK = load_playbook()


def without_integrity():
    """The recorded real facts were gathered without the integrity family."""
    playbook = copy.deepcopy(PLAYBOOK)
    playbook.integrity.enabled = False
    return playbook


@pytest.mark.parametrize("smoke, build, extra", [
    (False, False, []),
    (True, False, ["smoke-acceptance", "smoke-fleet"]),
    (False, True, ["build-expected"]),
    (True, True, ["build-expected", "smoke-acceptance", "smoke-fleet"]),
])
def test_a_host_not_judged_lists_every_planned_check(smoke, build, extra):
    plan = CheckPlan(PLAYBOOK, smoke=smoke, build=build)
    checks = plan.not_run("unreachable (refused)")
    assert [c.id for c in checks] == FIXES + INTEGRITY + extra
    assert {(c.status, c.message) for c in checks} == {("skip", "not run: unreachable (refused)")}
    assert [(c.id, c.title) for c in checks] == plan.titles()


@pytest.mark.parametrize("version, status", [("0.20.1", "fail"), ("0.33.0", "pass")])
def test_recorded_real_facts_are_judged_by_the_playbook(version, status):
    info, checks, numbers = CheckPlan(without_integrity()).judge(facts_of(recorded(version)))
    assert info.version == version and numbers is None
    assert [(c.id, c.status) for c in checks] == [(cid, status) for cid in FIXES]


@pytest.mark.parametrize("build", [False, True])
def test_a_judged_host_and_a_host_not_judged_list_the_same_checks_in_order(build):
    plan = CheckPlan(without_integrity(), build=build)
    _, checks, _ = plan.judge(facts_of(recorded("0.33.0")),
                              BuildExpectation() if build else None)
    assert [(c.id, c.title) for c in checks] == plan.titles()


def test_facts_without_a_family_the_plan_needs_never_pass_with_fewer_checks():
    """The recorded answers hold no integrity facts: judged by the default plan (which has
    the install-* checks) they are refused, naming the family, never a 3-check pass."""
    with pytest.raises(MissingFacts) as refused:
        CheckPlan(PLAYBOOK).judge(facts_of(recorded("0.33.0")))
    assert refused.value.family == "integrity"
    assert "`integrity`" in str(refused.value) and refused.value.check_id == "install-record"
    with pytest.raises(MissingFacts, match="`smoke`"):
        CheckPlan(without_integrity(), smoke=True).judge(facts_of(recorded("0.33.0")),
                                                         smoke=SmokeSettings(enabled=True))


def test_the_wire_decoder_requires_what_the_plan_needs():
    plan = CheckPlan(PLAYBOOK, smoke=True)
    assert set(plan.required_facts()) == {"install", "version_file", "signatures",
                                          "integrity", "servers", "smoke"}
    # a follower of a shared build sends no analysis: the controller fills it in
    assert "signatures" not in plan.required_facts(shared_analysis=True)
    assert set(CheckPlan(without_integrity()).required_facts()) == {"install", "version_file",
                                                                    "signatures"}
    answer = CommandResult(json.dumps(recorded("0.33.0")).encode(), b"", 0)
    host = Host(name="h", address="h")
    with pytest.raises(TransportError) as refused:
        decode_answer(answer, host, plan.required_facts())
    assert refused.value.kind == "protocol"
    assert "no `integrity` facts, which this host's plan asked for" in refused.value.message
    assert "--no-integrity" in refused.value.message  # how a bundle's facts get there
    decode_answer(answer, host, CheckPlan(without_integrity()).required_facts())


def test_a_host_with_no_expectation_of_its_own_gets_build_expected_as_a_skip():
    plan = CheckPlan(without_integrity(), build=True)
    _, checks, _ = plan.judge(facts_of(recorded("0.33.0")), None)
    assert checks[-1].id == "build-expected" and checks[-1].status == "skip"
    assert "no expected build set" in checks[-1].message
    _, checks, _ = CheckPlan(without_integrity()).judge(facts_of(recorded("0.33.0")))
    assert "build-expected" not in {c.id for c in checks}  # nothing expected: no check


def test_a_recorded_fleetcheck_bug_keeps_the_host_in_error_through_the_fleet_checks():
    """A host judged with an internal error beside its verdicts (the shared analysis
    failing on the controller) must not turn back into a pass when same_build, the served
    config or the smoke comparison settle the fleet's verdicts."""
    from fleetcheck.checks.plan import add_fleet_checks
    from fleetcheck.drafter_expectations import DrafterExpectation
    from fleetcheck.expectations import Expected
    from fleetcheck.results import HostError, HostResult, RunResult, host_status
    plan = CheckPlan(without_integrity(), build=True)
    same = BuildExpectation(same_build=Expected(True, "--expect-same-build"))
    hosts = []
    for name, bugs in (("clean", []), ("bugged", [HostError("internal", "a bug")])):
        info, checks, _ = plan.judge(facts_of(recorded("0.33.0")), same)
        hosts.append(HostResult(name=name, address=name, groups=[], vllm=info, checks=checks,
                                status=host_status(checks, None, bugs), internal_errors=bugs))
    assert [h.status for h in hosts] == ["pass", "error"]
    run = RunResult(started_at="t", inventory="i", playbook="p", hosts=hosts, complete=True)
    judged = add_fleet_checks(run, without_integrity(),
                              {h.name: DrafterExpectation("z-lab/expected", None,
                                                          "--expect-drafter") for h in hosts})
    assert [h.status for h in judged.hosts] == ["pass", "error"]
    assert {c.id for c in judged.hosts[1].checks} >= {"served-config", "build-expected"}
    run = add_fleet_checks(run, without_integrity())
    assert [h.status for h in run.hosts] == ["pass", "error"]
    assert run.exit_code() == 3
