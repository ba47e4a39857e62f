"""Ansible-style YAML inventories: groups, nested children, vars, host ranges, --limit.

People already keep their fleet in Ansible's format, so fleetcheck reads it as is (the
connection vars Ansible uses plus fleetcheck's own) and refuses anything it would have to
guess about, naming file, host or group, and field.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import string
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.errors import InputError
from fleetcheck.yamlfile import read_yaml
from fleetcheck.smoke import SmokeOptions, validate_smoke

GROUP_KEYS = {"hosts", "children", "vars"}

# Accepted var names -> the canonical field they set.
VAR_ALIASES = {
    "ansible_host": "address", "host": "address",
    "ansible_port": "port", "port": "port",
    "ansible_user": "user", "user": "user",
    "ansible_ssh_private_key_file": "key", "key": "key",
    "ansible_connection": "connection", "connection": "connection",
    "ansible_python_interpreter": "python", "python": "python",
    "venv": "venv",
    "site_packages": "site_packages",
    "vllm_url": "vllm_url",
    "proxy_jump": "proxy_jump",
    "ansible_ssh_common_args": "ssh_common_args",
    "timeout": "timeout",
    "smoke": "smoke",
    "container": "container",
    "container_engine": "container_engine",
    "container_user": "container_user",
}
PATH_FIELDS = {"key", "python", "venv", "site_packages"}
STRING_FIELDS = {"address", "user", "proxy_jump", "ssh_common_args", "vllm_url", "connection",
                 "container", "container_engine", "container_user"}
CONTAINER_ENGINES = {"docker", "podman"}
DEFAULT_VLLM_URL = "http://127.0.0.1:8000"
RANGE = re.compile(r"\[([^\]:]*):([^\]:]*)(?::([^\]]*))?\]")


@dataclass
class Host:
    """One host of the inventory, with its vars merged and checked."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    key: str | None = None
    connection: str = "ssh"
    venv: str | None = None
    python: str | None = None
    site_packages: str | None = None
    vllm_url: str = DEFAULT_VLLM_URL
    proxy_jump: str | None = None
    timeout: float | None = None
    smoke: dict[str, Any] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    container: str | None = None  # a container name on the box, or "auto"
    container_engine: str | None = None  # docker | podman; None: the first found on the box
    container_user: str | None = None

    @property
    def interpreter(self) -> str:
        """The Python the probe runs under: the venv's unless one is named; the remote
        side falls back to python3 when that one does not start."""
        if self.python:
            return self.python
        if self.venv:
            return self.venv.rstrip("/") + "/bin/python"
        return "python3"


def expand_host_pattern(pattern: str, source: str) -> list[str]:
    """Expand Ansible ranges: gpu[01:16].dc1 (zero padding kept), node[a:f], [1:9:2]."""
    match = RANGE.search(pattern)
    if not match:
        return [pattern]
    start, end, step_text = match.group(1), match.group(2), match.group(3)
    where = "host '%s'" % pattern
    try:
        step = int(step_text) if step_text else 1
    except ValueError:
        raise InputError(source, where, None, "range step '%s' is not a number" % step_text)
    if step < 1:
        raise InputError(source, where, None, "range step must be at least 1")
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") and len(start) > 1 else 0
        values = [str(n).zfill(width) for n in range(int(start), int(end) + 1, step)]
    elif len(start) == 1 and len(end) == 1 and start in string.ascii_letters \
            and end in string.ascii_letters:
        values = [chr(c) for c in range(ord(start), ord(end) + 1, step)]
    else:
        raise InputError(source, where, None,
                         "range [%s:%s] is neither numeric nor single letters" % (start, end))
    if not values:
        raise InputError(source, where, None,
                         "range [%s:%s] expands to no hosts" % (start, end))
    prefix, suffix = pattern[:match.start()], pattern[match.end():]
    out: list[str] = []
    for value in values:
        out.extend(expand_host_pattern(prefix + value + suffix, source))
    return out


def check_var(source: str, where: str, name: str, value: Any) -> tuple[str, Any]:
    if name not in VAR_ALIASES:
        raise InputError(source, where, name, "unknown variable; accepted: %s" % ", ".join(
            sorted(VAR_ALIASES)))
    canonical = VAR_ALIASES[name]
    if canonical == "port":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
            raise InputError(source, where, name, "must be a port number 1-65535, got %r"
                             % (value,))
        return canonical, value
    if canonical == "smoke":
        validate_smoke(source, where, value, SmokeOptions())
        return canonical, dict(value)
    if canonical == "timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InputError(source, where, name, "must be a positive number of seconds")
        return canonical, float(value)
    if not isinstance(value, str) or not value:
        raise InputError(source, where, name, "must be a non-empty string, got %r" % (value,))
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InputError(source, where, name, "contains control characters")
    if canonical in PATH_FIELDS and not (value.startswith("/") or value.startswith("~")
                                          or (canonical == "python" and "/" not in value)):
        raise InputError(source, where, name, "must be an absolute path, got %r" % value)
    if canonical == "connection":
        from fleetcheck.connectors import connection_names  # one module per connection
        if value not in connection_names():
            raise InputError(source, where, name, "must be one of %s" % ", ".join(
                connection_names()))
    if canonical == "container_engine" and value not in CONTAINER_ENGINES:
        raise InputError(source, where, name, "must be one of %s" % ", ".join(
            sorted(CONTAINER_ENGINES)))
    if canonical == "vllm_url" and not re.match(r"^https?://[^\s/]+", value):
        raise InputError(source, where, name, "must be an http:// or https:// URL")
    if canonical == "ssh_common_args":
        return "proxy_jump", proxy_jump_from_args(source, where, name, value)
    return canonical, value


def proxy_jump_from_args(source: str, where: str, name: str, value: str) -> str:
    """Only bastions are understood in ansible_ssh_common_args; anything else is refused
    rather than silently ignored."""
    try:
        args = shlex.split(value)
    except ValueError as exc:
        raise InputError(source, where, name, str(exc))
    jump = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-J" and i + 1 < len(args):
            jump, i = args[i + 1], i + 2
        elif arg.startswith("-J"):
            jump, i = arg[2:], i + 1
        elif arg == "-o" and i + 1 < len(args) and args[i + 1].lower().startswith("proxyjump="):
            jump, i = args[i + 1].split("=", 1)[1], i + 2
        elif arg.lower().startswith("-oproxyjump="):
            jump, i = arg.split("=", 1)[1], i + 1
        else:
            raise InputError(source, where, name,
                             "only -J / -o ProxyJump=... are supported, got %r" % arg)
    if not jump:
        raise InputError(source, where, name, "no -J bastion given")
    return jump


def check_vars(source: str, where: str, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(source, where, "vars", "must be a mapping")
    merged: dict[str, Any] = {}
    for name, value in raw.items():
        canonical, checked = check_var(source, where, str(name), value)
        merged[canonical] = checked
    return merged


@dataclass
class _Collected:
    # host name -> list of (depth, group, vars) applying to it, host vars last
    layers: dict[str, list[tuple[int, str, dict[str, Any]]]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    groups: dict[str, set[str]] = field(default_factory=dict)


def walk_group(source: str, name: str, body: Any, depth: int, inherited: list[tuple[int, str, dict]],
               out: _Collected, path: tuple[str, ...]) -> None:
    where = "group '%s'" % name
    if name in path:
        raise InputError(source, where, "children", "group contains itself")
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InputError(source, where, None, "must be a mapping with hosts/children/vars")
    for key in body:
        if key not in GROUP_KEYS:
            raise InputError(source, where, str(key),
                             "unknown key; a group has only hosts, children and vars")
    layers = inherited + [(depth, name, check_vars(source, where, body.get("vars")))]
    out.groups.setdefault(name, set())
    hosts = body.get("hosts") or {}
    if not isinstance(hosts, dict):
        raise InputError(source, where, "hosts", "must be a mapping of host names")
    for pattern, host_vars in hosts.items():
        pattern = str(pattern)
        host_where = "host '%s'" % pattern
        checked = check_vars(source, host_where, host_vars)
        for host_name in expand_host_pattern(pattern, source):
            if host_name not in out.layers:
                out.layers[host_name] = []
                out.order.append(host_name)
            out.layers[host_name].extend(layers)
            out.layers[host_name].append((10**6, host_name, checked))
            for _, group, _ in layers:
                out.groups[group].add(host_name)
    children = body.get("children") or {}
    if not isinstance(children, dict):
        raise InputError(source, where, "children", "must be a mapping of group names")
    for child, child_body in children.items():
        walk_group(source, str(child), child_body, depth + 1, layers, out, path + (name,))


def load_inventory(path: str) -> list[Host]:
    """Every host of the inventory file, vars merged (all < parent < child < host)."""
    data = read_yaml(path)
    return parse_inventory(data, path)


def parse_inventory(data: Any, source: str) -> list[Host]:
    if data is None:
        raise InputError(source, None, None, "inventory is empty")
    if not isinstance(data, dict):
        raise InputError(source, None, None, "inventory must be a mapping (all: hosts: ...)")
    out = _Collected()
    top = dict(data)
    all_body = top.pop("all", None)
    if all_body is not None or not top:
        walk_group(source, "all", all_body, 0, [], out, ())
    for name, body in top.items():
        walk_group(source, str(name), body, 1, [], out, ())
    if not out.order:
        raise InputError(source, None, "hosts", "inventory defines no hosts")
    hosts = []
    for name in out.order:
        merged: dict[str, Any] = {}
        for _, _, values in sorted(out.layers[name], key=lambda layer: (layer[0], layer[1])):
            merged.update(values)
        groups = sorted(g for g, members in out.groups.items() if name in members and g != "all")
        hosts.append(build_host(source, name, merged, groups))
    return hosts


def build_host(source: str, name: str, merged: dict[str, Any], groups: list[str]) -> Host:
    host = Host(name=name, address=merged.pop("address", name), groups=groups)
    for key, value in merged.items():
        setattr(host, key, value)
    if host.connection == "ssh" and host.address.startswith("-"):
        raise InputError(source, "host '%s'" % name, "ansible_host",
                         "an address may not start with '-'")
    return host


def apply_limit(hosts: list[Host], limit: str | None, source: str) -> list[Host]:
    """Ansible-like --limit: comma/colon separated host or group globs, '!' to exclude."""
    if not limit:
        return hosts
    parts = [p.strip() for p in re.split(r"[,:]", limit) if p.strip()]
    include = [p for p in parts if not p.startswith("!")]
    exclude = [p[1:] for p in parts if p.startswith("!")]

    def matches(host: Host, pattern: str) -> bool:
        names = [host.name] + host.groups + ["all"]
        return any(fnmatch.fnmatchcase(n, pattern) for n in names)

    chosen = [h for h in hosts
              if (not include or any(matches(h, p) for p in include))
              and not any(matches(h, p) for p in exclude)]
    if not chosen:
        raise InputError(source, None, "--limit", "pattern %r matches no host or group" % limit)
    return chosen
