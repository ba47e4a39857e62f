"""Ansible's YAML inventory format (JSON is the same format in JSON syntax), read as
Ansible's yaml plugin reads it: top-level keys are groups, each with `hosts`, `children`
and `vars`; a host key may carry a range or a port.

Where Ansible only warns and skips (a group key that is not hosts/children/vars, a group
that is not a mapping), fleetcheck refuses: a typo such as `hostz:` would otherwise drop
hosts from a pre-rollout check without anyone noticing.
"""

from __future__ import annotations

from typing import Any

import yaml

from fleetcheck.input_error import InputError
from fleetcheck.inventory.hostnames import expand_host_entry
from fleetcheck.inventory.model import InventoryData
from fleetcheck.yamlfile import SAFE_LOADER, yaml_problem

GROUP_KEYS = ("vars", "children", "hosts")


class Vaulted(str):
    """An `!vault` value: fleetcheck cannot decrypt it, so it may not be one of the
    variables fleetcheck uses (others are ignored like any unrelated variable)."""


class InventoryLoader(SAFE_LOADER):  # type: ignore[misc, valid-type]
    """The safe loader plus Ansible's own tags, so inventories using them still load."""


InventoryLoader.add_constructor(
    "!vault", lambda loader, node: Vaulted(loader.construct_scalar(node)))
InventoryLoader.add_constructor(
    "!unsafe", lambda loader, node: loader.construct_scalar(node))


def load_yaml_text(path: str, text: str) -> Any:
    try:
        return yaml.load(text, Loader=InventoryLoader)
    except yaml.YAMLError as exc:
        raise InputError(path, None, None, "not valid YAML: %s" % yaml_problem(exc))


def looks_like_yaml_inventory(data: Any) -> bool:
    """What Ansible's yaml plugin accepts: a mapping of groups (for a file without an
    extension, anything else is left to the INI reader)."""
    return isinstance(data, dict) and bool(data) and all(
        isinstance(body, dict) or body is None for body in data.values())


def parse_yaml_inventory(path: str, data: Any, inventory: InventoryData) -> None:
    if data is None or data == {}:
        raise InputError(path, None, None, "inventory is empty")
    if not isinstance(data, dict):
        raise InputError(path, None, None, "inventory must be a mapping of groups "
                         "(all: hosts: ...), got %s" % type(data).__name__)
    if data.get("plugin"):
        raise InputError(path, None, "plugin",
                         "inventory plugin configurations (plugin: %s) are not read; export "
                         "the inventory with `ansible-inventory -i %s --list > fleet.json` and "
                         "give fleetcheck that file" % (data["plugin"], path))
    for name, body in data.items():
        _group(path, str(name), body, inventory)


def _group(path: str, name: str, body: Any, inventory: InventoryData) -> str:
    where = "group '%s'" % name
    if body is not None and not isinstance(body, dict):
        raise InputError(path, where, None, "must be a mapping with hosts, children and vars")
    inventory.add_group(name)
    for key in body or {}:
        if key not in GROUP_KEYS:
            raise InputError(path, where, str(key),
                             "unknown key; a group has only hosts, children and vars")
    for key in body or {}:  # in the file's order, as Ansible: it decides host order
        section = body[key]
        if isinstance(section, str):
            section = {section: None}
        if section is None:
            continue
        if not isinstance(section, dict):
            raise InputError(path, where, key, "must be a mapping, got %s"
                             % type(section).__name__)
        if key == "vars":
            for var, value in section.items():
                inventory.set_group_var(name, str(var), value, path)
        elif key == "children":
            for child, child_body in section.items():
                child_name = _group(path, str(child), child_body, inventory)
                inventory.add_child(name, child_name, path)
        else:
            for entry, host_vars in section.items():
                if not isinstance(entry, str):
                    raise InputError(path, where, "hosts", "host %r must be a string: quote "
                                     "numbers" % (entry,))
                host_vars = host_vars or {}
                if not isinstance(host_vars, dict):
                    raise InputError(path, "host '%s'" % entry, None,
                                     "host variables must be a mapping")
                names, port = expand_host_entry(entry, path)
                for host in names:
                    inventory.add_host(host, name, path, port)
                    for var, value in host_vars.items():
                        inventory.set_host_var(host, str(var), value, path)
    return name
