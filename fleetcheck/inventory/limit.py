"""`--limit` with Ansible's host pattern syntax, evaluated as Ansible's InventoryManager
evaluates it.

Patterns are separated by `,` (or `:` when the whole is not one host address); `@FILE`
reads one pattern per line (Ansible's retry files). Plain patterns are applied first
(union), then `&x` (intersection), then `!x` (exclusion); with only `&`/`!` patterns the
start is `all`. A pattern is a host name, a group name (all its hosts, children's
included), a shell glob (`gpu0*`, matched against group and host names) or `~regex`
(matched from the start of the name). A pattern that matches no host and no group is an
input error naming it: a mistyped group must not quietly shrink a pre-rollout check.
Subscripts (`gpus[0]`, `gpus[0:2]`) are refused rather than guessed.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Protocol, Sequence, TypeVar

from fleetcheck.input_error import InputError
from fleetcheck.addresses import BRACKETED_HOST_PORT, HOST_PORT

SPLIT_ON_COLONS = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
SUBSCRIPT = re.compile(r"^(.+)\[(?:-?[0-9]+|[0-9]+[:-][0-9]*)\]$")
HOSTNAME = re.compile(r"^[\w.\-\[\]]+$")
IPV6 = re.compile(r"^[0-9a-fA-F:.\[\]]+$")
SPECIAL = (".", "?", "*", "[")


class Named(Protocol):
    name: str
    groups: list[str]


H = TypeVar("H", bound=Named)


def split_host_pattern(pattern: str) -> list[str]:
    if "," in pattern:
        parts = pattern.split(",")
    elif _is_one_address(pattern.strip()):
        parts = [pattern]
    else:
        parts = SPLIT_ON_COLONS.findall(pattern)
    return [part.strip() for part in parts if part.strip()]


def _is_one_address(pattern: str) -> bool:
    """Ansible keeps `host:port`, `[v6]:port` and IPv6 addresses whole."""
    if ":" not in pattern:
        return True
    match = BRACKETED_HOST_PORT.match(pattern) or HOST_PORT.match(pattern)
    if match and HOSTNAME.match(match.group(1)):
        return True
    return pattern.count(":") >= 2 and bool(IPV6.match(pattern))


def expand_files(patterns: list[str], source: str) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        if not pattern.startswith("@"):
            out.append(pattern)
            continue
        path = pattern[1:]
        if not os.path.isfile(path):
            raise InputError(path, None, "--limit", "limit file %s not found (or not a file)"
                             % pattern)
        with open(path, encoding="utf-8", errors="replace") as handle:
            out.extend(line.strip() for line in handle.read().split("\n"))
    return [p for p in out if p]


def in_group(host: Named, group: str) -> bool:
    if group == "all":
        return True
    if group == "ungrouped":
        return not host.groups
    return group in host.groups


def _matcher(pattern: str, source: str) -> re.Pattern:
    try:
        if pattern.startswith("~"):
            return re.compile(pattern[1:])
        return re.compile(fnmatch.translate(pattern))
    except re.error as exc:
        raise InputError("command line", None, "--limit", "pattern %r is not valid: %s"
                         % (pattern, exc))


def match_one(hosts: Sequence[H], groups: set[str], pattern: str, source: str) -> list[H]:
    if not pattern.startswith("~") and SUBSCRIPT.match(pattern):
        raise InputError("command line", None, "--limit", "pattern %r: subscripts are not "
                         "supported; name the hosts or use a glob" % pattern)
    matcher = _matcher(pattern, source)
    matched_groups = [g for g in sorted(groups | {"all", "ungrouped"}) if matcher.match(g)]
    chosen = [h for h in hosts if any(in_group(h, g) for g in matched_groups)]
    if not matched_groups or pattern.startswith("~") or any(c in pattern for c in SPECIAL):
        names = {h.name for h in chosen}
        chosen += [h for h in hosts if matcher.match(h.name) and h.name not in names]
    if not chosen and not matched_groups:
        raise InputError("command line", None, "--limit", "pattern %r matches no host or group "
                         "of %s%s" % (pattern, source, suggestion(pattern, hosts, groups)))
    return chosen


def suggestion(pattern: str, hosts: Sequence[H], groups: set[str]) -> str:
    """'; did you mean ...?' from the inventory's own group and host names: the names
    the pattern begins (as a glob that takes them all), else the closest spellings."""
    import difflib
    group_names = sorted(groups - {"all", "ungrouped"})
    host_names = [h.name for h in hosts]
    started = [n for n in group_names + host_names if n.startswith(pattern)]
    if started:
        shown = ", ".join(started[:3]) + (" ..." if len(started) > 3 else "")
        return "; did you mean %s* (a glob: %s)?" % (pattern, shown)
    close = difflib.get_close_matches(pattern, group_names + host_names, n=3, cutoff=0.6)
    if close:
        return "; did you mean %s?" % " or ".join(close)
    if not group_names:
        return ""
    more = " and %d more" % (len(group_names) - 8) if len(group_names) > 8 else ""
    return "; its groups: %s%s" % (", ".join(group_names[:8]), more)


def select_hosts(hosts: Sequence[H], limit: str, source: str, groups: set[str]) -> list[H]:
    """The hosts `--limit LIMIT` selects, in inventory order."""
    patterns = expand_files(split_host_pattern(limit), source)
    regular = [p for p in patterns if p[0] not in "!&"]
    ordered = (regular or ["all"]) + [p for p in patterns if p[0] == "&"] + \
        [p for p in patterns if p[0] == "!"]
    by_name = {h.name: h for h in hosts}
    selected: set[str] = set()
    for pattern in ordered:
        bare = pattern[1:] if pattern[0] in "!&" else pattern
        that = {bare} if bare in by_name else \
            {h.name for h in match_one(hosts, groups, bare, source)}
        if pattern[0] == "!":
            selected -= that
        elif pattern[0] == "&":
            selected &= that
        else:
            selected |= that
    if not selected:
        raise InputError("command line", None, "--limit", "pattern %r selects no host of %s" % (
            limit, source))
    return [h for h in hosts if h.name in selected]
