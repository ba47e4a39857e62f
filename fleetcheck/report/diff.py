"""`fleetcheck diff old.json new.json`: what changed per host between two runs, and
whether anything got worse (exit 1: a rollout gate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetcheck.build_details import CHECK_ID as BUILD_CHECK_ID, build_details, expected_label
from fleetcheck.report.server_words import served_drafters
from fleetcheck.results import CheckResult, HostResult, RunResult
from fleetcheck.status import Status, worse



@dataclass
class HostDiff:
    name: str
    changes: list[dict[str, Any]] = field(default_factory=list)
    worse: bool = False

    def note(self, what: str, old: Any, new: Any, worse: bool = False, **extra: Any) -> None:
        self.changes.append(dict(what=what, old=old, new=new, worse=worse, **extra))
        self.worse = self.worse or worse


def shown_status(check: CheckResult) -> str:
    """A check's status in a diff line: a check that never ran reads 'not run', not skip."""
    return "not run" if check.not_run else check.status


def integrity_counts(host: HostResult) -> dict[str, Any]:
    for check in host.checks:
        if check.id == "install-record":
            return {k: check.details.get(k) for k in ("missing", "size", "hash", "unreadable")
                    if check.details.get(k)}
    return {}


def aspects(check: CheckResult, move: str) -> tuple[str, ...]:
    """What build-expected found off the expected build (`off`), or matched (`onto`)."""
    details = build_details(check)
    if details is None:
        return ()
    return details.problems if move == "off" else details.matched


def expected_build_move(before: CheckResult | None, after: CheckResult | None) -> str | None:
    """'onto' / 'off' when a host's build-expected went fail -> pass / pass -> fail."""
    if before is None or after is None:
        return None
    if before.status == Status.FAIL and after.status == Status.PASS:
        return "onto"
    if before.status == Status.PASS and after.status == Status.FAIL:
        return "off"
    return None


def error_message(host: HostResult) -> dict[str, str]:
    """The host's error as a change's message ('unreachable: ...'), when it has one."""
    return {"message": "%s: %s" % (host.error.kind, host.error.message)} if host.error else {}


def diff_host(old: HostResult, new: HostResult) -> HostDiff:
    out = HostDiff(new.name)
    if old.status != new.status:
        out.note("status", old.status, new.status,
                 worse=worse(new.status, old.status), **error_message(new))
    old_v, new_v = old.vllm, new.vllm
    for attr in ("version", "commit"):
        a = getattr(old_v, attr) if old_v else None
        b = getattr(new_v, attr) if new_v else None
        if a != b and not (b is None and new.error):
            out.note(attr, a, b)
    old_checks = {c.id: c for c in old.checks}
    for check in new.checks:
        before = old_checks.get(check.id)
        if before is None:
            bad = check.status in (Status.FAIL, Status.ERROR)
            out.note("check " + check.id, None, check.status, worse=bad, check=check.id,
                     **({"message": check.message} if bad else {}))
        elif before.status != check.status:
            bad = worse(check.status, before.status)
            out.note("check " + check.id, shown_status(before), shown_status(check), worse=bad,
                     check=check.id, **({"message": check.message} if bad else {}))
    for check_id in old_checks.keys() - {c.id for c in new.checks}:
        out.note("check " + check_id, old_checks[check_id].status, None, check=check_id)
    after = next((c for c in new.checks if c.id == BUILD_CHECK_ID), None)
    was = old_checks.get(BUILD_CHECK_ID)
    move = expected_build_move(was, after)
    if move is not None and after is not None and was is not None:
        moved = "moved %s the expected build" % move
        if old.build_key() == new.build_key() and expected_label(was) != expected_label(after):
            # the host did not change: the expectation did
            moved = "%s the expected build, which changed from %s to %s" % (
                "now on" if move == "onto" else "now off", expected_label(was) or "-",
                expected_label(after) or "-")
        out.note("expected build", "off" if move == "onto" else "on",
                 "on" if move == "onto" else "off", worse=move == "off", moved=moved,
                 message="; ".join(aspects(after, move) or [after.message]))
    drafters_before, drafters_after = served_drafters(old), served_drafters(new)
    if drafters_before != drafters_after and not new.error:
        out.note("served drafters", ", ".join(drafters_before) or None,
                 ", ".join(drafters_after) or None)
    a, b = integrity_counts(old), integrity_counts(new)
    if a != b:
        out.note("integrity findings", a, b, worse=sum(b.values()) > sum(a.values()))
    la = (old.smoke or {}).get("mean_acceptance_length")
    lb = (new.smoke or {}).get("mean_acceptance_length")
    if la is not None or lb is not None:
        if la is None or lb is None or abs(la - lb) > 1e-9:
            delta = lb - la if la is not None and lb is not None else None
            out.note("mean acceptance length", la, lb, worse=(delta is not None and
                                                              delta < -0.1 * la) or lb is None,
                     delta=delta)
    return out


def added_host(new: HostResult) -> HostDiff:
    """A host the earlier run did not have: its status, and each check that does not pass
    with its message (a new failure says why wherever it appears)."""
    out = HostDiff(new.name)
    out.note("status", None, new.status, worse=new.status != Status.PASS,  # as for the verdict
             **error_message(new))
    if new.error is None:
        for check in new.checks:
            if check.status in (Status.FAIL, Status.ERROR):
                out.note("check " + check.id, None, check.status, worse=True, check=check.id,
                         message=check.message)
    return out


def diff_runs(old: RunResult, new: RunResult) -> dict[str, Any]:
    old_hosts = {h.name: h for h in old.hosts}
    new_hosts = {h.name: h for h in new.hosts}
    hosts = []
    for host in new.hosts:
        if host.name in old_hosts:
            result = diff_host(old_hosts[host.name], host)
        else:
            result = added_host(host)
        if result.changes:
            hosts.append({"name": host.name, "worse": result.worse,
                          "changes": result.changes, "added": host.name not in old_hosts})
    added = [h.name for h in new.hosts if h.name not in old_hosts]
    removed = [h.name for h in old.hosts if h.name not in new_hosts]
    worse = any(h["worse"] for h in hosts) or any(
        new_hosts[name].status != Status.PASS for name in added)
    return {"old": old.started_at, "new": new.started_at, "hosts": hosts, "added": added,
            "removed": removed, "worse": worse}


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return "%.2f" % value
    return "-" if value is None else str(value)


def check_lines(changes: list[dict[str, Any]]) -> list[str]:
    """The check changes of one host: checks that changed the same way share one line,
    and each new failure or error says why under it (one line when every check of the
    group says the same, as a host that went unreachable does)."""
    groups: dict[tuple[Any, Any, bool], list[dict[str, Any]]] = {}
    for change in changes:
        groups.setdefault((change["old"], change["new"], change["worse"]), []).append(change)
    lines = []
    for (old, new, bad), members in groups.items():
        names = ", ".join(c["check"] for c in members)
        lines.append("  %s %s: %s -> %s%s" % ("check" if len(members) == 1 else "checks", names,
                                             format_value(old), format_value(new),
                                             "  (worse)" if bad else ""))
        messages = [c["message"] for c in members if c.get("message")]
        if len(set(messages)) == 1 and len(messages) == len(members):
            lines.append("      %s" % messages[0])
        else:
            lines.extend("      %s: %s" % (c["check"], c["message"]) for c in members
                         if c.get("message"))
    return lines


def diff_text(result: dict[str, Any]) -> list[str]:
    lines = ["fleetcheck diff: %s -> %s" % (result["old"], result["new"])]
    for host in result["hosts"]:
        lines.append("%s%s%s" % (host["name"], "  (added)" if host.get("added") else "",
                                 "  WORSE" if host["worse"] else ""))
        checks = [c for c in host["changes"] if c.get("check")]
        for change in host["changes"]:
            if change.get("check"):
                if change is checks[0]:
                    lines.extend(check_lines(checks))
                continue
            extra = ""
            if change.get("delta") is not None:
                extra = " (%+.2f)" % change["delta"]
            if change.get("moved"):
                lines.append("  %s: %s%s" % (change["moved"], change["message"],
                                             "  (worse)" if change["worse"] else ""))
                continue
            lines.append("  %s: %s -> %s%s%s" % (
                change["what"], format_value(change["old"]), format_value(change["new"]), extra,
                "  (worse)" if change["worse"] else ""))
            if change.get("message"):
                lines.append("      %s" % change["message"])
    shown = {host["name"] for host in result["hosts"]}
    for name in result["added"]:
        if name not in shown:
            lines.append("added: %s" % name)
    for name in result["removed"]:
        lines.append("removed: %s" % name)
    if not result["hosts"] and not result["added"] and not result["removed"]:
        lines.append("no change")
    lines.append("verdict: %s" % ("WORSE" if result["worse"] else "not worse"))
    return lines
