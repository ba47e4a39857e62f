"""The build a gate expects: a PEP 440 version specifier, a commit prefix and "same build
across the group", from the playbook (`expect:`), the inventory
(`fleetcheck_expect_version` / `fleetcheck_expect_commit` at any level) or the command
line (which wins). Each field is resolved on its own, most specific source first, and
remembers where it came from, so a failure can say which file or option asked for it.
Validation happens here, before any host is contacted: bad input is exit 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from fleetcheck.input_error import InputError, set_in
from fleetcheck.versions import pep440

if TYPE_CHECKING:  # packaging costs ~20 ms to import: only runs that expect a build pay it
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

MIN_COMMIT_DIGITS = 7
HEX = re.compile(r"^[0-9a-f]+$")
PLAYBOOK_KEYS = ("version", "commit", "same_build")


@dataclass(frozen=True)
class VersionSpec:
    """A PEP 440 specifier as the user wrote it (shown) and as packaging parsed it (matched:
    packaging's own str() reorders the clauses)."""

    text: str
    specifiers: "SpecifierSet"

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Expected:
    """One expected value and where it was given (shown next to every verdict)."""

    value: Any
    source: str


@dataclass(frozen=True)
class BuildExpectation:
    """What one host is expected to run; None for a field nobody set."""

    version: Expected | None = None
    commit: Expected | None = None
    same_build: Expected | None = None

    def is_set(self) -> bool:
        return bool(self.version or self.commit or (self.same_build and self.same_build.value))


def parse_specifier(text: Any, source: str, where: str | None, field: str) -> VersionSpec:
    """A PEP 440 specifier, refused (exit 2) when it is not one; a bare version gets a hint."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    if not isinstance(text, str) or not text.strip():
        raise InputError(source, where, field, "must be a PEP 440 version specifier such as "
                         "'==0.33.0' or '>=0.33,<0.34', got %r" % (text,))
    try:
        spec = SpecifierSet(text.strip())
    except InvalidSpecifier:
        hint = "a bare version: did you mean '==%s'?" % text.strip() if pep440(text.strip()) \
            else "write e.g. '==0.33.0' or '>=0.33,<0.34'"
        raise InputError(source, where, field, "not a PEP 440 version specifier: %r (%s)"
                         % (text.strip(), hint))
    return VersionSpec(text.strip(), spec)


def parse_commit(text: Any, source: str, where: str | None, field: str) -> str:
    """A commit prefix: at least 7 hex digits (git's shortest abbreviation), lowercased."""
    if not isinstance(text, str):
        raise InputError(source, where, field, "must be a commit prefix (quoted, at least %d "
                         "hex digits), got %r" % (MIN_COMMIT_DIGITS, text))
    prefix = text.strip().lower()
    if prefix.startswith("g") and HEX.match(prefix[1:] or "x"):
        prefix = prefix[1:]  # the g<sha> form vcs-versioning writes in __commit_id__
    if not HEX.match(prefix):
        raise InputError(source, where, field, "commit prefix %r is not hexadecimal" % text)
    if len(prefix) < MIN_COMMIT_DIGITS:
        raise InputError(source, where, field, "commit prefix %r is shorter than %d hex digits"
                         % (text, MIN_COMMIT_DIGITS))
    if len(prefix) > 40:
        raise InputError(source, where, field, "commit prefix %r is longer than a sha1 (40)"
                         % text)
    return prefix


def playbook_expectation(raw: Any, source: str) -> BuildExpectation:
    """The playbook's `expect:` mapping: the fleet-wide default."""
    if raw is None:
        return BuildExpectation()
    if not isinstance(raw, dict):
        raise InputError(source, "expect", None, "must be a mapping with version, commit, "
                         "same_build")
    for key in raw:  # `drafter` is drafter_expectations.py's
        if key not in PLAYBOOK_KEYS + ("drafter",):
            raise InputError(source, "expect", str(key), "unknown key; accepted: %s"
                             % ", ".join(PLAYBOOK_KEYS + ("drafter",)))
    where = "playbook %s: expect." % source
    version = commit = same = None
    if raw.get("version") is not None:
        version = Expected(parse_specifier(raw["version"], source, "expect", "version"),
                           where + "version")
    if raw.get("commit") is not None:
        commit = Expected(parse_commit(raw["commit"], source, "expect", "commit"),
                          where + "commit")
    if "same_build" in raw:
        if not isinstance(raw["same_build"], bool):
            raise InputError(source, "expect", "same_build", "must be true or false")
        same = Expected(raw["same_build"], where + "same_build")
    return BuildExpectation(version, commit, same)


@dataclass(frozen=True)
class CommandLine:
    """--expect-version / --expect-commit / --expect-same-build, as given (None: not given)."""

    version: str | None = None
    commit: str | None = None
    same_build: bool = False
    drafter: str | None = None  # --expect-drafter, resolved by drafter_expectations.py


def resolve(hosts: list[Any], playbook: BuildExpectation, cli: CommandLine,
            inventory: str) -> dict[str, BuildExpectation]:
    """Each host's expectation, field by field: command line > inventory > playbook.
    Only hosts with something expected are in the result."""
    version = commit = None
    if cli.version is not None:
        version = Expected(parse_specifier(cli.version, "command line", None,
                                           "--expect-version"), "--expect-version")
    if cli.commit is not None:
        commit = Expected(parse_commit(cli.commit, "command line", None, "--expect-commit"),
                          "--expect-commit")
    same = Expected(True, "--expect-same-build") if cli.same_build else playbook.same_build
    parsed: dict[tuple[str, str], Any] = {}  # one parse (and one error) per distinct value
    out = {}
    for host in hosts:
        host_version = version
        host_commit = commit
        if host_version is None and host.expect_version is not None:
            host_version = Expected(_inventory_value(parsed, hosts, host, "version", inventory),
                                    set_in(host, "expect_version", inventory))
        if host_commit is None and host.expect_commit is not None:
            host_commit = Expected(_inventory_value(parsed, hosts, host, "commit", inventory),
                                   set_in(host, "expect_commit", inventory))
        expectation = BuildExpectation(host_version or playbook.version,
                                       host_commit or playbook.commit, same)
        if expectation.is_set():
            out[host.name] = expectation
    return out


def _inventory_value(parsed: dict[tuple[str, str], Any], hosts: list[Any], host: Any,
                     kind: str, inventory: str) -> Any:
    """Parse an inventory value once; the error names where it was set (the file, the
    group or host there, the variable as written) and how many hosts hold it."""
    raw = getattr(host, "expect_" + kind)
    key = (kind, raw)
    if key not in parsed:
        others = sum(1 for h in hosts if getattr(h, "expect_" + kind) == raw) - 1
        hosts_with_it = "host '%s'%s" % (
            host.name, " and %d other host(s) with the same value" % others if others else "")
        origin = getattr(host, "origins", {}).get("expect_" + kind)
        if origin is not None:  # where it was set: the file, the group or host, the name
            source, field = origin.source, origin.variable
            where = origin.where if origin.where == "host '%s'" % host.name and not others \
                else "%s (for %s)" % (origin.where, hosts_with_it)
        else:
            source, field = inventory, "fleetcheck_expect_" + kind
            where = hosts_with_it
        parser = parse_specifier if kind == "version" else parse_commit
        parsed[key] = parser(raw, source, where, field)
    return parsed[key]


def found_version(facts_versions: list[tuple[str | None, str]]) -> tuple[Version | None, str, str]:
    """The first of (text, source) that is a PEP 440 version: METADATA first (what pip
    and packaging know the distribution as, local labels such as +cu129 included), then
    _version.py. Returns (version or None, its text, its source)."""
    for text, source in facts_versions:
        if text and pep440(text) is not None:
            return pep440(text), text, source
    for text, source in facts_versions:
        if text:
            return None, text, source
    return None, "", ""


def version_matches(spec: VersionSpec, version: Version) -> tuple[bool, str | None]:
    """PEP 440 matching with packaging. Pre-releases (rc, dev) match only a specifier that
    names one: a gate asking for '>=0.33' should not pass an unannounced 0.34.0rc1 (this is
    stricter than PEP 440's rule for already installed versions, on purpose, and explicit
    so it does not depend on the packaging release). Local labels (+cu129, +g<sha>) are
    ignored unless the specifier has one, as PEP 440 says. Returns (ok, why not)."""
    specifiers = spec.specifiers
    if specifiers.contains(version, prereleases=bool(specifiers.prereleases)):
        return True, None
    if version.is_prerelease and specifiers.contains(version, prereleases=True):
        return False, ("%s is a pre-release; a specifier that names one (e.g. '>=%s') "
                       "accepts it" % (version, version))
    return False, None


def commit_matches(prefix: str, found: str) -> tuple[bool, str | None]:
    """The expected prefix against the commit the build records (a full sha from
    direct_url.json, or an abbreviation from _version.py or a +g<sha> version): they match
    when the shorter is a prefix of the longer and at least 7 digits agree."""
    found = found.lower()
    if found.startswith("g") and HEX.match(found[1:] or "x"):
        found = found[1:]
    if not HEX.match(found):
        return False, "the build records %r, not a git sha" % found
    if len(found) < MIN_COMMIT_DIGITS:
        return False, "the build records only %d hex digits (%s)" % (len(found), found)
    shorter, longer = sorted((prefix, found), key=len)
    if longer.startswith(shorter):
        if len(found) < len(prefix):
            return True, "the build records %d digits; they agree" % len(found)
        return True, None
    return False, None


def names(hosts: list[str], shown: int = 10) -> str:
    """A list of host names that stays readable at fleet scale."""
    more = len(hosts) - shown
    return ", ".join(hosts[:shown]) + (" and %d more" % more if more > 0 else "")


def check_inventory_version(source: str, where: str, raw: Any) -> None:
    parse_specifier(raw, source, where, "fleetcheck_expect_version")


def check_inventory_commit(source: str, where: str, raw: Any) -> None:
    parse_commit(raw, source, where, "fleetcheck_expect_commit")


def inventory_checks() -> dict[str, Callable[[str, str, Any], None]]:
    """The inventory's expectations checked as it is read (inventory/hosts.py's
    FeatureCheck), so a bad one is said with every other mistake of its vars file."""
    return {"expect_version": check_inventory_version, "expect_commit": check_inventory_commit}
