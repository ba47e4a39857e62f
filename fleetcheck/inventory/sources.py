"""Which reader takes an inventory source, and how several sources (`-i a -i b`, or the
files of an inventory directory) merge into one inventory, as Ansible's InventoryManager
does it.

- A directory: every entry, sorted by name, recursively; hidden entries, `group_vars`,
  `host_vars`, `vars_plugins` and Ansible's ignored extensions (`~ .bak .orig .cfg
  .retry .pyc .pyo .swp .rpm .md .txt .rst`) skipped.
- An executable with a `#!` line: a dynamic inventory (run with --list).
- `.yml`, `.yaml`, `.json`: YAML inventory (a `.json` with `_meta` is a saved --list).
- No extension: YAML when it is a mapping of groups, INI otherwise; any other extension
  (`.ini`, `hosts.txt` given directly): INI. `.toml` is refused.
- A comma-separated host list (`-i 'gpu1,gpu2:2222,'`, Ansible's host_list): those hosts,
  ungrouped, no group_vars.
- Then, for each source in order (its own directory for a directory, the file's
  directory otherwise), group_vars/ and host_vars/ beside it.

Later sources add hosts and override values set earlier at the same place.
"""

from __future__ import annotations

import os
import re

from fleetcheck.input_error import InputError
from fleetcheck.addresses import split_port
from fleetcheck.inventory.ini import parse_ini
from fleetcheck.inventory.model import InventoryData
from fleetcheck.inventory.script import (DEFAULT_SCRIPT_TIMEOUT, add_script_output, is_script,
                                         is_script_output, load_script)
from fleetcheck.inventory.varsfiles import add_vars_files
from fleetcheck.inventory.yaml_format import load_yaml_text, looks_like_yaml_inventory, \
    parse_yaml_inventory

YAML_EXTENSIONS = (".yml", ".yaml", ".json")
IGNORED_NAMES = re.compile(r"^\.|^host_vars$|^group_vars$|^vars_plugins$")
IGNORED_EXTENSIONS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst",
                      ".orig", ".cfg", ".retry")


def load_sources(sources: list[str],
                 script_timeout: float = DEFAULT_SCRIPT_TIMEOUT) -> InventoryData:
    data = InventoryData()
    for source in sources:
        if is_host_list(source):
            add_host_list(source, data)
            continue
        if not os.path.exists(source):
            raise InputError(source, None, None, "no such inventory file or directory")
        parse_source(source, data, script_timeout)
    data.reconcile()
    for source in sources:
        if not is_host_list(source):
            add_vars_files(data, source if os.path.isdir(source) else
                           os.path.dirname(os.path.abspath(source)))
    return data


def is_host_list(source: str) -> bool:
    return "," in source and not os.path.exists(source)


def add_host_list(source: str, data: InventoryData) -> None:
    """Ansible's host_list plugin: names (with an optional port), no ranges."""
    for entry in source.split(","):
        entry = entry.strip()
        if entry:
            name, port = split_port(entry)
            if name not in data.hosts:
                data.add_host(name, "ungrouped", "host list %r" % source, port)


def parse_source(path: str, data: InventoryData, script_timeout: float) -> None:
    if os.path.isdir(path):
        for entry in sorted(os.listdir(path)):
            if IGNORED_NAMES.search(entry) or entry.endswith(IGNORED_EXTENSIONS):
                continue
            parse_source(os.path.join(path, entry), data, script_timeout)
        return
    if is_script(path):
        load_script(path, data, script_timeout)
        return
    extension = os.path.splitext(path)[1]
    if extension == ".toml":
        raise InputError(path, None, None, "TOML inventories are not read; use INI or YAML")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, None, "cannot read: %s" % exc)
    if extension in YAML_EXTENSIONS:
        parsed = load_yaml_text(path, text)
        if extension == ".json" and is_script_output(parsed):
            add_script_output(path, parsed, data)
        else:
            parse_yaml_inventory(path, parsed, data)
        return
    if not extension:
        try:
            parsed = load_yaml_text(path, text)
        except InputError:
            parsed = None
        if looks_like_yaml_inventory(parsed):
            parse_yaml_inventory(path, parsed, data)
            return
    parse_ini(path, text, data)
