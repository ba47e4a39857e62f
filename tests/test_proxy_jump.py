"""ProxyJump routes as OpenSSH writes them: every hop kept in order, `none`, and each
spec that cannot be followed exactly refused with what is wrong with it."""

from __future__ import annotations

import pytest

from fleetcheck.inventory import JumpHop, parse_route

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("spec, hops", [
    ("bastion", [JumpHop("bastion")]),
    ("ops@bastion", [JumpHop("bastion", "ops")]),
    ("ops@bastion:2222", [JumpHop("bastion", "ops", 2222)]),
    ("[::1]:2200", [JumpHop("::1", None, 2200)]),
    ("me@[fe80::1]", [JumpHop("fe80::1", "me")]),
    ("::1", [JumpHop("::1")]),  # two colons: an IPv6 address, not host:port
    ("odd@user@gate:23", [JumpHop("gate", "odd@user", 23)]),  # the last @ ends the user
    ("ssh://ops@gate:2200", [JumpHop("gate", "ops", 2200)]),
    ("ssh://gate/", [JumpHop("gate")]),
    # a list: every hop, in the order they are visited
    ("a@first:1, b@second:2", [JumpHop("first", "a", 1), JumpHop("second", "b", 2)]),
    ("g1,ssh://g2:2222,ops@g3", [JumpHop("g1"), JumpHop("g2", None, 2222),
                                 JumpHop("g3", "ops")]),
    ("none", []),
    ("None", []),
])
def test_routes_keep_every_hop(spec, hops):
    assert list(parse_route(spec)) == hops


@pytest.mark.parametrize("spec, problem", [
    ("ops@gate:22x", "the port after ':' must be a number 1-65535"),
    ("gate:", "the port after ':' must be a number 1-65535"),
    ("gate:0", "port 0 is not 1-65535"),
    ("gate:99999", "port 99999 is not 1-65535"),
    ("a,,b", "empty hop"),
    ("a,", "empty hop"),
    ("", "is empty"),
    ("a,none", "'none' cannot be one hop"),
    ("@gate", "the user before '@' is empty"),
    ("gate x", "not a host name or address"),
    ("-oProxyCommand=sh", "not a host name or address"),
    ("ssh://gate/path", "an ssh:// URI takes only"),
    ("ssh://ops;fingerprint=x@gate", "an ssh:// URI takes only"),
])
def test_bad_routes_say_what_is_wrong(spec, problem):
    with pytest.raises(ValueError, match=problem):
        parse_route(spec)


def test_a_hop_is_written_back_as_it_is_read():
    assert [str(h) for h in parse_route("ops@g1:2222,[::1],g3")] == \
        ["ops@g1:2222", "[::1]", "g3"]
