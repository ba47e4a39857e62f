"""Dynamic inventories: an executable run with `--list`, answering JSON as Ansible's
script plugin expects (groups with hosts/vars/children, `_meta.hostvars`; without
`_meta`, `--host NAME` per host). The same JSON saved to a file (`ansible-inventory
--list > fleet.json`) is read the same way, which is how inventory plugins such as
aws_ec2 reach fleetcheck.

A script that fails, hangs past its timeout or prints something other than that JSON
ends the run with exit 2 and its stderr in the message: an inventory that could not be
read is not an empty fleet.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

from fleetcheck.input_error import InputError
from fleetcheck.inventory.model import InventoryData

DEFAULT_SCRIPT_TIMEOUT = 30.0
STDERR_SHOWN = 2000


def is_script(path: str) -> bool:
    """Executable and starting with `#!`: Ansible would run any executable file, but one
    without a shebang cannot run, and is read as a file there too."""
    if not os.access(path, os.X_OK):
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def run_script(path: str, args: list[str], timeout: float) -> str:
    """The script's stdout. It runs in a session of its own, so that on timeout the
    whole of it (a shell script's curl included) is killed, not only its first process."""
    command = [os.path.abspath(path)] + args
    shown = " ".join([path] + args)
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise InputError(path, None, None, "cannot run `%s`: %s" % (shown, exc.strerror))
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise InputError(path, None, None, "`%s` ran past its timeout of %gs (killed)%s"
                         % (shown, timeout, _stderr(exc.stderr)))
    if proc.returncode != 0:
        raise InputError(path, None, None, "`%s` exited with status %d%s"
                         % (shown, proc.returncode, _stderr(stderr)))
    try:
        return stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, None, None, "`%s` printed bytes that are not UTF-8%s"
                         % (shown, _stderr(stderr)))


def _stderr(data: bytes | None) -> str:
    text = (data or b"").decode("utf-8", "replace").strip()
    if not text:
        return " (no stderr)"
    return "; stderr: %s" % text[-STDERR_SHOWN:]


def _json(path: str, text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        start = text.strip()[:80]
        raise InputError(path, None, None, "%s is not JSON (%s); it starts %r"
                         % (what, exc, start))


def load_script(path: str, data: InventoryData, timeout: float) -> None:
    output = _json(path, run_script(path, ["--list"], timeout), "the output of --list")

    def host_vars_of(host: str) -> Any:
        answer = run_script(path, ["--host", host], timeout)
        return _json(path, answer, "the output of --host %s" % host) if answer.strip() else {}

    add_script_output(path, output, data, host_vars_of)


def is_script_output(data: Any) -> bool:
    """A saved --list answer: JSON whose top level carries `_meta`."""
    return isinstance(data, dict) and isinstance(data.get("_meta"), dict)


def add_script_output(path: str, output: Any, data: InventoryData,
                      host_vars_of: Any = None) -> None:
    """Groups, hosts and variables of a --list answer. host_vars_of(host) is asked for a
    host's variables only when the answer has no `_meta.hostvars`."""
    if not isinstance(output, dict):
        raise InputError(path, None, None, "the inventory JSON must be an object of groups, "
                         "got %s" % type(output).__name__)
    meta = output.get("_meta", {})
    if not isinstance(meta, dict):
        raise InputError(path, None, "_meta", "must be an object")
    hostvars = meta.get("hostvars")
    if hostvars is not None and not isinstance(hostvars, dict):
        raise InputError(path, None, "_meta.hostvars", "must be an object of hosts")
    listed: list[str] = []
    for group, body in output.items():
        if group != "_meta":
            _group(path, str(group), body, data, listed)
    for host in listed:
        if hostvars is not None:
            values = hostvars.get(host, {})
        elif host_vars_of is not None:
            values = host_vars_of(host)
        else:
            values = {}
        if not isinstance(values, dict):
            raise InputError(path, "host '%s'" % host, None, "host variables must be an object")
        for name, value in values.items():
            data.set_host_var(host, str(name), value, path)


def _group(path: str, name: str, body: Any, data: InventoryData, listed: list[str]) -> None:
    where = "group '%s'" % name
    data.add_group(name)
    if isinstance(body, list):
        body = {"hosts": body}
    elif not isinstance(body, dict):
        raise InputError(path, where, None, "must be an object with hosts, vars and children")
    elif not any(key in body for key in ("hosts", "vars", "children")):
        body = {"hosts": [name], "vars": body}
    hosts = body.get("hosts", [])
    if not isinstance(hosts, list):
        raise InputError(path, where, "hosts", "must be a list of host names")
    for host in hosts:
        if not isinstance(host, str):
            raise InputError(path, where, "hosts", "host %r is not a string" % (host,))
        if host not in listed:
            listed.append(host)
        data.add_host(host, name, path)
    group_vars = body.get("vars", {})
    if not isinstance(group_vars, dict):
        raise InputError(path, where, "vars", "must be an object")
    for var, value in group_vars.items():
        data.set_group_var(name, str(var), value, path)
    children = body.get("children", [])
    if not isinstance(children, list):
        raise InputError(path, where, "children", "must be a list of group names")
    for child in children:
        data.add_child(name, str(child), path)
