"""Addresses as Ansible and OpenSSH write them: `host:port` entries, and ProxyJump routes
(`none`, or a comma-separated list of `[user@]host[:port]` and `ssh://[user@]host[:port]`
hops, visited in order). Shared by the inventory and the ssh connector, which do not
import each other.

Parsed where a route is read (the inventory's proxy_jump, ssh_config), so a route that cannot be
followed exactly is refused before any host is contacted: a second bastion dropped or a
port misread would quietly change which machines a connection passes through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BRACKETED_HOST_PORT = re.compile(r"^\[(.+)\]:([0-9]+)$")
HOST_PORT = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$")
HOST_NAME = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_.])?$")
IPV6 = re.compile(r"^[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._-]+)?$")
USER_NAME = re.compile(r"^[^\s\x00-\x1f\x7f:/,\[\]]+$")


@dataclass(frozen=True)
class JumpHop:
    """One bastion as the route names it; None: not given, ssh_config or the default
    decides (as for the host itself)."""

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s%s%s" % (self.user + "@" if self.user else "", host,
                           ":%d" % self.port if self.port is not None else "")


def split_port(entry: str) -> tuple[str, int | None]:
    """`gpu1:2222` -> ("gpu1", 2222); `[::1]:22` -> ("::1", 22); `gpu[1:3]:22` keeps its
    range; a bare IPv6 address (`fe80::1`) keeps its colons; anything else is unchanged."""
    match = BRACKETED_HOST_PORT.match(entry) or HOST_PORT.match(entry)
    if match:
        return match.group(1), int(match.group(2))
    return entry, None


# A route: the hops in order; () is `none` (no bastion, and ssh_config's is not used).
Route = tuple[JumpHop, ...]


def parse_route(spec: str) -> Route:
    """The hops of a ProxyJump value; ValueError saying what is wrong with it."""
    text = spec.strip()
    if text.lower() == "none":
        return ()
    if not text:
        raise ValueError("is empty (give [user@]host[:port][,...] or none)")
    return tuple(parse_hop(part.strip()) for part in text.split(","))


def parse_hop(text: str) -> JumpHop:
    if not text:
        raise ValueError("has an empty hop (two commas, or a comma at an end)")
    if text.lower() == "none":
        raise ValueError("'none' cannot be one hop of a list")
    body = text
    if text.lower().startswith("ssh://"):
        body = text[len("ssh://"):]
        if body.endswith("/"):
            body = body[:-1]
        if "/" in body or ";" in body or "?" in body:
            raise ValueError("hop %r: an ssh:// URI takes only [user@]host[:port]" % text)
    user = None
    if "@" in body:
        user, body = body.rsplit("@", 1)
        if not user or not USER_NAME.match(user):
            raise ValueError("hop %r: the user before '@' is empty or not a user name" % text)
    host, port = split_port(body)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # `[::1]` without a port
    elif ":" in host and (host.count(":") == 1 or not IPV6.match(host)):
        raise ValueError("hop %r: the port after ':' must be a number 1-65535" % text)
    if port is not None and not 0 < port < 65536:
        raise ValueError("hop %r: port %d is not 1-65535" % (text, port))
    if not (HOST_NAME.match(host) or (":" in host and IPV6.match(host))):
        raise ValueError("hop %r: %r is not a host name or address" % (text, host))
    return JumpHop(host=host, user=user, port=port)
