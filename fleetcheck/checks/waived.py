"""Waivers applied to a run's verdicts, once every check is in (the fleet checks too): a
fail a waiver names becomes `waived` with its reason until the waiver's date, and fails
again after it, saying the waiver expired. An error, a warning or a pass is never
touched: a waiver accepts a known gap, it never hides that a check could not run."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Sequence

from fleetcheck.results import CheckResult, HostResult, RunResult, status_with
from fleetcheck.status import Status
from fleetcheck.waivers import Waiver


def apply_waivers(run: RunResult, by_host: dict[str, tuple[Waiver, ...]],
                  by_build: Sequence[tuple[str, Waiver]],
                  today: datetime.date) -> RunResult:
    if not by_host and not by_build:
        return run
    return replace(run, hosts=[waive_host(host, by_host.get(host.name, ()), by_build, today)
                               for host in run.hosts])


def builds_match(build: str, host: HostResult) -> bool:
    """A playbook waiver's build is the host's version as installed, or a commit prefix."""
    info = host.vllm
    if info is None:
        return False
    if build == info.version:
        return True
    commit = (info.commit or "").lower()
    return len(build) >= 7 and commit.startswith(build.lower().lstrip("g"))


def waive_host(host: HostResult, own: tuple[Waiver, ...], by_build: Sequence[tuple[str, Waiver]],
               today: datetime.date) -> HostResult:
    waivers = {w.check: w for build, w in by_build if builds_match(build, host)}
    waivers.update({w.check: w for w in own})  # the inventory's, for this host, win
    if not waivers or not host.checks:
        return host
    checks = tuple(waive(check, waivers.get(check.id), today) for check in host.checks)
    if all(new is old for new, old in zip(checks, host.checks)):
        return host
    return replace(host, checks=checks, status=status_with(host, checks))


def waive(check: CheckResult, waiver: Waiver | None, today: datetime.date) -> CheckResult:
    if waiver is None or check.status != Status.FAIL:
        return check
    record = {"reason": waiver.reason, "until": waiver.until.isoformat(),
              "source": waiver.source, "expired": waiver.until < today}
    details = dict(check.details, waiver=record) if isinstance(check.details, dict) \
        else check.details
    if waiver.until < today:
        return replace(check, message="waiver expired on %s (%s): %s" % (
            waiver.until.isoformat(), waiver.words(), check.message), details=details)
    return replace(check, status=Status.WAIVED, details=details, message="waived until %s: "
                   "%s; the failure: %s" % (waiver.until.isoformat(), waiver.words(),
                                            check.message))
