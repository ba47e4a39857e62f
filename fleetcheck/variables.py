"""Inventory variables as a connection declares them (as Ansible's connection plugins
declare `vars:`): the names it reads, the setting each fills, and the check of its value.

The inventory validates every host against these declarations, typo guard included, and
knows no connector; connectors declare theirs here without importing the inventory. The
composition root collects them (fleetcheck.connectors.declarations) and hands them in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from fleetcheck.text import is_clean_name, is_int, is_number

# Takes the inventory's value, returns the checked one; raises ValueError saying what is
# wrong (the inventory adds file, host and field).
Check = Callable[[Any], Any]

BOOLEANS_TRUE = {"y", "yes", "on", "1", "true", "t"}
BOOLEANS_FALSE = {"n", "no", "off", "0", "false", "f"}


def text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string, got %r" % (value,))
    if not is_clean_name(value):
        raise ValueError("contains control characters")
    return value


def path(value: Any) -> str:
    """An absolute path (or ~), as an install or key location must be."""
    value = text(value)
    if not (value.startswith("/") or value.startswith("~")):
        raise ValueError("must be an absolute path, got %r" % value)
    return value


def port(value: Any) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not is_int(value) or not 0 < value < 65536:
        raise ValueError("must be a port number 1-65535, got %r" % (value,))
    return int(value)


def positive_seconds(value: Any) -> float:
    if isinstance(value, str) and re.fullmatch(r"[0-9]+(\.[0-9]*)?", value.strip()):
        value = float(value)  # INI [g:vars] "30.5", a template's "{{ 30 * 2 }}"
    if not is_number(value) or value <= 0:
        raise ValueError("must be a positive number of seconds")
    return float(value)


def boolean(value: Any) -> bool:
    """Ansible's boolean(): true/yes/on/1/t/y (any case), bools and 0/1."""
    if isinstance(value, bool):
        return value
    normalized = value.strip().lower() if isinstance(value, str) else value
    if normalized in BOOLEANS_TRUE or normalized in (1, 1.0):
        return True
    if normalized in BOOLEANS_FALSE or normalized in (0, 0.0):
        return False
    raise ValueError("must be a boolean (true/false, yes/no), got %r" % (value,))


def one_of(choices: Sequence[str]) -> Check:
    def check(value: Any) -> str:
        value = text(value)
        if value not in choices:
            raise ValueError("must be one of %s, got %r" % (", ".join(sorted(choices)), value))
        return value
    return check


def string_mapping(value: Any) -> dict[str, str]:
    """A mapping of environment variable names to strings."""
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in value):
        raise ValueError("must be a mapping of environment variable names to values")
    checked = {}
    for key, item in value.items():
        if not isinstance(item, (str, int, float)) or isinstance(item, bool):
            raise ValueError("%s: must be a string or number, got %r" % (key, item))
        checked[key] = str(item)
        if not is_clean_name(checked[key]):
            raise ValueError("%s: contains control characters" % key)
    return checked


@dataclass(frozen=True)
class Variable:
    """One setting and its spellings. Short names (no `ansible_` prefix) are also
    accepted as `fleetcheck_NAME`; when several spellings are set, fleetcheck_NAME wins,
    then ansible_*, then the short name.

    typo_guard: names near this variable's short names are refused as typos (off for
    words other playbooks use, `port`, `user`); ansible_* names are always guarded.
    common_word: an everyday word whose neighbours are other words (`container`,
    `collection`): one edit from it is a typo, two are not. not_typos: other playbooks'
    words one edit away (`containers`). refused: why fleetcheck will not use this
    variable, said when an inventory sets it. fills: the setting this variable stands in
    for, filled unless the inventory sets that one itself (a bastion read from
    ansible_ssh_common_args fills proxy_jump); a checked value of None fills nothing."""

    setting: str
    names: tuple[str, ...]
    check: Check = text
    typo_guard: bool = True
    common_word: bool = False
    not_typos: tuple[str, ...] = ()
    refused: str | None = None
    fills: str | None = None


@dataclass(frozen=True)
class Declarations:
    """What the inventory is told: the accepted `connection:` values, and every variable
    any connection (or the container wrapper) reads."""

    connections: tuple[str, ...]
    variables: tuple[Variable, ...]
