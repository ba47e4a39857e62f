"""The drafter a gate expects every server to serve: `REPO[@REV]` (a hub id or a
directory, and optionally a revision: a prefix of the snapshot's commit sha, at least 7
hex digits) from `--expect-drafter`, the playbook's `expect: drafter:` or the inventory's
`fleetcheck_expect_drafter`; command line > inventory > playbook, as for the build.
Bad input is exit 2 naming where it was given."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fleetcheck.input_error import InputError, set_in

REPO = re.compile(r"^(?:/[^\x00-\x1f@]+|[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)?)$")
REVISION = re.compile(r"^[0-9a-fA-F]{7,40}$")


@dataclass(frozen=True)
class DrafterExpectation:
    """One expected drafter and where it was given."""

    repo: str
    revision: str | None
    source: str

    def label(self) -> str:
        return self.repo + ("@" + self.revision if self.revision else "")

    def as_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "revision": self.revision, "source": self.source}


def parse_drafter(text: Any, source: str, where: str | None, field: str,
                  label: str) -> DrafterExpectation:
    """`REPO[@REV]`: `z-lab/Qwen3.6-27B-DFlash`, `z-lab/Qwen3.6-27B-DFlash@4ba787e`,
    `/models/drafter`."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(source, where, field, "must be a drafter as REPO[@REV] (e.g. "
                         "'z-lab/Qwen3.6-27B-DFlash@4ba787e'), got %r" % (text,))
    repo, at, revision = text.strip().partition("@")
    if not REPO.match(repo) or ".." in repo.split("/"):
        raise InputError(source, where, field, "%r is neither a hub id (ORG/NAME) nor an "
                         "absolute directory" % repo)
    if at and not REVISION.match(revision):
        raise InputError(source, where, field, "revision %r after '@' is not a commit sha "
                         "prefix (7 to 40 hex digits)" % revision)
    return DrafterExpectation(repo, revision.lower() or None, label)


def resolve_drafters(hosts: list[Any], playbook: DrafterExpectation | None,
                     cli: str | None, inventory: str) -> dict[str, DrafterExpectation]:
    """Each host's expected drafter: command line > inventory > playbook."""
    given = parse_drafter(cli, "command line", None, "--expect-drafter",
                          "--expect-drafter") if cli is not None else None
    parsed: dict[str, DrafterExpectation] = {}
    out = {}
    for host in hosts:
        raw = getattr(host, "expect_drafter", None)
        mine = given
        if mine is None and raw is not None:
            if raw not in parsed:
                origin = getattr(host, "origins", {}).get("expect_drafter")
                if origin is not None:
                    source, where, field = origin.source, origin.where, origin.variable
                else:
                    source, field = inventory, "fleetcheck_expect_drafter"
                    where = "host '%s'%s" % (host.name, " (groups: %s)" % ", ".join(
                        host.groups) if host.groups else "")
                parsed[raw] = parse_drafter(raw, source, where, field,
                                            set_in(host, "expect_drafter", inventory))
            mine = parsed[raw]
        mine = mine or playbook
        if mine is not None:
            out[host.name] = mine
    return out
