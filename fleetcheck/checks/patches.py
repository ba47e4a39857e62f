"""A pull request's verdict from the states of its hunks on the host (probe/patch_presence.py):
every shipped hunk applied passes; none, or only some, fails naming the missing hunks; a
hunk the code has since rewritten (superseded) or holds both ways (ambiguous), with none
missing, warns naming it. The version never decides: the install's commit, when known, is
said beside the code's verdict. Files the wheel does not ship are named, never counted."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.verdict import check_result
from fleetcheck.checks.version import no_install_reason
from fleetcheck.patches import PatchCheck
from fleetcheck.results import CheckResult, Evidence, VllmInfo
from fleetcheck.status import Status

if TYPE_CHECKING:
    from fleetcheck.facts import Facts, PatchHunk

APPLIED, NOT_APPLIED, AMBIGUOUS, SUPERSEDED = "applied", "not applied", "ambiguous", "superseded"
MAX_EVIDENCE = 16
MAX_NAMED = 6


def hunk_name(hunk: PatchHunk) -> str:
    return "%s#%s" % (hunk.file, hunk.hunk)


def named(hunks: list[PatchHunk]) -> str:
    names = [hunk_name(h) for h in hunks[:MAX_NAMED]]
    more = len(hunks) - len(names)
    return ", ".join(names) + (" and %d more" % more if more > 0 else "")


def hunk_dict(hunk: PatchHunk) -> dict[str, Any]:
    return {"file": hunk.file, "hunk": hunk.hunk, "header": hunk.header, "state": hunk.state,
            "how": hunk.how, "evidence": [{"file": e.file, "line": e.line, "text": e.text}
                                          for e in hunk.evidence]}


def build_words(info: VllmInfo) -> str | None:
    """The install's build, said beside the verdict (never deciding it)."""
    if not info.commit and not info.version:
        return None
    return "judged from the code; the install is %s%s" % (
        info.version or "of unknown version",
        " at commit %s" % info.commit if info.commit else " (commit not recorded)")


def judge_patch(patch: PatchCheck, facts: Facts, info: VllmInfo) -> CheckResult:
    """One pull request's verdict on one host, with per-hunk states in the details."""
    details: dict[str, Any] = {"reference": patch.reference, "diff": os.path.basename(
        patch.source), "hunks": [], "not_checkable": []}
    presence = (facts.patches or {}).get(patch.id)
    if presence is None:
        reason = no_install_reason(facts) if not facts.install.code_root else \
            "the probe sent no hunk states for this diff (probe and controller out of step?)"
        return check_result(patch.id, patch.title, Status.ERROR, reason, details=details)
    if presence.error:
        return check_result(patch.id, patch.title, Status.ERROR, "the diff could not be "
                            "checked on this host: %s" % presence.error, details=details)
    hunks = list(presence.hunks)
    details["hunks"] = [hunk_dict(h) for h in hunks]
    details["not_checkable"] = [f.path for f in presence.files if not f.shipped]
    details["blob_matches"] = {f.path: f.blob_match for f in presence.files if f.blob_match}
    details["cosmetic"] = patch.cosmetic_hunks()
    unshipped = ("not checkable from the install (not shipped by the wheel): %s"
                 % ", ".join(details["not_checkable"][:MAX_NAMED])
                 if details["not_checkable"] else None)
    build = build_words(info)
    reference = "see %s" % patch.reference if patch.reference else None
    if not hunks:
        return check_result(patch.id, patch.title, Status.SKIP, "no hunk of this diff touches "
                            "a file the install ships", unshipped, details=details)
    by_state: dict[str, list[PatchHunk]] = {}
    for hunk in hunks:
        by_state.setdefault(hunk.state, []).append(hunk)
    applied, missing = by_state.get(APPLIED, []), by_state.get(NOT_APPLIED, [])
    unsure = by_state.get(AMBIGUOUS, []) + by_state.get(SUPERSEDED, [])
    counts = "%d of %d hunks applied" % (len(applied), len(hunks))
    unsure_words = "; ".join("%s: %s" % (state, named(by_state[state]))
                             for state in (SUPERSEDED, AMBIGUOUS) if by_state.get(state))
    if missing and not applied:
        status, said = Status.FAIL, "not applied (%s; missing: %s)" % (counts, named(missing))
        shown = missing + unsure
    elif missing:
        status, said = Status.FAIL, "partly applied (%s; missing: %s)" % (counts, named(missing))
        shown = missing + unsure + applied
    elif unsure:
        status, said = Status.WARN, "%s, none missing; not decided: %s" % (counts, unsure_words)
        shown = unsure + applied
    else:
        status, said = Status.PASS, "applied (%s)" % counts
        shown = applied
    if status == Status.FAIL and unsure_words:
        said += "; not decided: " + unsure_words
    evidence = [Evidence(file=e.file, line=e.line, text=e.text or "",
                         step="#%s %s" % (h.hunk, h.state))
                for h in shown for e in h.evidence[:2]]
    if not evidence:
        evidence = [Evidence(file=h.file, line=None, text="%s: %s (%s)" % (
            h.header or "hunk %s" % h.hunk, h.state, h.how or "nothing found"))
            for h in shown]
    return check_result(patch.id, patch.title, status, said, build, unshipped,
                        fix=reference if status == Status.FAIL else None,
                        evidence=evidence, details=details, max_evidence=MAX_EVIDENCE)
