"""The one way every check family builds its result: a status, a message made of named
parts (what was judged, in order, then the fix), the evidence it rests on and the details
the results record. Families never write `CheckResult(...)` themselves, so a message reads
the same way in every check (`tests/test_verdict.py` holds them to it); the JSON of a
result is `CheckResult`'s, unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from fleetcheck.results import CheckResult, Evidence
from fleetcheck.status import Status

if TYPE_CHECKING:
    from fleetcheck.build_details import BuildDetails


def message(*parts: str | None, fix: str | None = None) -> str:
    """The parts that say something, joined by "; ", then the fix after a colon:
    `pid 7 started before the install changed: restart it to serve the checked code`."""
    said = "; ".join(part for part in parts if part)
    if fix:
        return "%s: %s" % (said, fix) if said else fix
    return said


def check_result(check_id: str, title: str, status: str, *parts: str | None,
                 fix: str | None = None, evidence: Iterable[Evidence | None] = (),
                 details: dict[str, Any] | BuildDetails | None = None,
                 max_evidence: int | None = None) -> CheckResult:
    """One check's verdict. `parts`: what was judged, each a clause of the message (None
    and empty ones left out); `fix`: what to do about it, last; `evidence`: the places
    it rests on (None ones left out), at most `max_evidence` of them."""
    kept = [e for e in evidence if e is not None]
    if max_evidence is not None:
        kept = kept[:max_evidence]
    return CheckResult(id=check_id, title=title, status=Status(status),
                       message=message(*parts, fix=fix), evidence=kept,
                       details=details if details is not None else {})


def skipped(check_id: str, title: str, reason: str, **details: Any) -> CheckResult:
    """A check that judged nothing here, and why."""
    return check_result(check_id, title, Status.SKIP, reason, details=details)
