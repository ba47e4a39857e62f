"""A check judged on several aspects (each drafter, each server, each key): the worst
status wins, and the message says why in the words of the aspects at that status. The
served checks, per host and across the group, are built this one way."""

from __future__ import annotations

from typing import Any

from fleetcheck.checks.verdict import check_result, skipped
from fleetcheck.results import CheckResult, Evidence
from fleetcheck.status import Status, worst

MAX_SHOWN = 6


class Verdict:
    """The judged aspects of one check, with the evidence each rests on."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.evidence: list[Evidence] = []

    def add(self, status: str, text: str, *evidence: Evidence | None) -> None:
        self.items.append((status, text))
        self.evidence.extend(e for e in evidence if e is not None)

    def result(self, check_id: str, title: str, passed: str,
               recorded: dict[str, Any] | None = None) -> CheckResult:
        """The check; `passed`: its message when no aspect was judged (a skip);
        `recorded`: more details beside its aspects."""
        if not self.items:
            return skipped(check_id, title, passed, **(recorded or {}))
        statuses = [s for s, _ in self.items]
        status = Status.SKIP if set(statuses) == {Status.SKIP} else worst(statuses)
        shown = [t for s, t in self.items if s == status] if status != Status.PASS else \
            [t for _, t in self.items]
        if len(shown) > MAX_SHOWN:
            shown = shown[:MAX_SHOWN - 1] + [shown[MAX_SHOWN - 1] + " (and %d more)"
                                             % (len(shown) - MAX_SHOWN)]
        return check_result(check_id, title, status, *shown, evidence=self.evidence,
                            details={"aspects": [{"status": s, "text": t}
                                                 for s, t in self.items], **(recorded or {})})
