"""Waivers: a known gap accepted for a while. `fleetcheck_waive: {CHECK: {reason: ...,
until: DATE}}` on a host or group, or a playbook's `waive: {BUILD: {CHECK: {...}}}` for
the hosts running one build (a version, or a commit prefix), turns that check's fail into
`waived` with its reason until the date (inclusive), then it fails again saying the
waiver expired. It never touches an error, a warning or a pass."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from fleetcheck.input_error import InputError, set_in

MAX_REASON = 500


@dataclass(frozen=True)
class Waiver:
    check: str
    reason: str
    until: datetime.date
    source: str  # where it was set, as every report shows it

    def words(self) -> str:
        return "%s (set in %s)" % (self.reason, self.source)


def parse_waivers(raw: Any, source: str, where: str | None, field: str,
                  label: str) -> tuple[Waiver, ...]:
    """`{CHECK: {reason: TEXT, until: YYYY-MM-DD}}`, each entry checked; errors name the
    file, the group or host, and the field (`fleetcheck_waive.CHECK.until`)."""
    if not isinstance(raw, dict) or not raw:
        raise InputError(source, where, field, "must be a mapping of check id to "
                         "{reason: ..., until: YYYY-MM-DD}")
    waivers = []
    for check, entry in raw.items():
        name = "%s.%s" % (field, check)
        if not isinstance(check, str) or not check:
            raise InputError(source, where, name, "a check id must be a string")
        if not isinstance(entry, dict) or set(entry) - {"reason", "until"}:
            raise InputError(source, where, name, "must be {reason: ..., until: YYYY-MM-DD} "
                             "(nothing else)")
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise InputError(source, where, name + ".reason", "say why the failure is "
                             "accepted (a non-empty string)")
        until = entry.get("until")
        if isinstance(until, str):
            try:
                until = datetime.date.fromisoformat(until)
            except ValueError:
                pass
        if isinstance(until, datetime.datetime) or not isinstance(until, datetime.date):
            raise InputError(source, where, name + ".until", "must be a date, YYYY-MM-DD "
                             "(a waiver always ends), got %r" % (until,))
        waivers.append(Waiver(check, reason.strip()[:MAX_REASON], until, label))
    return tuple(waivers)


def check_inventory_waivers(source: str, where: str, raw: Any) -> None:
    """inventory/hosts.py's FeatureCheck: a bad waiver is said with the inventory's other
    mistakes."""
    parse_waivers(raw, source, where, "fleetcheck_waive", "")


def host_waivers(hosts: list[Any], inventory: str) -> dict[str, tuple[Waiver, ...]]:
    """Each host's own waivers (host or group vars), labelled by where they were set."""
    out = {}
    for host in hosts:
        raw = getattr(host, "waive", None)
        if raw:
            origin = getattr(host, "origins", {}).get("waive")
            source = origin.source if origin else inventory
            where = origin.where if origin else "host '%s'" % host.name
            out[host.name] = parse_waivers(raw, source, where, "fleetcheck_waive",
                                           set_in(host, "waive", inventory))
    return out


def playbook_waivers(raw: Any, source: str) -> tuple[tuple[str, Waiver], ...]:
    """A playbook's `waive: {BUILD: {CHECK: {...}}}`: (build, waiver) pairs; BUILD is a
    version as installed (`0.1.dev16016+g3cfc8f8b7`) or a commit prefix."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise InputError(source, "waive", None, "must be a mapping of build (a version or a "
                         "commit prefix) to {CHECK: {reason: ..., until: YYYY-MM-DD}}")
    out = []
    for build, entries in raw.items():
        build = str(build)
        label = "playbook %s: waive.%s" % (source, build)
        for waiver in parse_waivers(entries, source, "waive", build, label):
            out.append((build, waiver))
    return tuple(out)
