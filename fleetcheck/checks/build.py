"""build-expected: is this host on the build the gate expects? The version against a PEP 440
specifier, the commit against a prefix, and, once every host is in, whether the group
expected on one build holds one build: the same (version, commit, RECORD sha256).

Each verdict shows the expected value and the found one side by side, each with where it
came from, so a person can re-check both by hand.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.version import commit_of, misfit_text, primary_dist_info
from fleetcheck.expectations import (CHECK_ID, TITLE, BuildExpectation, commit_matches,
                                     found_version, names, version_matches)
from fleetcheck.results import CheckResult, Evidence, HostResult, status_with

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Facts, VersionFile

NO_COMMIT = "this build records no commit"


def commit_evidence_file(source: str | None, facts: Facts) -> str | None:
    dist = primary_dist_info(facts)
    if source == "direct_url.json" and dist:
        return os.path.basename(dist.path) + "/direct_url.json"
    if source == "_version.py":
        return "vllm/_version.py"
    return None


def judge_build(expectation: BuildExpectation, facts: Facts) -> CheckResult:
    """Version and commit now; same_build is added by `apply_same_build` after all hosts."""
    dist = primary_dist_info(facts)
    version_file = facts.version_file
    metadata_file = os.path.basename(dist.path) + "/METADATA" if dist else "METADATA"
    candidates = [(dist.version if dist else None, metadata_file),
                  (version_file.version, "vllm/_version.py")]
    version, version_text, version_source = found_version(candidates)
    commit, commit_source = commit_of(facts)
    commit_file = commit_evidence_file(commit_source, facts)
    details: dict[str, Any] = {
        "expected": expectation.as_dict(),
        "found": {"version": version_text or None, "version_source": version_source or None,
                  "commit": commit, "commit_source": commit_file or commit_source},
        "problems": [], "matched": []}
    evidence: list[Evidence] = []
    installed = bool(dist) or bool(version_file.exists)
    if expectation.version is not None:
        spec = expectation.version
        if not installed:
            ok, why = False, "no vllm install found"
        elif version is None:
            ok, why = False, ("%r is not a PEP 440 version" % version_text if version_text
                              else "this build records no version" +
                              misfit_note(version_file, "version"))
        else:
            ok, why = version_matches(spec.value, version)
        details["version_ok"] = ok
        short = "version %s %s %s%s" % (version_text or "none", "matches" if ok else "is not",
                                        spec.value, " (%s)" % why if why else "")
        record(details, evidence, ok, short, "version: expected %s (from %s), found %s%s" % (
            spec.value, spec.source, version_text or "none",
            " (from %s)" % version_source if version_source else ""))
    if expectation.commit is not None:
        prefix = expectation.commit
        if not installed:
            ok, why = False, "no vllm install found"
        elif commit is None:
            ok, why = False, (NO_COMMIT + " (no vcs_info in direct_url.json, no "
                              "__commit_id__ in vllm/_version.py, no +g<sha> in the version)"
                              + misfit_note(version_file, "commit_id"))
        else:
            ok, why = commit_matches(prefix.value, commit)
        details["commit_ok"] = ok
        where = commit_file or ("the version's +g<sha>" if commit_source == "version"
                                else commit_source)
        if commit is None:
            short = "%s (expected %s)" % (NO_COMMIT, prefix.value)
        else:
            short = "commit %s %s %s%s" % (commit, "matches" if ok else "is not", prefix.value,
                                           " (%s)" % why if why else "")
        record(details, evidence, ok, short, "commit: expected %s (from %s), found %s%s" % (
            prefix.value, prefix.source, commit or "none",
            " (from %s)" % where if where else ": " + (why or "")))
    check = CheckResult(id=CHECK_ID, title=TITLE, status="pass", message="",
                        evidence=evidence, details=details)
    settle(check)
    return check


def misfit_note(version_file: VersionFile, field: str) -> str:
    """Why _version.py gave no value: what it assigns instead, if it assigns anything."""
    for misfit in version_file.misfits:
        if misfit.field == field:
            return " (vllm/_version.py line %d: %s)" % (misfit.line, misfit_text(misfit))
    return ""


def record(details: dict[str, Any], evidence: list[Evidence], ok: bool | None, short: str,
           side_by_side: str) -> None:
    """One judged aspect: a short phrase for the message, and the expected and found values
    with their sources as evidence. `ok` None: the aspect could not be decided."""
    key = "matched" if ok else "problems" if ok is False else "undecided"
    details.setdefault(key, []).append(short)
    evidence.append(Evidence(file=None, line=None, text=side_by_side))


def skipped(reason: str) -> CheckResult:
    return CheckResult(id=CHECK_ID, title=TITLE, status="skip", message=reason)


def settle(check: CheckResult) -> None:
    """Status and message from the aspects judged so far."""
    details = check.details
    if details["problems"]:
        check.status = "fail"
        check.message = "off the expected build: " + "; ".join(details["problems"])
    elif details.get("undecided"):
        check.status = "error"
        check.message = "; ".join(details["undecided"])
    elif details["matched"]:
        check.status = "pass"
        check.message = "on the expected build: " + "; ".join(details["matched"])
    else:
        check.status = "skip"
        check.message = "only same_build is expected: compared once every host has finished"


def build_label(key: tuple[str | None, str | None, str | None]) -> str:
    version, commit, record = key
    return "%s @ %s, RECORD sha256 %s" % (version or "no version", commit or "no commit",
                                          record[:12] if record else "none")


def cohort_name(expected: dict[str, Any]) -> str:
    parts = ["%s %s" % (name, expected[name]["value"]) for name in ("version", "commit")
             if name in expected]
    return "the hosts expected on %s" % " and ".join(parts) if parts else "the fleet"


def off_expected(check: CheckResult) -> str | None:
    """Why a host is already off its expected version or commit (then it fails for that,
    and comparing its build with the others would blame them for it), or None."""
    failed = [name for name in ("version", "commit") if check.details.get(name + "_ok") is False]
    return " and ".join(failed) or None


def apply_same_build(hosts: list[HostResult]) -> None:
    """same_build, per group of hosts expected on the same version and commit, among the
    hosts that are on that version and commit: the most common build passes, every host
    on another build fails, naming the majority and the hosts that differ. Without a
    majority no host can be named the odd one out: each is an `error` saying which builds
    were found and how to pin one (a host already off the expected version fails for that
    alone, and is not counted)."""
    cohorts: dict[tuple[str, str], list[tuple[HostResult, CheckResult]]] = {}
    for host in hosts:
        check = next((c for c in host.checks if c.id == CHECK_ID), None)
        if host.error is not None or check is None or "expected" not in check.details:
            continue
        expected = check.details["expected"]
        if not (expected.get("same_build") or {}).get("value"):
            continue
        off = off_expected(check)
        if off is not None:
            check.details["same_build"] = {"compared": False, "reason": "off the expected " + off}
            check.evidence.append(Evidence(None, None, "same_build: not compared with the other "
                                           "hosts (this host is off the expected %s)" % off))
            continue
        key = (str((expected.get("version") or {}).get("value", "")),
               str((expected.get("commit") or {}).get("value", "")))
        cohorts.setdefault(key, []).append((host, check))
    for members in cohorts.values():
        counts = Counter(host.build_key() for host, _ in members)
        ranked = counts.most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        majority = None if tie else ranked[0][0]
        group = cohort_name(members[0][1].details["expected"])
        source = members[0][1].details["expected"]["same_build"]["source"]
        differing = [host.name for host, _ in members if host.build_key() != majority]
        by_build = "; ".join("%s: %s" % (build_label(k), names(
            [h.name for h, _ in members if h.build_key() == k])) for k, _ in ranked)
        for host, check in members:
            mine = host.build_key()
            summary = {"group": group, "hosts": len(members), "differing": differing,
                       "majority": build_label(majority) if majority else None,
                       "compared": True}
            if majority is None:
                ok = None
                short = ("same_build: %d builds among %s, none the majority, so no host can "
                         "be named the odd one out (%s); pin the build with --expect-commit "
                         "or --expect-version" % (len(ranked), group, by_build))
                line = "%d different builds, no majority: %s; this host: %s" % (
                    len(ranked), ", ".join("%d x %s" % (n, build_label(k)) for k, n in ranked),
                    build_label(mine))
            elif mine == majority:
                ok = True
                short = "same build as the majority of %s%s" % (
                    group, " (differing: %s)" % names(differing) if differing else "")
                line = "the majority build of %s (%d of %d hosts): %s%s" % (
                    group, counts[majority], len(members), build_label(majority),
                    "; differing: %s" % names(differing) if differing else "")
            else:
                ok = False
                diff = [name for name, a, b in zip(("version", "commit", "RECORD sha256"),
                                                   mine, majority) if a != b]
                short = "same_build: not the majority build of %s (differs in %s)" % (
                    group, ", ".join(diff))
                line = ("holds %s; the majority build of %s (%d of %d hosts) is %s; differs "
                        "in %s; hosts off it: %s" % (
                            build_label(mine), group, counts[majority], len(members),
                            build_label(majority), ", ".join(diff), names(differing)))
            summary["ok"] = ok
            check.details["same_build"] = summary
            record(check.details, check.evidence, ok, short,
                   "same_build (from %s): %s" % (source, line))
            settle(check)
            host.status = status_with(host, host.checks)
