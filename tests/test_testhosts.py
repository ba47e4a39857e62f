"""The loopback test hosts (fleetcheck/lab/testhosts.py): a fleet never takes an address
where something already listens, since that listener's banner would pass for its sshd."""

from __future__ import annotations

import socket

import paramiko
import pytest

from fleetcheck.lab.testhosts import LOOPBACK_NET, AddressInUse, listeners


def remote_host_key(address: str, port: int = 22) -> str:
    """The base64 host key the sshd at address:port offers."""
    with socket.create_connection((address, port), timeout=10) as sock:
        transport = paramiko.Transport(sock)
        try:
            transport.start_client(timeout=10)
            return transport.get_remote_server_key().get_base64()
        finally:
            transport.close()


def held_listener(address: str, port: int) -> socket.socket:
    held = socket.socket()
    held.bind((address, port))
    held.listen(1)
    return held


def test_listeners_are_read_from_the_kernel_with_their_address_and_port(fleet):
    with held_listener("127.%d.%d.3" % (LOOPBACK_NET, fleet.third_octet), 0) as held:
        where = held.getsockname()
        assert where in listeners()
    assert where not in listeners()


def test_a_fleet_passes_over_an_address_where_something_listens(fleet):
    first = "127.%d.%d.10" % (LOOPBACK_NET, fleet.third_octet)
    with held_listener(first, 22):  # another fleet's sshd, as far as the fleet can tell
        host = fleet.add("gpu01")
        fleet.start()
        assert (host.address, fleet.skipped) == (
            "127.%d.%d.11" % (LOOPBACK_NET, fleet.third_octet), [first])
        assert remote_host_key(host.address) == host.host_key_pub[1]  # its own sshd


def test_a_host_on_an_address_where_something_listens_stops_the_start_before_any_host(fleet):
    taken = "127.%d.%d.20" % (LOOPBACK_NET, fleet.third_octet)
    with held_listener(taken, 2222):
        first = fleet.add("gpu01")
        fleet.add("gpu02", address=taken, port=2222)
        with pytest.raises(AddressInUse, match=r"^%s:2222 \(host gpu02\): address in use: "
                           r"something already listens on %s:2222$" % (
                               taken.replace(".", r"\."), taken.replace(".", r"\."))):
            fleet.start()
        assert first.process is None
