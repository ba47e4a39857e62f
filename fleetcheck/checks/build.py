"""build-expected: is this host on the build the gate expects? The version against a PEP 440
specifier, the commit against a prefix, and, once every host is in, whether the group
expected on one build holds one build: the same (version, commit, RECORD sha256).

Each verdict shows the expected value and the found one side by side, each with where it
came from, so a person can re-check both by hand.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from fleetcheck.build_details import (CHECK_ID, TITLE, BuildDetails, ExpectedValue, FoundBuild,
                                      SameBuild, build_details)
from fleetcheck.checks.version import commit_of, misfit_text, primary_dist_info
from fleetcheck.expectations import (BuildExpectation, commit_matches, found_version, names,
                                     version_matches)
from fleetcheck.checks.verdict import check_result, skipped as check_skipped
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
    details = BuildDetails(
        found=FoundBuild(version=version_text or None, version_source=version_source or None,
                         commit=commit, commit_source=commit_file or commit_source),
        version=ExpectedValue(str(expectation.version.value), expectation.version.source)
        if expectation.version else None,
        commit=ExpectedValue(str(expectation.commit.value), expectation.commit.source)
        if expectation.commit else None,
        same_build_expected=ExpectedValue(expectation.same_build.value,
                                          expectation.same_build.source)
        if expectation.same_build else None)
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
        short = "version %s %s %s%s" % (version_text or "none", "matches" if ok else "is not",
                                        spec.value, " (%s)" % why if why else "")
        details = replace(details, version_ok=ok).with_aspect(ok, short)
        evidence.append(Evidence(None, None, "version: expected %s (from %s), found %s%s" % (
            spec.value, spec.source, version_text or "none",
            " (from %s)" % version_source if version_source else "")))
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
        where = commit_file or ("the version's +g<sha>" if commit_source == "version"
                                else commit_source)
        if commit is None:
            short = "%s (expected %s)" % (NO_COMMIT, prefix.value)
        else:
            short = "commit %s %s %s%s" % (commit, "matches" if ok else "is not", prefix.value,
                                           " (%s)" % why if why else "")
        details = replace(details, commit_ok=ok).with_aspect(ok, short)
        evidence.append(Evidence(None, None, "commit: expected %s (from %s), found %s%s" % (
            prefix.value, prefix.source, commit or "none",
            " (from %s)" % where if where else ": " + (why or ""))))
    return verdict(details, evidence)


def misfit_note(version_file: VersionFile, field: str) -> str:
    """Why _version.py gave no value: what it assigns instead, if it assigns anything."""
    for misfit in version_file.misfits:
        if misfit.field == field:
            return " (vllm/_version.py line %d: %s)" % (misfit.line, misfit_text(misfit))
    return ""


def verdict(details: BuildDetails, evidence: list[Evidence]) -> CheckResult:
    """The check of the aspects judged so far: each gave a short phrase for the message and
    the expected and found values, with their sources, as evidence."""
    status, message = details.verdict()
    return check_result(CHECK_ID, TITLE, status, message, evidence=evidence, details=details)


def skipped(reason: str) -> CheckResult:
    return check_skipped(CHECK_ID, TITLE, reason)


def build_label(key: tuple[str | None, str | None, str | None]) -> str:
    version, commit, record = key
    return "%s @ %s, RECORD sha256 %s" % (version or "no version", commit or "no commit",
                                          record[:12] if record else "none")


def cohort_name(details: BuildDetails) -> str:
    parts = ["%s %s" % (name, item.value) for name, item in
             (("version", details.version), ("commit", details.commit)) if item is not None]
    return "the hosts expected on %s" % " and ".join(parts) if parts else "the fleet"


def off_expected(details: BuildDetails) -> str | None:
    """Why a host is already off its expected version or commit (then it fails for that,
    and comparing its build with the others would blame them for it), or None."""
    failed = [name for name, ok in (("version", details.version_ok),
                                    ("commit", details.commit_ok)) if ok is False]
    return " and ".join(failed) or None


def apply_same_build(hosts: list[HostResult]) -> list[HostResult]:
    """same_build, per group of hosts expected on the same version and commit, among the
    hosts that are on that version and commit: the most common build passes, every host
    on another build fails, naming the majority and the hosts that differ. Without a
    majority no host can be named the odd one out: each is an `error` saying which builds
    were found and how to pin one (a host already off the expected version fails for that
    alone, and is not counted). The hosts come back in order, those judged as new results."""
    judged: dict[int, CheckResult] = {}
    cohorts: dict[tuple[str, str], list[tuple[int, HostResult, CheckResult, BuildDetails]]] = {}
    for index, host in enumerate(hosts):
        check = next((c for c in host.checks if c.id == CHECK_ID), None)
        details = build_details(check)
        if host.error is not None or check is None or details is None \
                or not details.expects_same_build():
            continue
        off = off_expected(details)
        if off is not None:
            judged[index] = replace(
                check, details=replace(details, same_build=SameBuild(
                    compared=False, reason="off the expected " + off)),
                evidence=(*check.evidence, Evidence(
                    None, None, "same_build: not compared with the other hosts (this host "
                    "is off the expected %s)" % off)))
            continue
        key = (str(details.version.value if details.version else ""),
               str(details.commit.value if details.commit else ""))
        cohorts.setdefault(key, []).append((index, host, check, details))
    for members in cohorts.values():
        counts = Counter(host.build_key() for _, host, _, _ in members)
        ranked = counts.most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        majority = None if tie else ranked[0][0]
        group = cohort_name(members[0][3])
        source = members[0][3].same_build_expected.source
        differing = tuple(host.name for _, host, _, _ in members
                          if host.build_key() != majority)
        by_build = "; ".join("%s: %s" % (build_label(k), names(
            [h.name for _, h, _, _ in members if h.build_key() == k])) for k, _ in ranked)
        for index, host, check, details in members:
            mine = host.build_key()
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
                    group, " (differing: %s)" % names(list(differing)) if differing else "")
                line = "the majority build of %s (%d of %d hosts): %s%s" % (
                    group, counts[majority], len(members), build_label(majority),
                    "; differing: %s" % names(list(differing)) if differing else "")
            else:
                ok = False
                diff = [name for name, a, b in zip(("version", "commit", "RECORD sha256"),
                                                   mine, majority) if a != b]
                short = "same_build: not the majority build of %s (differs in %s)" % (
                    group, ", ".join(diff))
                line = ("holds %s; the majority build of %s (%d of %d hosts) is %s; differs "
                        "in %s; hosts off it: %s" % (
                            build_label(mine), group, counts[majority], len(members),
                            build_label(majority), ", ".join(diff), names(list(differing))))
            same = SameBuild(compared=True, group=group, hosts=len(members),
                             differing=differing,
                             majority=build_label(majority) if majority else None, ok=ok)
            judged[index] = verdict(
                replace(details, same_build=same).with_aspect(ok, short),
                [*check.evidence, Evidence(None, None, "same_build (from %s): %s" % (
                    source, line))])
    out = []
    for index, host in enumerate(hosts):
        new = judged.get(index)
        if new is not None:
            checks = [new if c.id == CHECK_ID else c for c in host.checks]
            host = replace(host, checks=checks, status=status_with(host, checks))
        out.append(host)
    return out


def expectation_warnings(hosts: list[HostResult]) -> list[str]:
    """An expected version or commit that no host it applies to holds: most often a typo
    or a build not rolled out yet. Only hosts that were checked count."""
    applies: dict[tuple[str, str, str], list[str]] = {}
    matched: set[tuple[str, str, str]] = set()
    for host in hosts:
        if host.error is not None:
            continue
        for check in host.checks:
            details = build_details(check)
            if details is None:
                continue
            for name, item, ok in (("version", details.version, details.version_ok),
                                   ("commit", details.commit, details.commit_ok)):
                if item is None or ok is None:
                    continue
                key = (name, item.value, item.source)
                applies.setdefault(key, []).append(host.name)
                if ok:
                    matched.add(key)
    out = []
    for key, names_of in applies.items():
        if key not in matched:
            name, value, source = key
            out.append("expected %s %s (from %s) matches none of the %d host(s) it applies "
                       "to: %s" % (name, value, source, len(names_of), names(names_of, 5)))
    return out
