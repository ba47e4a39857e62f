"""The check plan: the ordered checks a host gets, each with its id, title, the fact
families it is judged from and its judge function, written once.

`run` and `judge` judge hosts through it, the rows of a host that was never judged are
its checks marked not run, and the families the wire decoder requires are the ones its
checks need, so none of these can disagree: an answer that lacks a family its plan asked
for is a `protocol` error naming the family, never a shorter list of checks that passes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

from fleetcheck.checks.acceptance import FLEET_TITLE
from fleetcheck.checks.acceptance import TITLE as SMOKE_TITLE
from fleetcheck.checks.acceptance import fleet_checks, judge_smoke
from fleetcheck.checks.build import apply_same_build, expectation_warnings, judge_build
from fleetcheck.checks.build import skipped as build_skipped
from fleetcheck.checks.fixes import judge_fix
from fleetcheck.checks.patches import judge_patch
from fleetcheck.checks.integrity import TITLES as INTEGRITY_TITLES
from fleetcheck.checks.integrity import judge_integrity_check
from fleetcheck.checks.drafter import drafter_checks
from fleetcheck.checks.served_entries import SERVED_ID, SERVED_TITLE
from fleetcheck.checks.served_config import apply_served
from fleetcheck.checks.served_log import LOG_ID, not_served, served_log_checks
from fleetcheck.checks.version import vllm_info
from fleetcheck.drafter_expectations import DrafterExpectation
from fleetcheck.build_details import CHECK_ID as BUILD_CHECK_ID
from fleetcheck.build_details import TITLE as BUILD_TITLE
from fleetcheck.expectations import BuildExpectation
from fleetcheck.faults import inject, internal_error
from fleetcheck.patches import PatchCheck
from fleetcheck.playbook import FixCheck, Playbook
from fleetcheck.checks.verdict import check_result, skipped
from fleetcheck.results import NOT_RUN, CheckResult, HostResult, RunResult, VllmInfo, status_with
from fleetcheck.smoke_settings import SmokeSettings
from fleetcheck.status import Status

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Facts

SMOKE_CHECK_ID = "smoke-acceptance"
FLEET_CHECK_ID = "smoke-fleet"
# The fix analysis: a host that verified its build's bytes sends none, and the shared
# analysis fills it in on the controller (shared_analysis.py), before the checks run.
SIGNATURES = "signatures"


class MissingFacts(Exception):
    """An answer without a fact family its plan asked for (the caller's `protocol` error)."""

    def __init__(self, family: str, check_id: str):
        super().__init__(family, check_id)
        self.family, self.check_id = family, check_id

    def __str__(self) -> str:
        return ("the answer holds no `%s` facts, which this host's plan asked for (check %s): "
                "a probe of another fleetcheck, or facts gathered with other switches"
                % (self.family, self.check_id))


class Judging:
    """What one host's checks are judged from."""

    def __init__(self, facts: Facts, expectation: BuildExpectation | None,
                 smoke: SmokeSettings | None):
        self.facts, self.expectation, self.smoke = facts, expectation, smoke
        self.info = vllm_info(facts)

    @cached_property
    def smoke_outcome(self) -> tuple[CheckResult, dict[str, Any] | None]:
        """smoke-acceptance and the numbers the fleet comparison takes (parsed once)."""
        return judge_smoke(self.facts.smoke, self.smoke, self.facts.served)


@dataclass(frozen=True)
class PlannedCheck:
    id: str
    title: str
    needs: tuple[str, ...]  # top-level fact families (facts.py) the verdict is judged from
    # the host's verdict; None: judged once every host is in (the fleet checks)
    judge: Callable[[Judging], CheckResult] | None


def fix_check(check: FixCheck) -> PlannedCheck:
    return PlannedCheck(check.id, check.title, ("install", "version_file", SIGNATURES),
                        lambda j: judge_fix(check, j.facts, j.info.version))


def patch_check(patch: PatchCheck) -> PlannedCheck:
    return PlannedCheck(patch.id, patch.title, ("install", "version_file", "patches"),
                        lambda j: judge_patch(patch, j.facts, j.info))


def integrity_check(check_id: str, import_enabled: bool) -> PlannedCheck:
    return PlannedCheck(check_id, INTEGRITY_TITLES[check_id],
                        ("install", "version_file", "integrity", "servers"),
                        lambda j: judge_integrity_check(check_id, j.facts, import_enabled))


def judge_build_check(judging: Judging) -> CheckResult:
    if judging.expectation is None:
        return build_skipped("no expected build set for this host")
    return judge_build(judging.expectation, judging.facts)


class CheckPlan:
    """The checks of one run, in the order every report lists them: fixes, pull-request
    diffs, install integrity, the expected build, the smoke load and its fleet comparison."""

    def __init__(self, playbook: Playbook, smoke: bool = False, build: bool = False):
        checks = [fix_check(check) for check in playbook.checks]
        checks += [patch_check(patch) for patch in playbook.patches]
        if playbook.integrity.enabled:
            checks += [integrity_check(cid, playbook.integrity.import_check)
                       for cid in INTEGRITY_TITLES]
        if build:
            checks.append(PlannedCheck(BUILD_CHECK_ID, BUILD_TITLE, ("install", "version_file"),
                                       judge_build_check))
        if smoke:
            checks.append(PlannedCheck(SMOKE_CHECK_ID, SMOKE_TITLE, ("smoke",),
                                       lambda j: j.smoke_outcome[0]))
            checks.append(PlannedCheck(FLEET_CHECK_ID, FLEET_TITLE, (), None))
        self.checks: tuple[PlannedCheck, ...] = tuple(checks)

    def titles(self) -> list[tuple[str, str]]:
        return [(check.id, check.title) for check in self.checks]

    def required_facts(self, shared_analysis: bool = False) -> tuple[str, ...]:
        """The families the wire decoder must find in this plan's answers. With shared
        analysis the fix analysis may come from the controller instead (checked when the
        host is judged)."""
        families: dict[str, None] = {}
        for check in self.checks:
            for family in check.needs:
                if not (shared_analysis and family == SIGNATURES):
                    families[family] = None
        return tuple(families)

    def judge(self, facts: Facts, expectation: BuildExpectation | None = None,
              smoke: SmokeSettings | None = None) -> tuple[VllmInfo, list[CheckResult],
                                                            dict[str, Any] | None]:
        """The host's verdicts (its fleet checks come with the rest of the fleet, see
        add_fleet_checks) and the smoke numbers for that comparison."""
        for check in self.checks:
            for family in check.needs:
                if getattr(facts, family) is None:
                    raise MissingFacts(family, check.id)
        judging = Judging(facts, expectation, smoke)
        verdicts = [check.judge(judging) for check in self.checks
                    if check.judge is not None and check.id != SMOKE_CHECK_ID]
        # what the servers serve: checks the fleet decides it has (apply_served pads the
        # hosts that lack them once every host is in), before the smoke load's
        verdicts += drafter_checks(facts)
        verdicts += served_log_checks(facts)
        verdicts += [check.judge(judging) for check in self.checks if check.id == SMOKE_CHECK_ID]
        numbers = judging.smoke_outcome[1] if smoke is not None else None
        return judging.info, verdicts, numbers

    def not_run(self, reason: str) -> list[CheckResult]:
        """Every planned check marked as not run, so no host is missing from a matrix or a
        JUnit file."""
        return [skipped(cid, title, "not run: " + reason, **{NOT_RUN: True})
                for cid, title in self.titles()]


def finish_run(run: RunResult, playbook: Playbook,
               drafters: dict[str, DrafterExpectation] | None = None) -> RunResult:
    """A run's end: the checks that need every host (only when every host is in), then
    the run's warnings, computed once from its final results and stored with them."""
    if run.complete:
        run = add_fleet_checks(run, playbook, drafters)
    try:
        warnings = tuple(expectation_warnings(run.hosts))
    except Exception as exc:  # a bug here costs the warnings, never the run's results
        warnings = (internal_error(exc, "computing the run's warnings").message,)
    return replace(run, warnings=warnings)


def add_fleet_checks(run: RunResult, playbook: Playbook,
                     drafters: dict[str, DrafterExpectation] | None = None) -> RunResult:
    """Checks that need every host: same_build within each expected group, the served
    config across each group (with the expected drafter), acceptance against the fleet
    median. A bug in one comparison costs only its verdicts, as an `error` check on the
    hosts it concerns. The hosts they judge become new results, in a new run."""
    hosts = list(run.hosts)
    try:
        hosts = apply_same_build(hosts)
    except Exception as exc:  # a bug in same_build costs only the build-expected verdicts
        problem = internal_error(exc, "comparing the fleet's builds").message
        hosts = [with_build_error(host, problem) for host in hosts]
    hosts = pad_served_log(hosts)
    try:  # served-config across each group; a bug here costs only these verdicts
        hosts = apply_served(hosts, drafters)
    except Exception as exc:
        problem = internal_error(exc, "comparing what the fleet serves").message
        failed = check_result(SERVED_ID, SERVED_TITLE, Status.ERROR, problem)
        hosts = [replace(h, checks=(*h.checks, failed),
                         status=status_with(h, (*h.checks, failed))) for h in hosts]
    measured = [index for index, host in enumerate(hosts)
                if host.error is None and any(c.id == SMOKE_CHECK_ID for c in host.checks)]
    if not measured:
        return replace(run, hosts=hosts)
    numbers = {h.name: h.smoke for h in hosts if h.smoke}
    broken = None  # why the fleet comparison failed for every host, if it did
    try:
        verdicts = fleet_checks(hosts, numbers, playbook.smoke)
    except Exception as exc:
        verdicts, broken = {}, internal_error(exc, "comparing the fleet's acceptance").message
    for index in measured:
        host = hosts[index]
        problem = broken
        if problem is None:
            try:
                inject("smoke-fleet", host.name)
                verdict = verdicts[host.name]
            except Exception as exc:
                problem = internal_error(exc, "comparing the fleet's acceptance").message
        if problem is not None:
            verdict = check_result(FLEET_CHECK_ID, FLEET_TITLE, Status.ERROR, problem)
        checks = (*host.checks, verdict)
        hosts[index] = replace(host, checks=checks, status=status_with(host, checks))
    return replace(run, hosts=hosts)


def pad_served_log(hosts: list[HostResult]) -> list[HostResult]:
    """When some host has a served-log verdict, every judged host has one: the others
    a skip saying no judged server runs there, so the row is in every report."""
    if not any(c.id == LOG_ID for h in hosts for c in h.checks):
        return hosts
    padded = []
    for host in hosts:
        if host.error is None and host.checks and not any(c.id == LOG_ID for c in host.checks):
            checks = (*host.checks, not_served("no vLLM server of this install runs here"))
            host = replace(host, checks=checks, status=status_with(host, checks))
        padded.append(host)
    return padded


def with_build_error(host: HostResult, problem: str) -> HostResult:
    """The host with its build-expected verdict an `error` for `problem` (a fleetcheck bug)."""
    if host.error is not None or not any(c.id == BUILD_CHECK_ID for c in host.checks):
        return host
    checks = [replace(c, status=Status.ERROR, message=problem) if c.id == BUILD_CHECK_ID else c
              for c in host.checks]
    return replace(host, checks=checks, status=status_with(host, checks))
