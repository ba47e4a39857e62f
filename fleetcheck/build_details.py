"""What a build-expected verdict records beside its status, typed: the expected values and
where each came from, the build found, each judged aspect, and the same_build comparison.
The check builds these values, the results file holds their JSON form (`as_dict`, read back
by `from_dict`), and warnings, reports and diff read attributes, never a dict's keys."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from fleetcheck.status import Status

CHECK_ID = "build-expected"
TITLE = "Expected build (version, commit, same build)"


@dataclass(frozen=True)
class ExpectedValue:
    """One expected value as results record it: the text the user gave (for same_build,
    True/False) and where it was given."""

    value: Any
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


@dataclass(frozen=True)
class FoundBuild:
    """The build found on the host, each value with the file it came from."""

    version: str | None = None
    version_source: str | None = None
    commit: str | None = None
    commit_source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "version_source": self.version_source,
                "commit": self.commit, "commit_source": self.commit_source}


@dataclass(frozen=True)
class SameBuild:
    """The host against the others expected on its version and commit: not compared (the
    host is already off the expected build, `reason` says which part), or compared with
    `ok` True (on the majority build), False (off it) or None (no majority)."""

    compared: bool
    reason: str | None = None
    group: str | None = None
    hosts: int = 0
    differing: tuple[str, ...] = ()
    majority: str | None = None
    ok: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        if not self.compared:
            return {"compared": False, "reason": self.reason}
        return {"group": self.group, "hosts": self.hosts, "differing": list(self.differing),
                "majority": self.majority, "compared": True, "ok": self.ok}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SameBuild:
        if not data.get("compared"):
            return cls(compared=False, reason=data.get("reason"))
        return cls(compared=True, group=data.get("group"), hosts=data.get("hosts", 0),
                   differing=tuple(data.get("differing") or ()), majority=data.get("majority"),
                   ok=data.get("ok"))


EXPECTED_NAMES = ("version", "commit", "same_build")


@dataclass(frozen=True)
class BuildDetails:
    """`version_ok` / `commit_ok`: None when that part was not expected. Each aspect adds a
    short phrase to `matched`, `problems` or `undecided`; the status and message follow
    from those (`verdict`)."""

    found: FoundBuild
    version: ExpectedValue | None = None
    commit: ExpectedValue | None = None
    same_build_expected: ExpectedValue | None = None
    version_ok: bool | None = None
    commit_ok: bool | None = None
    problems: tuple[str, ...] = ()
    matched: tuple[str, ...] = ()
    undecided: tuple[str, ...] = ()
    same_build: SameBuild | None = None

    def expected(self, name: str) -> ExpectedValue | None:
        return getattr(self, "same_build_expected" if name == "same_build" else name)

    def with_aspect(self, ok: bool | None, short: str) -> BuildDetails:
        """One more judged aspect: ok True matched, False a problem, None undecided."""
        if ok:
            return replace(self, matched=self.matched + (short,))
        if ok is False:
            return replace(self, problems=self.problems + (short,))
        return replace(self, undecided=self.undecided + (short,))

    def verdict(self) -> tuple[Status, str]:
        """The status and message of the aspects judged so far."""
        if self.problems:
            return Status.FAIL, "off the expected build: " + "; ".join(self.problems)
        if self.undecided:
            return Status.ERROR, "; ".join(self.undecided)
        if self.matched:
            return Status.PASS, "on the expected build: " + "; ".join(self.matched)
        return Status.SKIP, "only same_build is expected: compared once every host has finished"

    def expects_same_build(self) -> bool:
        return bool(self.same_build_expected and self.same_build_expected.value)

    def label(self) -> str:
        """What the host was expected to run, in words (terminal, HTML, diff)."""
        parts = ["%s %s" % (name, item.value) for name, item in
                 (("version", self.version), ("commit", self.commit)) if item is not None]
        if self.expects_same_build():
            parts.append("same build as its group")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (schema 1): keys in the order the results file has always had."""
        out: dict[str, Any] = {
            "expected": {name: item.as_dict() for name in EXPECTED_NAMES
                         if (item := self.expected(name)) is not None},
            "found": self.found.as_dict(), "problems": list(self.problems),
            "matched": list(self.matched)}
        if self.version_ok is not None:
            out["version_ok"] = self.version_ok
        if self.commit_ok is not None:
            out["commit_ok"] = self.commit_ok
        if self.same_build is not None:
            out["same_build"] = self.same_build.as_dict()
        if self.undecided:
            out["undecided"] = list(self.undecided)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildDetails:
        expected = data.get("expected") or {}

        def item(name: str) -> ExpectedValue | None:
            value = expected.get(name)
            return ExpectedValue(value["value"], value["source"]) if value else None

        found = data.get("found") or {}
        return cls(found=FoundBuild(**{k: found.get(k) for k in (
                       "version", "version_source", "commit", "commit_source")}),
                   version=item("version"), commit=item("commit"),
                   same_build_expected=item("same_build"),
                   version_ok=data.get("version_ok"), commit_ok=data.get("commit_ok"),
                   problems=tuple(data.get("problems") or ()),
                   matched=tuple(data.get("matched") or ()),
                   undecided=tuple(data.get("undecided") or ()),
                   same_build=SameBuild.from_dict(data["same_build"])
                   if data.get("same_build") else None)


class Judged(Protocol):
    """A check's result as far as its details go (results.CheckResult is one): the result
    model imports these details, so they never import it back."""

    @property
    def details(self) -> object: ...


def build_details(check: Judged | None) -> BuildDetails | None:
    """A build-expected check's typed details; None for any other check, and for one that
    judged nothing (skipped, not run)."""
    if check is None or not isinstance(check.details, BuildDetails):
        return None
    return check.details


def expected_label(check: Judged | None) -> str:
    details = build_details(check)
    return details.label() if details else ""
