"""group_vars/ and host_vars/ beside an inventory source, found as Ansible's
host_group_vars plugin finds them: for a group or host NAME, the first of `NAME`,
`NAME.yml`, `NAME.yaml`, `NAME.json` that exists; when it is a directory, every file in it
(recursively, sorted; hidden files and `~` backups skipped; no extension or one of those
three), merged in that order. Empty files are ignored; Ansible Vault files are skipped
(fleetcheck cannot decrypt them, and they hold secrets, not the variables it uses).
"""

from __future__ import annotations

import os
import sys

from fleetcheck.input_error import InputError
from fleetcheck.inventory.model import InventoryData, VarsFile
from fleetcheck.inventory.yaml_format import load_yaml_text

EXTENSIONS = (".yml", ".yaml", ".json")
VAULT_HEADER = "$ANSIBLE_VAULT;"
# what sits beside vars files without being any name's: docs, editors' and tools' leftovers
NOT_VARS_SUFFIXES = ("~", ".md", ".txt", ".rst", ".bak", ".orig", ".swp", ".retry", ".pyc")


def find_vars_files(directory: str, name: str, entries: set[str]) -> list[str]:
    """entries: the directory's listing, read once for all the inventory's names."""
    for candidate in [name] + [name + ext for ext in EXTENSIONS]:
        if candidate in entries:
            path = os.path.join(directory, candidate)
            return _files_in(path) if os.path.isdir(path) else [path]
    return []


def _files_in(directory: str) -> list[str]:
    found = []
    for entry in sorted(os.listdir(directory)):
        if entry.startswith(".") or entry.endswith("~"):
            continue
        path = os.path.join(directory, entry)
        ext = os.path.splitext(entry)[1]
        if os.path.isdir(path) and not ext:
            found.extend(_files_in(path))
        elif os.path.isfile(path) and (not ext or ext in EXTENSIONS):
            found.append(path)
    return found


def read_vars_file(path: str, owner: str) -> VarsFile | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, owner, None, "cannot read: %s" % exc)
    if text.lstrip().startswith(VAULT_HEADER):
        print("fleetcheck: note: %s is vault-encrypted; skipped" % path, file=sys.stderr)
        return None
    values = load_yaml_text(path, text)
    if values is None:
        return None
    if not isinstance(values, dict):
        raise InputError(path, owner, None, "a vars file must be a mapping of variable names "
                         "to values, got %s" % type(values).__name__)
    return VarsFile(path, {str(key): value for key, value in values.items()})


def add_vars_files(data: InventoryData, directory: str) -> None:
    """The group_vars and host_vars of one source directory, for the groups and hosts the
    inventory has (files for others are not read, as in Ansible, and each is a warning:
    a misspelt name would otherwise quietly drop what it sets)."""
    for kind, names, target in (("group", data.groups, data.group_files),
                                ("host", data.hosts, data.host_files)):
        subdir = os.path.join(os.path.realpath(directory), kind + "_vars")
        if not os.path.isdir(subdir):
            continue
        files: dict[str, list[VarsFile]] = {}
        entries = set(os.listdir(subdir))
        for name in names:
            if name.startswith(os.sep):
                continue
            read = [read_vars_file(path, "%s '%s'" % (kind, name))
                    for path in find_vars_files(subdir, name, entries)]
            files[name] = [vars_file for vars_file in read if vars_file is not None]
        target.append(files)
        data.warnings.extend(unmatched_vars(data, os.path.join(directory, kind + "_vars"),
                                            kind, entries))


def unmatched_vars(data: InventoryData, subdir: str, kind: str,
                   entries: set[str]) -> list[str]:
    """A warning for each entry of a group_vars/ or host_vars/ directory that no group or
    host of the inventory reads, with the name it probably meant. Entries that are plainly
    no one's variables (README.md, backups) are left alone."""
    names = data.groups if kind == "group" else data.hosts
    others, other_kind = (data.hosts, "host") if kind == "group" else (data.groups, "group")
    warnings = []
    for entry in sorted(entries):
        stem, ext = os.path.splitext(entry)
        name = stem if ext in EXTENSIONS else entry
        if entry in names or name in names or entry.startswith(".") or \
                entry.endswith(NOT_VARS_SUFFIXES):
            continue
        if name in others:
            hint = "%s is a %s: its variables go in %s_vars/" % (name, other_kind, other_kind)
        else:
            import difflib  # only an unmatched file pays for it
            close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
            hint = "did you mean %s?" % close[0] if close else \
                "the inventory has no %s of that name" % kind
        warnings.append("%s matches no %s of the inventory, so nothing in it is read (%s)"
                        % (os.path.join(subdir, entry), kind, hint))
    return warnings
