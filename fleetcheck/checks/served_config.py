"""`served-config`, once every host is in: the same target, drafter revision, method and
num_speculative_tokens across each group, and the expected drafter, enforced on every
host where a vLLM server runs. It also pads the per-host drafter checks with skips on the
hosts that have none, so the matrix and JUnit stay rectangular.

It reads each host's served list through `HostServed` (typed once); a host's key is a
set of `ServedKey`s."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from fleetcheck.checks.aspects import Verdict
from fleetcheck.checks.served_entries import (DRAFTER_ID, IDS, LOADED_ID, SERVED_ID,
                                              SERVED_TITLE, TITLES, HostServed, ServedKey,
                                              ServerEntry, describe, differences)
from fleetcheck.drafter_expectations import DrafterExpectation
from fleetcheck.checks.verdict import skipped
from fleetcheck.results import NOT_RUN, CheckResult, Evidence, HostResult, status_with
from fleetcheck.status import Status


def apply_served(hosts: list[HostResult],
                 expected: dict[str, DrafterExpectation] | None = None) -> list[HostResult]:
    """served-config once every host is in, and the drafter checks padded with skips on
    hosts that have none (new results: the results writer's cache)."""
    expected = expected or {}
    served = {h.name: HostServed.of(h.served) for h in hosts}
    keys = {h.name: served[h.name].key() for h in hosts}
    wanted = bool(expected) or any(c.id in IDS for h in hosts for c in h.checks) or \
        any(keys[h.name] is not None and any(s.drafter for s in served[h.name].judged())
            for h in hosts)
    if not wanted:
        return hosts
    groups: dict[str, list[HostResult]] = {}
    for host in hosts:
        if host.error is None and keys[host.name] is not None:
            mine = expected.get(host.name)
            groups.setdefault(mine.label() if mine else "", []).append(host)
    verdicts: dict[str, CheckResult] = {}
    for label, members in groups.items():
        ranked = Counter(keys[h.name] for h in members).most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        majority = None if tie else ranked[0][0]
        group = "the hosts expected to serve %s" % label if label else "the fleet"
        differing = [h.name for h in members if keys[h.name] != majority]
        for host in members:
            verdict = Verdict()
            details = compare(verdict, keys[host.name], majority, ranked, group, differing,
                              len(members))
            verdicts[host.name] = finish(verdict, served[host.name], details,
                                         expected.get(host.name))
    for host in hosts:  # only other installs' servers: the expectation still binds them
        mine = expected.get(host.name)
        if host.error is None and host.name not in verdicts and mine is not None and \
                served[host.name].servers:
            verdicts[host.name] = finish(Verdict(), served[host.name], {}, mine)
    out = []
    for host in hosts:
        checks = list(host.checks)
        have = {c.id for c in checks}
        never_ran = {NOT_RUN: True} if host.error is not None else {}
        reason = host_skip_reason(host, served[host.name], expected.get(host.name))
        for check_id in (DRAFTER_ID, LOADED_ID):
            if check_id not in have:
                checks.append(skipped(check_id, TITLES[check_id], reason, **never_ran))
        if host.error is None and host.name in verdicts:
            checks.append(verdicts[host.name])
        else:
            checks.append(skipped(SERVED_ID, SERVED_TITLE, reason, **never_ran))
        out.append(replace(host, checks=checks, status=status_with(host, checks)))
    return out


def host_skip_reason(host: HostResult, served: HostServed,
                     expectation: DrafterExpectation | None = None) -> str:
    if host.error is not None:
        return "not run: %s (%s)" % (host.error.kind, host.error.message)
    if not served.servers:
        return "no vLLM server runs on this host"
    if not served.judged():
        return "only servers of other installs, on other ports than vllm_url's (not judged)"
    if expectation is not None:
        return "no DFlash drafter served on this host (expected: %s)" % expectation.label()
    return "no DFlash drafter served or expected on this host"


def compare(verdict: Verdict, mine: frozenset[ServedKey] | None,
            majority: frozenset[ServedKey] | None,
            ranked: list[tuple[frozenset[ServedKey], int]], group: str,
            differing: list[str], size: int) -> dict[str, Any]:
    """The host's served config against its group's majority; the details recorded."""
    if majority is None:
        verdict.add(Status.FAIL, "%d different served configs among %s, none the majority" % (
            len(ranked), group), Evidence(file=None, line=None, text="; ".join(
                "%d x %s" % (n, describe(k)) for k, n in ranked)))
    elif mine == majority:
        verdict.add(Status.PASS, "serves the same as the majority of %s (%s)%s" % (
            group, describe(mine), "; differing: %s" % ", ".join(differing) if differing
            else ""))
    elif mine is not None:
        verdict.add(Status.FAIL, "serves another config than the majority of %s (differs in %s): "
                    "%s; the majority serves %s; hosts off it: %s" % (
                        group, ", ".join(differences(mine, majority)), describe(mine),
                        describe(majority), ", ".join(differing)))
    return {"group": group, "hosts": size, "differing": differing,
            "majority": describe(majority) if majority else None}


def finish(verdict: Verdict, served: HostServed, details: dict[str, Any],
           expectation: DrafterExpectation | None) -> CheckResult:
    """The expected drafter and the servers' own notes added to the comparison."""
    judged = served.judged()
    if expectation is not None:
        # the server on vllm_url is the gate's; where none is, every judged server must
        # serve the expected drafter (none may slip through the majority comparison); a
        # box whose servers are all another install's is held to it too: the question is
        # what the box serves
        gated = [s for s in judged if s.serving] or judged or list(served.servers)
        seen = Evidence(file=None, line=None, text="servers on this host: %s" % "; ".join(
            s.words() for s in served.servers))
        failed = False
        for server in gated:
            failed = not judge_expected(verdict, server, expectation) or failed
        if failed:
            verdict.evidence.append(seen)
        details = {**details, "expected": expectation.as_dict()}
    for server in judged:
        for note in server.notes:
            verdict.add(Status.WARN, "pid %s: %s" % (server.pid, note))
    return verdict.result(SERVED_ID, SERVED_TITLE, "", details)


def judge_expected(verdict: Verdict, server: ServerEntry,
                   expectation: DrafterExpectation) -> bool:
    """One server against the expected drafter; whether it serves it."""
    drafter = server.drafter
    spec = drafter.spec if drafter else None
    revision = (drafter.revision if drafter else None) or ""
    other = "" if server.judged else " (another install's server)"
    source = Evidence(file=None, line=None, text="expected drafter %s (from %s); served: %s%s"
                      % (expectation.label(), expectation.source, spec or "none",
                         "@" + revision if revision else ""))
    if spec != expectation.repo:
        verdict.add(Status.FAIL, "pid %s%s serves drafter %s, expected %s" % (
            server.pid, other, spec or "none", expectation.repo), source)
        return False
    if expectation.revision and not revision.startswith(expectation.revision):
        verdict.add(Status.FAIL, "pid %s%s serves drafter %s at revision %s, expected %s" % (
            server.pid, other, spec, revision[:12] or "unknown", expectation.revision), source)
        return False
    verdict.add(Status.PASS, "the expected drafter %s" % expectation.label(), source)
    return True
