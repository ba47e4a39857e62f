"""Ansible's INI inventory format, read as Ansible's ini plugin reads it.

`[group]` lists hosts (`gpu1 ansible_host=10.0.0.1`, `gpu[01:16].dc1`, `gpu1:2222`);
`[group:vars]` sets group variables; `[group:children]` nests groups, which may be declared
further down. Lines before any section belong to `ungrouped`. Values are typed as Ansible
types them: a Python literal when it is one (`2222` is an int, `True` a bool, `"12.4"` a
float once shlex has removed the quotes), the text otherwise (`true` and `yes` stay strings).
Errors, and every value read here, name the file and the line (`hosts.ini:12`).
"""

from __future__ import annotations

import re
import shlex
import warnings
from typing import Any

from fleetcheck.input_error import InputError
from fleetcheck.inventory.hostnames import expand_host_entry
from fleetcheck.inventory.model import InventoryData

SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
COMMENT_MARKERS = ("#", ";")


def parse_value(text: str) -> Any:
    """Ansible's _parse_value: ast.literal_eval when the text is a literal, else the
    text. Ellipsis and complex numbers, which literal_eval knows but variables do not,
    stay text; tuples and sets become lists."""
    import ast  # only INI inventories need it: not on every run's start-up

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _plain(value, text)


def _plain(value: Any, text: str) -> Any:
    if value is ... or isinstance(value, complex):
        return str(value) if value is not ... else "..."
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, (list, tuple, set)):
        return [_plain(item, text) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item, text) for key, item in value.items()}
    return value


def parse_ini(path: str, text: str, data: InventoryData) -> None:
    """Add the hosts, groups and variables of one INI file to the inventory."""
    group, state = "ungrouped", "hosts"
    # groups named in [x:children] or [x:vars] before [x] itself: line, kind, parents
    pending: dict[str, tuple[int, str, list[str]]] = {}

    def fail(number: int, problem: str) -> InputError:
        return InputError("%s:%d" % (path, number), None, None, problem)

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in COMMENT_MARKERS:
            continue
        section = SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise fail(number, "section [%s:%s] has unknown type %r (hosts, children or "
                                   "vars)" % (group, state, state))
            if group not in data.groups:
                if state == "vars" and group not in pending:
                    pending[group] = (number, "vars", [])
                data.add_group(group)
            if group in pending and state != "vars":
                if pending[group][1] == "children":
                    _add_pending_children(group, pending, data, path)
                else:
                    del pending[group]
            continue
        if line.startswith("[") and line.endswith("]"):
            raise fail(number, "invalid section %r: no spaces or other characters are allowed "
                               "in a section name" % line)
        if state == "hosts":
            _host_line(path, number, line, group, data, fail)
        elif state == "vars":
            if "=" not in line:
                raise fail(number, "expected key=value, got %r" % line)
            name, value = (part.strip() for part in line.split("=", 1))
            data.set_group_var(group, name, parse_value(value), "%s:%d" % (path, number))
        else:
            match = GROUP_NAME.match(line)
            if not match:
                raise fail(number, "expected a group name, got %r" % line)
            child = match.group(1)
            if child in data.groups:
                data.add_child(group, child, "%s:%d" % (path, number))
            elif child in pending:
                pending[child][2].append(group)
            else:
                pending[child] = (number, "children", [group])
    for name, (number, kind, parents) in pending.items():
        if kind == "vars":
            raise fail(number, "section [%s:vars] is for a group that is never defined" % name)
        raise fail(number, "section [%s:children] includes group %r, which is never defined"
                   % (parents[-1], name))


def _add_pending_children(group: str, pending: dict[str, tuple[int, str, list[str]]],
                          data: InventoryData, path: str) -> None:
    """A group named as a child before its own section: link it to its parents now."""
    number, _, parents = pending[group]
    for parent in parents:
        data.add_child(parent, group, "%s:%d" % (path, number))
        if parent in pending and pending[parent][1] == "children":
            _add_pending_children(parent, pending, data, path)
    pending.pop(group, None)


def _host_line(path: str, number: int, line: str, group: str, data: InventoryData,
               fail: Any) -> None:
    """`name[:port] [key=value ...] [# comment]`, split as a shell would."""
    try:  # str.split gives shlex's answer when there is nothing to unquote (and is 20x faster)
        tokens = line.split() if not any(c in line for c in "'\"\\#") else \
            shlex.split(line, comments=True)
    except ValueError as exc:
        raise fail(number, "cannot split host line %r: %s" % (line, exc))
    if not tokens:
        return
    entry = tokens[0]
    if entry.endswith(":"):
        raise fail(number, "host %r ends in ':' (a port is missing)" % entry)
    if entry.strip() == "---":
        raise fail(number, "'---' is a sign this is a YAML file, not INI")
    variables = {}
    for token in tokens[1:]:
        if "=" not in token:
            raise fail(number, "expected key=value after the host name, got %r" % token)
        name, value = token.split("=", 1)
        variables[name] = parse_value(value)
    source = "%s:%d" % (path, number)
    names, port = expand_host_entry(entry, source)
    for name in names:
        data.add_host(name, group, source, port)
        for key, value in variables.items():
            data.set_host_var(name, key, value, source)
