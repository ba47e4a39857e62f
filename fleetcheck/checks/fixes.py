"""Fix verdicts: the playbook's outcomes applied to the findings the probe brought back.

The code on disk decides; the version is compared afterwards and a disagreement is said
out loud, because a version number is exactly what misled people in the incident.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.version import no_install_reason, version_suggests
from fleetcheck.playbook import FixCheck, Outcome
from fleetcheck.checks.verdict import check_result
from fleetcheck.results import CheckResult, Evidence
from fleetcheck.status import Status

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Facts, Finding, Signature

MAX_EVIDENCE = 14


def choose_outcome(check: FixCheck, present: set[str]) -> Outcome:
    for outcome in check.outcomes:
        if all(name in present for name in outcome.when) and \
                not any(name in present for name in outcome.unless):
            return outcome
    return Outcome(status=Status.FAIL, message="no outcome of the playbook matched the findings "
                   "(%s): the playbook needs an outcome for this case"
                   % (", ".join(sorted(present)) or "none"))


def evidence_for(outcome: Outcome, findings: dict[str, list[Finding]]) -> list[Evidence]:
    """The lines the outcome was decided on. A dataflow finding is a path: its deciding
    step first (the +N, the read without one, the call a window reaches, where a trail was
    lost), then the path's other steps in order."""
    names = list(outcome.evidence or outcome.when)
    out: list[Evidence] = []
    for name in names:
        for hit in findings.get(name, []):
            out.append(Evidence(file=hit.file, line=hit.line, text=hit.text or "",
                                step=hit.step))
            for step in hit.trail:
                if (step.file, step.line) != (hit.file, hit.line):
                    out.append(Evidence(file=step.file, line=step.line, text=step.text or "",
                                        step=step.step))
    return out[:MAX_EVIDENCE]


def lost_trails(outcome: Outcome, findings: dict[str, list[Finding]]) -> list[str]:
    """Why each flow the outcome rests on could not be followed, in the probe's words."""
    whys: list[str] = []
    for name in outcome.evidence or outcome.when:
        for hit in findings.get(name, []):
            why = hit.why
            if why is not None and why not in whys:
                whys.append(why)
    return whys


def no_findings_reason(facts: Facts) -> str:
    """Why a check has no findings at all. The probe reads the code wherever it found vllm's
    code (code_root); with code there and no findings, probe and playbook disagree on the
    checks, which no reinstall fixes. A dist-info without its package is half an install."""
    install = facts.install
    reasons = facts.errors + install.errors
    if install.code_root:
        return "the probe sent no findings for this check (probe and playbook out of step?)%s" % (
            ": " + "; ".join(reasons) if reasons else "")
    if install.dist_infos:
        return "no vllm code to check: %s is there but the vllm/ package directory is missing " \
            "(an interrupted install? see install-metadata)%s" % (
                os.path.basename(install.dist_infos[0].path),
                "; " + "; ".join(reasons) if reasons else "")
    return no_install_reason(facts)


def resolved(path: str, signature: Signature) -> str:
    """A playbook path with its {module} placeholders filled in as the probe filled them."""
    for name, module in signature.modules.items():
        if module.file:
            path = path.replace("{%s}" % name, module.file)
    return path


def nothing_found(check: FixCheck, signature: Signature) -> Evidence:
    """The line shown when no finding backs the outcome: which files were searched, or,
    when no file matched, the playbook's paths that matched none."""
    searched = signature.files_searched.values()
    count = max((entry.count for entry in searched), default=0)
    if count == 0:
        globs = sorted({resolved(path, signature) for finder in check.finders.values()
                        for path in finder.get("files", [])})
        return Evidence(file=None, line=None,
                        text="no file matches this check's paths: %s" % ", ".join(globs))
    names = sorted({name for entry in searched for name in entry.first})
    return Evidence(file=None, line=None,
                    text="no matching code in the files searched (%d or more): %s" % (
                        count, ", ".join(names[:6]) + (" ..." if count > len(names[:6]) else "")))


def what_fixes(check: FixCheck) -> str | None:
    """Where the fix comes from, for a failure: 'fixed in 0.22.0 (vLLM PR #40727)'."""
    if check.fixed_in:
        return "fixed in %s%s" % (check.fixed_in, " (%s)" % check.reference
                                  if check.reference else "")
    return "fix: %s" % check.reference if check.reference else None


def judge_fix(check: FixCheck, facts: Facts, version: str | None) -> CheckResult:
    """One fix check's verdict with the evidence that shows it."""
    signature = facts.signatures.get(check.id) if facts.signatures else None
    details: dict[str, Any] = {"reference": check.reference, "fixed_in": check.fixed_in}
    if signature is None:
        return check_result(check.id, check.title, Status.ERROR, no_findings_reason(facts),
                            details=details)
    findings = dict(signature.findings)
    executed = facts.executed.get(check.id) if facts.executed else None
    if executed is not None:  # what running the install's code showed, on this host
        findings.update(executed.findings)
    outcome = choose_outcome(check, set(findings))
    evidence = evidence_for(outcome, findings)
    details["findings"] = sorted(findings)
    details["modules"] = {name: {"file": m.file, "line": m.line, "registry": m.registry}
                          for name, m in signature.modules.items()}  # as the probe sent them
    status, message = outcome.status, outcome.message
    whys = lost_trails(outcome, findings)
    if whys:
        message += " " + "; ".join(whys[:3]) + "."
    if not evidence:
        evidence = [nothing_found(check, signature)]
    errors = list(signature.errors) + (list(executed.errors) if executed is not None else [])
    if executed is not None:
        details["run_as"] = executed.run_as
        details["interpreter"] = executed.interpreter
    if errors:
        status = Status.ERROR
        message = "could not read everything this check needs: %s (findings so far: %s)" % (
            "; ".join(errors[:3]), message)
    suggests = version_suggests(version, check.fixed_in)
    details["version_suggests"] = suggests
    code_says = "fixed" if status == Status.PASS else \
        ("not fixed" if status == Status.FAIL else None)
    details["version_agrees"] = None if suggests is None or code_says is None \
        else suggests == code_says
    if details["version_agrees"] is False:
        message += " NOTE: version %s suggests %s (fixed in %s); the code on disk says %s." % (
            version, suggests, check.fixed_in, code_says)
    remedy = what_fixes(check) if status == Status.FAIL else None
    if remedy:
        message = "%s %s%s." % (message.rstrip(), remedy[0].upper(), remedy[1:])
    return check_result(check.id, check.title, status, message, evidence=evidence,
                        details=details)
