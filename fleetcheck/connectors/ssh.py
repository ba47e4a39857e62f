"""`connection: ssh` (the default): the inventory variables it reads, and its connector.
The paramiko machinery lives in ssh_transport and is imported on first use of any of its
names here (SshConnector, SshSettings, ...), so reading an inventory never imports an SSH
library."""

from __future__ import annotations

import shlex
from typing import Any

from fleetcheck.addresses import Route, parse_route
from fleetcheck.variables import Variable, path, port

# ssh options that change neither where fleetcheck connects nor whom it trusts, so a
# shared inventory's common args can keep them: host keys are verified whatever
# StrictHostKeyChecking says (an unknown key names --host-key-policy accept-new).
IGNORED_SSH_OPTIONS = {"stricthostkeychecking", "userknownhostsfile", "serveraliveinterval",
                       "serveralivecountmax", "controlmaster", "controlpersist",
                       "controlpath", "connecttimeout", "compression", "loglevel",
                       "identitiesonly", "forwardagent", "tcpkeepalive"}
IGNORED_SSH_FLAGS = {"-q", "-C", "-A", "-T", "-4"}


def route(spec: Any) -> Route:
    if not isinstance(spec, str):
        raise ValueError("must be a string, got %r" % (spec,))
    try:
        return parse_route(spec)
    except ValueError as exc:
        raise ValueError("ProxyJump %r: %s" % (spec, exc))


def route_from_args(value: Any) -> Route | None:
    """The bastion in ansible_ssh_common_args (-J, -o ProxyJump=), if any. Options that do
    not change where or how fleetcheck connects are ignored; anything else (ProxyCommand,
    a port, a key) is refused rather than silently dropped."""
    if not isinstance(value, str):
        raise ValueError("must be a string, got %r" % (value,))
    args = shlex.split(value)  # its ValueError says what is unbalanced
    jump = None
    i = 0

    def once(spec: str) -> str:
        if jump is not None:  # ssh itself refuses a second -J
            raise ValueError("a bastion is given twice (%r and %r): give one route, its "
                             "hops separated by commas" % (jump, spec))
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
        raise ValueError("only a bastion (-J / -o ProxyJump=...) and options that do not "
                         "change the connection (%s) are supported, got %r"
                         % (", ".join(sorted(IGNORED_SSH_OPTIONS)), arg))
    return None if jump is None else route(jump)


VARIABLES = (
    Variable("address", ("host", "ansible_host", "ansible_ssh_host"), typo_guard=False),
    Variable("port", ("port", "ansible_port", "ansible_ssh_port"), port, typo_guard=False),
    Variable("user", ("user", "ansible_user", "ansible_ssh_user"), typo_guard=False),
    Variable("key", ("key", "ansible_ssh_private_key_file", "ansible_private_key_file"), path,
             typo_guard=False),
    Variable("proxy_jump", ("proxy_jump",), route),
    Variable("ssh_common_args", ("ansible_ssh_common_args",), route_from_args,
             fills="proxy_jump"),
)


def __getattr__(name: str) -> Any:
    from fleetcheck.connectors import ssh_transport
    return getattr(ssh_transport, name)
