"""fleetcheck's hosts from Ansible inventories: which variables it uses, how it checks them,
and the Host each inventory host becomes.

The sources are read as Ansible reads them (sources.py and the readers it picks);
here only the variables fleetcheck uses count. Every other variable is ignored, since real
inventories serve many playbooks, except names that look like a typo of fleetcheck's own
(`venvv`, `site_package`) or that carry the `fleetcheck_` prefix without being one of its
variables: those are refused, naming file, host or group, and field, so a typo can never
silently check the wrong path.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import urlsplit

from fleetcheck.input_error import InputError
from fleetcheck.inventory.limit import select_hosts
from fleetcheck.inventory.model import Setting
from fleetcheck.inventory.proxy_jump import Route, parse_route
from fleetcheck.inventory.script import DEFAULT_SCRIPT_TIMEOUT
from fleetcheck.inventory.sources import load_sources
from fleetcheck.inventory.templates import host_context, is_template, render
from fleetcheck.inventory.yaml_format import Vaulted
from fleetcheck.text import is_clean_name, is_int, is_number

# fleetcheck's short names -> the field they set; each is also accepted as fleetcheck_NAME
OWN_NAMES = {
    "host": "address", "port": "port", "user": "user", "key": "key",
    "connection": "connection", "python": "python", "venv": "venv",
    "site_packages": "site_packages", "vllm_url": "vllm_url", "proxy_jump": "proxy_jump",
    "timeout": "timeout", "smoke": "smoke", "become": "become", "become_user": "become_user",
    "expect_version": "expect_version", "expect_commit": "expect_commit",
    "expect_drafter": "expect_drafter",
    "container": "container", "container_engine": "container_engine",
    "container_user": "container_user", "containerd_namespace": "containerd_namespace",
    "containerd_address": "containerd_address",
}
ANSIBLE_NAMES = {
    "ansible_host": "address", "ansible_ssh_host": "address",
    "ansible_port": "port", "ansible_ssh_port": "port",
    "ansible_user": "user", "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "key", "ansible_private_key_file": "key",
    "ansible_connection": "connection", "ansible_python_interpreter": "python",
    "ansible_ssh_common_args": "ssh_common_args",
    "ansible_become": "become", "ansible_become_user": "become_user",
    "ansible_become_method": "become_method",
}
# Accepted var names -> the canonical field they set.
VAR_ALIASES = {**ANSIBLE_NAMES, **OWN_NAMES,
               **{"fleetcheck_" + name: canonical for name, canonical in OWN_NAMES.items()}}
# Names too generic to guess typos of (`env`, `users`, `ports` are other playbooks' vars);
# the rest are fleetcheck's own words.
TYPO_TARGETS = ("venv", "site_packages", "vllm_url", "proxy_jump", "smoke", "become_user",
                "container", "container_engine", "container_user", "containerd_namespace",
                "containerd_address", "python", "connection",
                "expect_version", "expect_commit", "expect_drafter")
# Other playbooks' words a typo target is one letter from: never a typo of fleetcheck's
NOT_TYPOS = frozenset({"containers", "connections", "pythons", "venvs"})
# Everyday words among the targets, whose neighbours are other words (`collection`,
# `containerd`): one edit from them is a typo, two are not
COMMON_WORDS = frozenset({"connection", "container", "python"})
# Ansible's other connection and become variables (its docs, ansible-core 2.15+): names
# fleetcheck does not read but an inventory may well set, never a typo of one it reads
OTHER_ANSIBLE_NAMES = frozenset({
    "ansible_password", "ansible_ssh_pass", "ansible_ssh_password",
    "ansible_become_password", "ansible_become_pass", "ansible_become_exe",
    "ansible_become_flags", "ansible_shell_type", "ansible_shell_executable",
    "ansible_ssh_extra_args", "ansible_sftp_extra_args", "ansible_scp_extra_args",
    "ansible_ssh_executable", "ansible_ssh_pipelining", "ansible_pipelining",
    "ansible_ssh_transfer_method", "ansible_host_key_checking",
    "ansible_ssh_host_key_checking", "ansible_timeout", "ansible_ssh_timeout",
    "ansible_ssh_retries", "ansible_remote_tmp", "ansible_module_compression",
    "ansible_network_os", "ansible_docker_extra_args", "ansible_ssh_use_tty",
    "ansible_ssh_password_mechanism", "ansible_private_key_passphrase",
    # Ansible's older become spellings
    "ansible_su", "ansible_su_user", "ansible_su_pass", "ansible_su_exe", "ansible_su_flags",
    "ansible_sudo", "ansible_sudo_user", "ansible_sudo_pass", "ansible_sudo_exe",
    "ansible_sudo_flags",
})
OWN_PREFIX = "fleetcheck_"
PATH_FIELDS = {"key", "python", "venv", "site_packages"}
CONTAINER_FIELDS = {"container", "container_engine", "containerd_namespace",
                    "containerd_address"}
DEFAULT_VLLM_URL = "http://127.0.0.1:8000"
BOOLEANS_TRUE = {"y", "yes", "on", "1", "true", "t"}
BOOLEANS_FALSE = {"n", "no", "off", "0", "false", "f"}


@dataclass
class Host:
    """One host of the inventory, with its vars merged and checked. A connection setting
    the inventory does not give is None, never a default: ssh_config, then the default,
    fill it when the connector resolves the host (an explicit `ansible_port: 22` beats
    ssh_config's Port; an unset one does not)."""

    name: str
    address: str | None = None  # ansible_host; None: the name is what ssh is given
    port: int | None = None
    user: str | None = None
    key: str | None = None
    connection: str = "ssh"
    venv: str | None = None
    python: str | None = None
    site_packages: str | None = None
    vllm_url: str = DEFAULT_VLLM_URL
    proxy_jump: Route | None = None  # (): `none`, no bastion whatever ssh_config says
    timeout: float | None = None
    smoke: dict[str, Any] = field(default_factory=dict)
    become: bool = False
    become_user: str | None = None
    expect_version: str | None = None  # a PEP 440 specifier, checked by expectations.py
    expect_commit: str | None = None  # a commit prefix, checked by expectations.py
    expect_drafter: str | None = None  # REPO[@REV], checked by drafter_expectations.py
    groups: list[str] = field(default_factory=list)
    container: str | None = None  # a name or id on the box, [NAMESPACE/]POD/CONTAINER, "auto"
    container_engine: str | None = None  # docker | podman | nerdctl | ctr; None: any present
    container_user: str | None = None
    containerd_namespace: str | None = None  # None: k8s.io, then default
    containerd_address: str | None = None  # None: ctr's default socket, then k3s's

    @property
    def destination(self) -> str:
        """The name ssh is given for this host (as Ansible runs `ssh <ansible_host>`),
        and the address results show."""
        return self.address or self.name

    @property
    def interpreter(self) -> str:
        """The Python the probe runs under: the venv's unless one is named; the remote
        side falls back to python3 only when that one cannot be executed."""
        if self.python:
            return self.python
        if self.venv:
            return self.venv.rstrip("/") + "/bin/python"
        return "python3"


# A feature's own check of the variable it reads (`smoke`: the smoke settings), handed in
# by the caller so the inventory never imports a feature; called with the file and the
# group or host that set the value, so its errors name them too.
FeatureCheck = Callable[[str, str, Any], None]


def check_var(source: str, where: str, name: str, value: Any,
              features: Mapping[str, FeatureCheck] = {}) -> tuple[str, Any]:
    """The field a variable fleetcheck uses sets, and its checked value."""
    canonical = VAR_ALIASES[name]
    if isinstance(value, Vaulted):
        raise InputError(source, where, name, "is vault-encrypted; fleetcheck cannot decrypt "
                         "it: set this variable in clear text")
    if canonical == "port":
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if not is_int(value) or not 0 < value < 65536:
            raise InputError(source, where, name, "must be a port number 1-65535, got %r"
                             % (value,))
        return canonical, value
    if canonical == "become":
        return canonical, ansible_boolean(source, where, name, value)
    if canonical == "smoke":
        if not isinstance(value, dict):
            raise InputError(source, where, "smoke", "must be a mapping")
        if "smoke" in features:
            features["smoke"](source, where, value)
        return canonical, dict(value)
    if canonical == "timeout":
        if isinstance(value, str) and re.fullmatch(r"[0-9]+(\.[0-9]*)?", value.strip()):
            value = float(value)  # INI [g:vars] "30.5", a template's "{{ 30 * 2 }}"
        if not is_number(value) or value <= 0:
            raise InputError(source, where, name, "must be a positive number of seconds")
        return canonical, float(value)
    if not isinstance(value, str) or not value:
        raise InputError(source, where, name, "must be a non-empty string, got %r" % (value,))
    if not is_clean_name(value):
        raise InputError(source, where, name, "contains control characters")
    if canonical in PATH_FIELDS and not (value.startswith("/") or value.startswith("~")
                                          or (canonical == "python" and "/" not in value)):
        raise InputError(source, where, name, "must be an absolute path, got %r" % value)
    if canonical == "connection":
        from fleetcheck.connectors import connection_names  # one module per connection
        if value not in connection_names():
            raise InputError(source, where, name, "must be one of %s, got %r" % (
                ", ".join(connection_names()), value))
    if canonical in CONTAINER_FIELDS:
        from fleetcheck.connectors.container import container_var_problem
        problem = container_var_problem(canonical, value)
        if problem:
            raise InputError(source, where, name, problem)
    if canonical == "vllm_url":
        problem = url_problem(value)
        if problem:
            raise InputError(source, where, name, "%r %s" % (value, problem))
    if canonical == "ssh_common_args":
        jump = proxy_jump_from_args(source, where, name, value)
        return "proxy_jump", None if jump is None else checked_route(source, where, name, jump)
    if canonical == "proxy_jump":
        return canonical, checked_route(source, where, name, value)
    return canonical, value


def url_problem(url: str) -> str | None:
    """What makes a vllm_url unusable, or None: http(s), a host, a port 1-65535 or none
    (a bad port would otherwise be read as some default)."""
    if any(c.isspace() for c in url):
        return "contains white space"
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unbalanced [ ] of an IPv6 address
        return "is not a URL (%s)" % exc
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "names no host"
    try:
        port = parts.port
    except ValueError:
        return "has a port that is not a number 1-65535"
    if port == 0:
        return "has port 0 (give 1-65535 or none)"
    return None


def checked_route(source: str, where: str, name: str, spec: str) -> Route:
    try:
        return parse_route(spec)
    except ValueError as exc:
        raise InputError(source, where, name, "ProxyJump %r: %s" % (spec, exc))


# ssh options that change neither where fleetcheck connects nor whom it trusts, so a
# shared inventory's common args can keep them: host keys are verified whatever
# StrictHostKeyChecking says (an unknown key names --host-key-policy accept-new).
IGNORED_SSH_OPTIONS = {"stricthostkeychecking", "userknownhostsfile", "serveraliveinterval",
                       "serveralivecountmax", "controlmaster", "controlpersist",
                       "controlpath", "connecttimeout", "compression", "loglevel",
                       "identitiesonly", "forwardagent", "tcpkeepalive"}
IGNORED_SSH_FLAGS = {"-q", "-C", "-A", "-T", "-4"}


def proxy_jump_from_args(source: str, where: str, name: str, value: str) -> str | None:
    """The bastion in ansible_ssh_common_args (-J, -o ProxyJump=), if any. Options that do
    not change where or how fleetcheck connects are ignored; anything else (ProxyCommand,
    a port, a key) is refused rather than silently dropped."""
    try:
        args = shlex.split(value)
    except ValueError as exc:
        raise InputError(source, where, name, str(exc))
    jump = None
    i = 0

    def once(spec: str) -> str:
        if jump is not None:  # ssh itself refuses a second -J
            raise InputError(source, where, name, "a bastion is given twice (%r and %r): "
                             "give one route, its hops separated by commas" % (jump, spec))
        return spec
    while i < len(args):
        arg = args[i]
        if arg == "-J" and i + 1 < len(args):
            jump, i = once(args[i + 1]), i + 2
            continue
        if arg.startswith("-J") and len(arg) > 2:
            jump, i = once(arg[2:]), i + 1
            continue
        if arg in IGNORED_SSH_FLAGS:
            i += 1
            continue
        if arg.startswith("-o"):
            option = arg[2:] if len(arg) > 2 else (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if len(arg) > 2 else 2
            key, _, setting = option.replace(" ", "=", 1).partition("=")
            if key.lower() == "proxyjump" and setting:
                jump = once(setting)
                continue
            if key.lower() in IGNORED_SSH_OPTIONS:
                continue
            arg = "-o " + option
        raise InputError(source, where, name, "only a bastion (-J / -o ProxyJump=...) and "
                         "options that do not change the connection (%s) are supported, got %r"
                         % (", ".join(sorted(IGNORED_SSH_OPTIONS)), arg))
    return jump


def ansible_boolean(source: str, where: str, name: str, value: Any) -> bool:
    """Ansible's boolean(): true/yes/on/1/t/y (any case), bools and 0/1."""
    if isinstance(value, bool):
        return value
    normalized = value.strip().lower() if isinstance(value, str) else value
    if normalized in BOOLEANS_TRUE or normalized in (1, 1.0):
        return True
    if normalized in BOOLEANS_FALSE or normalized in (0, 0.0):
        return False
    raise InputError(source, where, name, "must be a boolean (true/false, yes/no), got %r"
                     % (value,))


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and
    swaps of neighbours each count 1 (`vnev` is one step from `venv`)."""
    rows = [list(range(len(b) + 1))] + [[i] + [0] * len(b) for i in range(1, len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[len(a)][len(b)]


@lru_cache(maxsize=4096)
def near_miss(name: str) -> str | None:
    """The fleetcheck variable this unknown name is probably a typo of, or None when it
    is simply another playbook's variable. Cached: a big inventory repeats its names."""
    if name.startswith(OWN_PREFIX):
        bare = name[len(OWN_PREFIX):]
        best = min(OWN_NAMES, key=lambda known: edit_distance(bare.lower(), known))
        return OWN_PREFIX + best if edit_distance(bare.lower(), best) <= 3 else ""
    if len(name) < 4:
        return None
    lowered = name.lower().replace("-", "_")
    prefix, _, rest = lowered.partition("_")
    if rest and prefix != "ansible" and edit_distance(prefix, "ansible") <= 2:
        # `ansibel_user`, `ansbile_port`: the prefix misspelt
        return closest_ansible_name("ansible_" + rest)
    if lowered.startswith("ansible_"):
        if lowered in OTHER_ANSIBLE_NAMES or lowered.startswith(("ansible_kubectl_",
                                                                 "ansible_docker_")):
            return None
        return closest_ansible_name(lowered)
    if lowered in NOT_TYPOS:
        return None
    for target in TYPO_TARGETS:
        suffix = lowered[len(target):] if lowered.startswith(target) else None
        if suffix and (suffix.isdigit() or suffix in ("d", "s")):
            continue  # python3, venv2, containerd: other words, not a typo of this one
        limit = 1 if len(target) <= 6 or target in COMMON_WORDS else 2
        if abs(len(lowered) - len(target)) <= limit and edit_distance(lowered, target) <= limit:
            return target
    return None


def closest_ansible_name(lowered: str) -> str | None:
    """The Ansible connection variable fleetcheck reads that is two edits or fewer away."""
    best = min(ANSIBLE_NAMES, key=lambda known: edit_distance(lowered, known))
    return best if edit_distance(lowered, best) <= 2 else None


def check_name(source: str, where: str, name: str) -> None:
    """Refuse typos of fleetcheck's variables and unknown fleetcheck_ names; ignore the
    rest (other playbooks' variables)."""
    if name in VAR_ALIASES:
        return
    guess = near_miss(name)
    if guess is None:
        return
    if guess:
        raise InputError(source, where, name, "unknown variable: did you mean %s?" % guess)
    raise InputError(source, where, name, "unknown fleetcheck variable; fleetcheck_ names "
                     "are: %s" % ", ".join(sorted(OWN_PREFIX + n for n in OWN_NAMES)))


# When several spellings of one field are set for a host, the most specific wins, at
# whatever level each was set: fleetcheck_NAME, then Ansible's ansible_*, then the short
# name (which other playbooks may use for something else, e.g. an application `port`).
def spelling_rank(name: str) -> int:
    if name.startswith(OWN_PREFIX):
        return 0
    return 1 if name.startswith("ansible_") else 2


# Ansible's password variables: fleetcheck logs in with keys and the agent only, and its
# become never types a password (sudo -n), so these are said to be ignored, once
PASSWORD_NAMES = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password",
                  "ansible_become_password", "ansible_become_pass")


@dataclass
class Inventory:
    """The hosts fleetcheck checks, every group name (for --limit), and notes for the
    user on what the inventory sets that fleetcheck does not use."""

    hosts: list[Host]
    groups: list[str]
    notes: list[str] = field(default_factory=list)


def read_inventory(sources: list[str], script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
                   features: Mapping[str, FeatureCheck] = {}) -> Inventory:
    """Every host of the sources, merged as Ansible merges them, as fleetcheck Hosts.
    features: the checks of feature variables (see FeatureCheck)."""
    data = load_sources(sources, script_timeout)
    label = ", ".join(sources)
    passwords: dict[str, list[str]] = {}
    for name, site in data.definitions():
        check_name(site.source, site.where, name)
        if name in PASSWORD_NAMES:
            passwords.setdefault(name, []).append("%s %s" % (site.source, site.where))
    if not data.hosts:
        raise InputError(label, None, "hosts", "inventory defines no hosts")
    hosts = [host_from_vars(name, data.merged_vars(name),
                            [g for g in data.host_groups(name) if g not in ("all", "ungrouped")],
                            features)
             for name in data.hosts]
    notes = ["password auth is not supported: %s ignored (set in %s%s); fleetcheck logs in "
             "with keys and the agent, and become runs sudo -n" % (
                 name, places[0], " and %d more places" % (len(places) - 1)
                 if len(places) > 1 else "") for name, places in passwords.items()]
    return Inventory(hosts, sorted(data.groups), notes)


def load_inventory(sources: str | list[str], script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
                   features: Mapping[str, FeatureCheck] = {}) -> list[Host]:
    """Every host of the inventory (one source, or several merged in order)."""
    return read_inventory([sources] if isinstance(sources, str) else sources,
                          script_timeout, features).hosts


def host_from_vars(name: str, merged: dict[str, Setting], groups: list[str],
                   features: Mapping[str, FeatureCheck] = {}) -> Host:
    """The Host for one inventory host, from its merged variables (templates in the ones
    fleetcheck uses evaluated, each value checked where it was set)."""
    chosen: dict[str, tuple[int, str, Setting]] = {}
    for var, setting in merged.items():
        canonical = VAR_ALIASES.get(var)
        if canonical is None:
            continue
        rank = spelling_rank(var)
        if canonical not in chosen or rank < chosen[canonical][0]:
            chosen[canonical] = (rank, var, setting)
    fields: dict[str, Any] = {}
    sites: dict[str, Any] = {}
    context: dict[str, Any] | None = None
    for canonical, (_, var, setting) in chosen.items():
        site, value = setting.site, setting.value
        if is_template(value):
            if context is None:
                context = host_context(name, {k: s.value for k, s in merged.items()},
                                       groups or ["ungrouped"])
            value = render(value, context, site, var)
        field_name, value = check_var(site.source, site.where, var, value, features)
        if field_name == "proxy_jump" and ("proxy_jump" in chosen and canonical != "proxy_jump"
                                           or value is None):
            continue  # an explicit proxy_jump beats one read from ssh common args
        fields[field_name] = value
        sites[field_name] = (site, var)
    method = fields.pop("become_method", "sudo")
    if fields.get("become") and method != "sudo":
        site, var = sites["become_method"]
        raise InputError(site.source, site.where, var, "become is on and only sudo is "
                         "supported, got %r" % method)
    host = Host(name=name, groups=groups)
    for key, value in fields.items():
        setattr(host, key, value)
    if host.connection == "ssh" and host.destination.startswith("-"):
        site, var = sites.get("address", (None, "ansible_host"))
        raise InputError(site.source if site else "inventory", "host '%s'" % name, var,
                         "an address may not start with '-'")
    return host


def apply_limit(hosts: list[Host], limit: str | None, source: str,
                groups: Iterable[str] = ()) -> list[Host]:
    """Ansible's --limit (see limit.py); hosts keep inventory order. groups: every
    group name, empty ones included (the hosts' own groups are always known)."""
    if not limit:
        return hosts
    known = set(groups).union(*(h.groups for h in hosts))
    return select_hosts(hosts, limit, source, known)
