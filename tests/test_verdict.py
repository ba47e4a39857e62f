"""checks/verdict.py: the one builder of check results, and every family using it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fleetcheck.checks.verdict import check_result, message, skipped
from fleetcheck.results import Evidence
from fleetcheck.status import Status

pytestmark = pytest.mark.unit

CHECKS = Path(__file__).resolve().parent.parent / "fleetcheck" / "checks"


def test_the_message_is_its_parts_then_the_fix():
    assert message("pid 7 started before the install changed", None, "",
                   "pid 9 too", fix="restart them") == \
        "pid 7 started before the install changed; pid 9 too: restart them"
    assert message(fix="reinstall vllm") == "reinstall vllm"
    assert message("every file matches RECORD") == "every file matches RECORD"


def test_a_result_keeps_its_structured_parts():
    where = Evidence(file="vllm/a.py", line=3, text="x = 1")
    made = check_result("install-record", "RECORD", Status.FAIL, "1 file differs",
                        fix="reinstall vllm", evidence=[where, None, where],
                        details={"mismatched": 1}, max_evidence=2)
    assert (made.id, made.title, made.status) == ("install-record", "RECORD", Status.FAIL)
    assert made.evidence == (where, where)
    assert made.details == {"mismatched": 1}
    assert made.message == "1 file differs: reinstall vllm"


def test_a_skip_carries_its_reason_and_details():
    made = skipped("served-log", "log", "no server runs here", not_run=True)
    assert (made.status, made.message, made.details) == (Status.SKIP, "no server runs here",
                                                         {"not_run": True})


def test_no_check_family_builds_a_result_by_hand():
    """`CheckResult(...)` is called in verdict.py only: every family's messages, evidence
    and details go through the one builder."""
    by_hand = []
    for path in sorted(CHECKS.glob("*.py")):
        if path.name == "verdict.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "CheckResult":
                by_hand.append("%s:%d" % (path.name, node.lineno))
    assert by_hand == []
