"""Ansible's inventory model: groups in a graph (children, depth, ansible_group_priority),
hosts, their variables, and the order in which those variables merge.

Every format (INI, YAML/JSON, dynamic inventory scripts) fills this one model, so
membership and precedence are Ansible's whatever the source:
all < groups by (depth, ansible_group_priority, name) < group_vars/all files < group_vars
files by the same order < host < host_vars files. Each value remembers the file and the
group or host that set it, so an error can name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple

from fleetcheck.input_error import InputError
from fleetcheck.text import is_clean_name



class Site(NamedTuple):  # NamedTuples: the controller's start-up pays for every dataclass
    """Where a variable was set: the file, and the group or host it was set on."""

    source: str
    where: str


class Setting(NamedTuple):
    value: Any
    site: Site


@dataclass
class Group:
    name: str
    vars: dict[str, Setting] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    priority: int = 1
    depth: int = 0


@dataclass
class InventoryHost:
    name: str
    vars: dict[str, Setting] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)  # where it is listed directly


class VarsFile(NamedTuple):
    """One group_vars/host_vars file, read: its variables apply to one group or host."""

    path: str
    values: dict[str, Any]


class InventoryData:
    """What every source adds to; `merged_vars` answers with Ansible's precedence."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.hosts: dict[str, InventoryHost] = {}
        # (source directory order) -> name -> files, for group_vars and host_vars
        self.group_files: list[dict[str, list[VarsFile]]] = []
        self.host_files: list[dict[str, list[VarsFile]]] = []
        self.warnings: list[str] = []  # what the inventory holds that nothing reads
        for name in ("all", "ungrouped"):
            self.add_group(name)
        self.add_child("all", "ungrouped", "inventory")

    def add_group(self, name: str) -> Group:
        if name not in self.groups:
            self.groups[name] = Group(name)
        return self.groups[name]

    def add_host(self, name: str, group: str | None, source: str,
                 port: int | None = None) -> InventoryHost:
        """A port given with the host (`gpu1:2222`) counts only where the host first
        appears, as in Ansible."""
        host = self.hosts.get(name)
        if host is None:
            if not is_clean_name(name):  # it reaches terminals, logs and ssh
                raise InputError(source, "host %r" % name, None,
                                 "a host name may not contain control characters")
            host = self.hosts[name] = InventoryHost(name)
            if port:
                self.set_host_var(name, "ansible_port", port, source)
        if group is not None and group not in host.groups:
            self.add_group(group).hosts.append(name)
            host.groups.append(group)
        return host

    def add_child(self, parent: str, child: str, source: str) -> None:
        parent_group, child_group = self.add_group(parent), self.add_group(child)
        if child in self.ancestors(parent) | {parent}:
            raise InputError(source, "group '%s'" % parent, "children",
                             "group '%s' would contain itself" % child)
        if child not in parent_group.children:
            parent_group.children.append(child)
            child_group.parents.append(parent)

    def set_group_var(self, group: str, name: str, value: Any, source: str) -> None:
        target = self.add_group(group)
        if name == "ansible_group_priority":
            try:
                target.priority = int(value)
            except (TypeError, ValueError):
                raise InputError(source, "group '%s'" % group, name, "must be an integer")
            return
        target.vars[name] = Setting(value, Site(source, "group '%s'" % group))

    def set_host_var(self, host: str, name: str, value: Any, source: str) -> None:
        self.hosts[host].vars[name] = Setting(value, Site(source, "host '%s'" % host))

    def ancestors(self, group: str) -> set[str]:
        seen: set[str] = set()
        todo = list(self.groups[group].parents) if group in self.groups else []
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(self.groups[name].parents)
        return seen

    def reconcile(self) -> None:
        """Ansible's reconcile_inventory: every group without a parent goes under all, a
        host in no other group is in `ungrouped`; then depths (longest path from all)."""
        for name, group in self.groups.items():
            if name != "all" and not group.parents:
                self.add_child("all", name, "inventory")
        ungrouped = self.groups["ungrouped"]
        for host in self.hosts.values():
            listed = set(host.groups) - {"all", "ungrouped"}
            if listed and "ungrouped" in host.groups:
                host.groups.remove("ungrouped")
                ungrouped.hosts.remove(host.name)
            elif not listed and "ungrouped" not in host.groups:
                host.groups.append("ungrouped")
                ungrouped.hosts.append(host.name)
        order = self._topological()
        for name in order:
            group = self.groups[name]
            group.depth = max([self.groups[p].depth + 1 for p in group.parents], default=0)

    def _topological(self) -> list[str]:
        order: list[str] = []
        placed: set[str] = set()
        pending = list(self.groups)
        while pending:
            rest = [n for n in pending if not set(self.groups[n].parents) <= placed]
            for name in pending:
                if name not in rest:
                    order.append(name)
                    placed.add(name)
            if len(rest) == len(pending):  # add_child refuses cycles; defensive
                raise InputError("inventory", "group '%s'" % rest[0], "children",
                                 "groups contain each other")
            pending = rest
        return order

    def host_groups(self, host: str) -> list[str]:
        """Every group the host is in, directly or through children (all included)."""
        names: set[str] = set()
        for group in self.hosts[host].groups:
            names.add(group)
            names |= self.ancestors(group)
        return sorted(names)

    def sorted_groups(self, names: list[str]) -> list[Group]:
        groups = [self.groups[n] for n in names]
        return sorted(groups, key=lambda g: (g.depth, g.priority, g.name))

    def layers(self, host: str) -> Iterator[dict[str, Setting]]:
        """The variable layers of one host, lowest precedence first."""
        groups = self.sorted_groups([g for g in self.host_groups(host) if g != "all"])
        yield self.groups["all"].vars
        for group in groups:
            yield group.vars
        for files in self.group_files:
            for vars_file in files.get("all", []):
                yield _file_layer(vars_file, "group 'all'")
        for files in self.group_files:
            for group in groups:
                for vars_file in files.get(group.name, []):
                    yield _file_layer(vars_file, "group '%s'" % group.name)
        yield self.hosts[host].vars
        for files in self.host_files:
            for vars_file in files.get(host, []):
                yield _file_layer(vars_file, "host '%s'" % host)

    def merged_vars(self, host: str) -> dict[str, Setting]:
        merged: dict[str, Setting] = {}
        for layer in self.layers(host):
            merged.update(layer)
        return merged

    def definitions(self) -> Iterator[tuple[str, Site]]:
        """Every variable name where it was written, used by a host or not."""
        for group in self.groups.values():
            for name, setting in group.vars.items():
                yield name, setting.site
        for host in self.hosts.values():
            for name, setting in host.vars.items():
                yield name, setting.site
        for kind, collections in (("group", self.group_files), ("host", self.host_files)):
            for files in collections:
                for owner, vars_files in files.items():
                    for vars_file in vars_files:
                        for name in vars_file.values:
                            yield name, Site(vars_file.path, "%s '%s'" % (kind, owner))


def _file_layer(vars_file: VarsFile, where: str) -> dict[str, Setting]:
    site = Site(vars_file.path, where)
    return {name: Setting(value, site) for name, value in vars_file.values.items()}
