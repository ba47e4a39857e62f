"""fleetcheck's hosts from Ansible inventories: which variables it uses, how it checks them,
and the Host each inventory host becomes.

The sources are read as Ansible reads them (sources.py and the readers it picks);
here only the variables fleetcheck uses count: its own (below) and those each connection
declares (fleetcheck.variables), handed in by the caller, since the inventory knows no
connector. Every other variable is ignored, since real inventories serve many playbooks,
except names that look like a typo of a declared one (`venvv`, `ansible_kubectl_pdo`) or
that carry the `fleetcheck_` prefix without being one: those are refused, naming file,
host or group, and field, so a typo can never silently check the wrong path.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, NamedTuple
from urllib.parse import urlsplit

from fleetcheck.addresses import Route
from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.input_error import InputError, raise_all
from fleetcheck.inventory.limit import select_hosts
from fleetcheck.inventory.model import Setting
from fleetcheck.inventory.script import DEFAULT_SCRIPT_TIMEOUT
from fleetcheck.inventory.sources import load_sources
from fleetcheck.inventory.templates import host_context, is_template, render
from fleetcheck.inventory.yaml_format import Vaulted
from fleetcheck.variables import Declarations, Variable, boolean, path, positive_seconds, text

# Ansible's connection and become variables (its docs, ansible-core 2.15+) that no
# fleetcheck connection reads but an inventory may well set: never a typo of one it reads
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
# Ansible's names for the connections fleetcheck has (fully qualified, as the k8s inventory
# plugin writes them; `smart` and paramiko are Ansible's ways of running ssh)
ANSIBLE_CONNECTIONS = {
    "ansible.builtin.ssh": "ssh", "ansible.legacy.ssh": "ssh", "smart": "ssh",
    "paramiko": "ssh", "paramiko_ssh": "ssh", "ansible.builtin.paramiko_ssh": "ssh",
    "ansible.legacy.paramiko_ssh": "ssh",
    "ansible.builtin.local": "local", "ansible.legacy.local": "local",
    "kubernetes.core.kubectl": "kubectl", "community.kubernetes.kubectl": "kubectl"}
DEFAULT_VLLM_URL = "http://127.0.0.1:8000"


class Origin(NamedTuple):
    """Where one of a host's settings was set: the file, the group or host it was set on
    there, and the variable as the user wrote it (`ansible_ssh_private_key_file`)."""

    source: str
    where: str
    variable: str


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
    waive: dict[str, Any] | None = None  # check id -> {reason, until}, checked by waivers.py
    groups: list[str] = field(default_factory=list)
    container: str | None = None  # a name or id on the box, [NAMESPACE/]POD/CONTAINER, "auto"
    container_engine: str | None = None  # docker | podman | nerdctl | ctr; None: any present
    container_user: str | None = None
    containerd_namespace: str | None = None  # None: k8s.io, then default
    containerd_address: str | None = None  # None: ctr's default socket, then k3s's
    # what other connections' declared variables set (ansible_kubectl_pod -> kubectl_pod)
    settings: dict[str, Any] = field(default_factory=dict)
    # each setting given -> where it was set and the variable as written there, so a check
    # made after reading (a key file, an expected build) names them, not the host alone
    origins: dict[str, Origin] = field(default_factory=dict, compare=False, repr=False)

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

    def connection_settings(self) -> ConnectionSettings:
        """What a connector and the wire protocol are given of this host: how to reach
        it and run the probe, never the inventory's model."""
        return ConnectionSettings(
            name=self.name, connection=self.connection, address=self.address,
            port=self.port, user=self.user, key=self.key, proxy_jump=self.proxy_jump,
            interpreter=self.interpreter, become=self.become, become_user=self.become_user,
            container=self.container, container_engine=self.container_engine,
            container_user=self.container_user,
            containerd_namespace=self.containerd_namespace,
            containerd_address=self.containerd_address, settings=dict(self.settings))


HOST_FIELDS = frozenset(f.name for f in fields(Host)) - {"origins"}


# Ansible's interpreter discovery words: the interpreter is found, not named
DISCOVERY = frozenset({"auto", "auto_silent", "auto_legacy", "auto_legacy_silent"})


def python_interpreter(value: Any) -> str | None:
    """An absolute path, or a bare command found on the host's PATH (`python3.11`).
    Ansible's discovery words (`auto`, `auto_silent`, ...) name none: None, so fleetcheck
    finds it as for a host that sets nothing (the venv's, else python3)."""
    value = text(value)
    if value in DISCOVERY:
        return None
    return value if "/" not in value else path(value)


def url(value: Any) -> str:
    value = text(value)
    problem = url_problem(value)
    if problem:
        raise ValueError("%r %s" % (value, problem))
    return value


def mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a mapping")
    return dict(value)


# fleetcheck's own variables: what to probe and what to expect, whatever the connection
CORE_VARIABLES = (
    Variable("connection", ("connection", "ansible_connection"), common_word=True,
             not_typos=("connections",)),
    Variable("python", ("python", "ansible_python_interpreter"), python_interpreter,
             common_word=True, not_typos=("pythons",)),
    Variable("venv", ("venv",), path, not_typos=("venvs",)),
    Variable("site_packages", ("site_packages",), path),
    Variable("vllm_url", ("vllm_url",), url),
    Variable("timeout", ("timeout",), positive_seconds, typo_guard=False),
    Variable("smoke", ("smoke",), mapping),
    Variable("become", ("become", "ansible_become"), boolean, typo_guard=False),
    Variable("become_user", ("become_user", "ansible_become_user")),
    Variable("become_method", ("ansible_become_method",)),
    Variable("expect_version", ("expect_version",)),
    Variable("expect_commit", ("expect_commit",)),
    Variable("expect_drafter", ("expect_drafter",)),
    Variable("waive", ("waive",), mapping),
)


# A feature's own check of the variable it reads (`smoke`: the smoke settings), handed in
# by the caller so the inventory never imports a feature; called with the file and the
# group or host that set the value, so its errors name them too.
FeatureCheck = Callable[[str, str, Any], None]


def spellings(variable: Variable) -> list[str]:
    """Every name that sets the variable: its own, and fleetcheck_NAME for short ones."""
    return list(variable.names) + [OWN_PREFIX + name for name in variable.names
                                   if not name.startswith("ansible_")]


class VariableTable:
    """The variables fleetcheck reads (its own and the connections' declared ones) by
    name, with the typo guard over them."""

    def __init__(self, declarations: Declarations):
        self.connections = declarations.connections
        self.by_name: dict[str, Variable] = {}
        for variable in CORE_VARIABLES + tuple(declarations.variables):
            for name in spellings(variable):
                known = self.by_name.setdefault(name, variable)
                if known is not variable and known != variable:
                    raise InputError("the connections' declarations", None, name,
                                     "is declared twice, for settings %s and %s"
                                     % (known.setting, variable.setting))
        self.own_names = sorted({n for v in self.by_name.values() for n in v.names
                                 if not n.startswith("ansible_")})
        self.ansible_names = sorted(n for n in self.by_name if n.startswith("ansible_"))
        guarded = [v for v in dict.fromkeys(self.by_name.values()) if v.typo_guard]
        self.typo_targets = [(name, v) for v in guarded for name in v.names
                             if not name.startswith("ansible_")]
        self.not_typos = frozenset(word for v in guarded for word in v.not_typos)
        self._guesses: dict[str, str | None] = {}

    def near_miss(self, name: str) -> str | None:
        """The variable this unknown name is probably a typo of, or None when it is
        simply another playbook's variable. Remembered: a big inventory repeats names."""
        if name not in self._guesses:
            self._guesses[name] = self._near_miss(name)
        return self._guesses[name]

    def _near_miss(self, name: str) -> str | None:
        if name.startswith(OWN_PREFIX):
            bare = name[len(OWN_PREFIX):].lower()
            best = min(self.own_names, key=lambda known: edit_distance(bare, known))
            return OWN_PREFIX + best if edit_distance(bare, best) <= 3 else ""
        if len(name) < 4:
            return None
        lowered = name.lower().replace("-", "_")
        prefix, _, rest = lowered.partition("_")
        if rest and prefix != "ansible" and edit_distance(prefix, "ansible") <= 2:
            # `ansibel_user`, `ansbile_port`: the prefix misspelt
            return self.closest_ansible_name("ansible_" + rest)
        if lowered.startswith("ansible_"):
            if lowered in OTHER_ANSIBLE_NAMES or lowered.startswith("ansible_docker_"):
                return None
            return self.closest_ansible_name(lowered)
        if lowered in self.not_typos:
            return None
        for target, variable in self.typo_targets:
            suffix = lowered[len(target):] if lowered.startswith(target) else None
            if suffix and (suffix.isdigit() or suffix in ("d", "s")):
                continue  # python3, venv2, containerd: other words, not a typo of this one
            limit = 1 if len(target) <= 6 or variable.common_word else 2
            if abs(len(lowered) - len(target)) <= limit and \
                    edit_distance(lowered, target) <= limit:
                return target
        return None

    def closest_ansible_name(self, lowered: str) -> str | None:
        """The Ansible variable fleetcheck reads that is two edits or fewer away, or the
        one name this one is the start of, less its last word (`ansible_ssh_private_key`
        for `ansible_ssh_private_key_file`)."""
        best = min(self.ansible_names, key=lambda known: edit_distance(lowered, known))
        if edit_distance(lowered, best) <= 2:
            return best
        longer = [known for known in self.ansible_names if known.startswith(lowered + "_")
                  and "_" not in known[len(lowered) + 1:]]
        return longer[0] if len(longer) == 1 else None

    def check_name(self, source: str, where: str, name: str) -> None:
        """Refuse typos of declared variables, unknown fleetcheck_ names and variables
        fleetcheck refuses to use; ignore the rest (other playbooks' variables)."""
        variable = self.by_name.get(name)
        if variable is not None:
            if variable.refused:
                raise InputError(source, where, name, variable.refused)
            return
        guess = self.near_miss(name)
        if guess is None:
            return
        if guess:
            raise InputError(source, where, name, "unknown variable: did you mean %s?" % guess)
        raise InputError(source, where, name, "unknown fleetcheck variable; fleetcheck_ names "
                         "are: %s" % ", ".join(OWN_PREFIX + n for n in self.own_names))

    def check_var(self, source: str, where: str, name: str, value: Any,
                  features: Mapping[str, FeatureCheck] = {}) -> tuple[str, Any]:
        """The setting a variable fleetcheck uses fills, and its checked value."""
        variable = self.by_name[name]
        if isinstance(value, Vaulted):
            raise InputError(source, where, name, "is vault-encrypted; fleetcheck cannot "
                             "decrypt it: set this variable in clear text")
        try:
            value = variable.check(value)
        except (ValueError, TypeError) as exc:  # TypeError: a check handed a shape it
            raise InputError(source, where, name, str(exc))  # never expected (a list)
        if variable.setting == "connection" and \
                ANSIBLE_CONNECTIONS.get(value) in self.connections:
            value = ANSIBLE_CONNECTIONS[value]  # kubernetes.core.kubectl: Ansible's full name
        if variable.setting == "connection" and value not in self.connections:
            raise InputError(source, where, name, "must be one of %s, got %r" % (
                ", ".join(self.connections), value))
        if variable.setting in features:
            features[variable.setting](source, where, value)
        return variable.setting, value


@lru_cache(maxsize=8)
def variable_table(declarations: Declarations) -> VariableTable:
    return VariableTable(declarations)


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
    """The hosts fleetcheck checks, every group name (for --limit), notes for the user on
    what the inventory sets that fleetcheck does not use, and warnings on what it holds
    that nothing reads (a vars file of no host or group)."""

    hosts: list[Host]
    groups: list[str]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what it holds that nothing reads


def read_inventory(sources: list[str], script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
                   features: Mapping[str, FeatureCheck] = {}, *,
                   declarations: Declarations) -> Inventory:
    """Every host of the sources, merged as Ansible merges them, as fleetcheck Hosts.
    features: the checks of feature variables (see FeatureCheck); declarations: the
    connections and the variables they read (fleetcheck.connectors.declarations())."""
    table = variable_table(declarations)
    data = load_sources(sources, script_timeout)
    label = ", ".join(sources)
    passwords: dict[str, list[str]] = {}
    errors: list[InputError] = []  # every one is said, in one run
    for name, site in data.definitions():
        try:
            table.check_name(site.source, site.where, name)
        except InputError as exc:
            errors.append(exc)
        if name in PASSWORD_NAMES:
            passwords.setdefault(name, []).append("%s %s" % (site.source, site.where))
    if not data.hosts:
        errors.append(InputError(label, None, "hosts", "inventory defines no hosts"))
    hosts = []
    for name in data.hosts:
        try:
            hosts.append(host_from_vars(
                name, data.merged_vars(name),
                [g for g in data.host_groups(name) if g not in ("all", "ungrouped")],
                features, declarations=declarations))
        except InputError as exc:
            errors.extend(getattr(exc, "errors", [exc]))
    raise_all(errors)
    notes = ["password auth is not supported: %s ignored (set in %s%s); fleetcheck logs in "
             "with keys and the agent, and become runs sudo -n" % (
                 name, places[0], " and %d more places" % (len(places) - 1)
                 if len(places) > 1 else "") for name, places in passwords.items()]
    return Inventory(hosts, sorted(data.groups), notes, data.warnings)


def load_inventory(sources: str | list[str], script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
                   features: Mapping[str, FeatureCheck] = {}, *,
                   declarations: Declarations) -> list[Host]:
    """Every host of the inventory (one source, or several merged in order)."""
    return read_inventory([sources] if isinstance(sources, str) else sources,
                          script_timeout, features, declarations=declarations).hosts


def host_from_vars(name: str, merged: dict[str, Setting], groups: list[str],
                   features: Mapping[str, FeatureCheck] = {}, *,
                   declarations: Declarations) -> Host:
    """The Host for one inventory host, from its merged variables (templates in the ones
    fleetcheck uses evaluated, each value checked where it was set)."""
    table = variable_table(declarations)
    chosen: dict[str, tuple[int, str, Setting]] = {}
    for var, setting in merged.items():
        variable = table.by_name.get(var)
        if variable is None:
            continue
        rank = spelling_rank(var)
        known = chosen.get(variable.setting)
        if known is None or rank < known[0]:
            chosen[variable.setting] = (rank, var, setting)
    values: dict[str, Any] = {}
    sites: dict[str, Any] = {}
    context: dict[str, Any] | None = None
    errors: list[InputError] = []  # every bad value of the host is said, in one run
    for key, (_, var, setting) in chosen.items():
        site, value = setting.site, setting.value
        try:
            if is_template(value):
                if context is None:
                    context = host_context(name, {k: s.value for k, s in merged.items()},
                                           groups or ["ungrouped"])
                value = render(value, context, site, var)
            _, value = table.check_var(site.source, site.where, var, value, features)
        except InputError as exc:
            errors.append(exc)
            continue
        fills = table.by_name[var].fills
        if fills is not None:
            if fills in chosen or value is None:
                continue  # the setting itself, given, beats what stands in for it
            key = fills
        values[key] = value
        sites[key] = (site, var)
    raise_all(errors)
    method = values.pop("become_method", "sudo")
    if values.get("become") and method != "sudo":
        site, var = sites["become_method"]
        raise InputError(site.source, site.where, var, "become is on and only sudo is "
                         "supported, got %r" % method)
    host = Host(name=name, groups=groups)
    for key, value in values.items():
        if value is None:
            continue  # a check's "unset" (Ansible's empty default for a kubectl option)
        if key in HOST_FIELDS:
            setattr(host, key, value)
        else:
            host.settings[key] = value
        site, var = sites[key]
        host.origins[key] = Origin(site.source, site.where, var)
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
