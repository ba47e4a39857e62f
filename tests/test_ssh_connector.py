"""The SSH connector's pure parts without sshd: ProxyJump specs, inventory values over
ssh_config, the error seam's kinds, and the retry decision (only a failure before the
command was sent is retried), the last against real listeners on loopback: one that
speaks no SSH, and paramiko's own server side, which refuses a login or drops the
connection once the command arrived."""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time

import paramiko
import pytest

from fleetcheck.cli import load_ssh_config
from fleetcheck.connectors.base import Deadline, TransportError
from fleetcheck.connectors.ssh import (Endpoint, KnownHosts, SshConnector, SshSettings,
                                       resolve_endpoint, translate_errors)
from fleetcheck.input_error import InputError
from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.inventory import JumpHop, parse_route
from probe_helpers import LoopbackListener

pytestmark = pytest.mark.unit

CONFIG = """\
Host gpu*
    HostName 10.1.2.3
    Port 2022
    User cfguser
    IdentityFile ~/.ssh/fleet_key
    ProxyJump jump@gate:2200

Host direct
    ProxyJump none

Host gate
    HostName 10.0.0.1
    Port 2201
    User gateuser
    IdentityFile /keys/gate

Host inner
    HostName 10.0.0.2
    ProxyJump gate

Host last
    ProxyJump never-followed

Host loop1
    ProxyJump loop2

Host loop2
    ProxyJump ops@loop1

Host badport
    Port 22x

Host badjump
    ProxyJump ops@gate:22x
"""


def settings(tmp_path, config: str | None = CONFIG, policy: str = "strict",
             **extra) -> SshSettings:
    """Settings with `config` written to a real ssh_config file, read as the CLI reads it."""
    path = tmp_path / "ssh_config"
    if config:
        path.write_text(config)
    return SshSettings(known_hosts=KnownHosts(str(tmp_path / "known_hosts"), policy),
                       ssh_config=load_ssh_config(str(path)) if config else None,
                       ssh_config_path=str(path), **extra)


def hop(address: str, port: int, user: str, keys: list[str]) -> Endpoint:
    return Endpoint(address=address, port=port, user=user, key_files=keys)


GATE_KEYS = ["/keys/gate"]
FLEET_KEY = os.path.expanduser("~/.ssh/fleet_key")


def test_ssh_config_fills_what_the_inventory_leaves_open(tmp_path):
    endpoint = resolve_endpoint(ConnectionSettings(name="gpu7"), settings(tmp_path))
    assert (endpoint.address, endpoint.port, endpoint.user) == ("10.1.2.3", 2022, "cfguser")
    assert endpoint.key_files == [FLEET_KEY]
    # the bastion has its own settings: the route's user and port, then ssh_config's
    # HostName and key for it (the host's own settings are not the bastion's)
    assert endpoint.jumps == (hop("10.0.0.1", 2200, "jump", GATE_KEYS),)


@pytest.mark.parametrize("given, field, value", [
    ({"port": 22}, "port", 22),  # an explicit 22 still beats ssh_config's Port 2022
    ({"port": 2200}, "port", 2200),
    ({"user": "inv"}, "user", "inv"),
    ({"key": "/k/id"}, "key_files", ["/k/id"]),
])
def test_an_inventory_value_beats_ssh_config(tmp_path, given, field, value):
    endpoint = resolve_endpoint(ConnectionSettings(name="gpu7", **given), settings(tmp_path))
    resolved = {"port": endpoint.port, "user": endpoint.user, "key_files": endpoint.key_files}
    # the given field is the inventory's; those it does not give still come from ssh_config
    assert resolved == dict({"port": 2022, "user": "cfguser", "key_files": [FLEET_KEY]},
                            **{field: value})
    assert endpoint.address == "10.1.2.3" and len(endpoint.jumps) == 1


def test_ssh_config_is_matched_on_the_ansible_host_as_ssh_is_given_it(tmp_path):
    """Ansible runs `ssh <ansible_host>`: an explicit address leaves the block of the
    inventory name unread; an alias in ansible_host is translated by its own block."""
    by_address = resolve_endpoint(ConnectionSettings(name="gpu7", address="127.0.0.9"), settings(tmp_path))
    assert (by_address.address, by_address.port, by_address.jumps) == ("127.0.0.9", 22, ())
    assert by_address.user == getpass.getuser() and by_address.key_files == []
    alias = resolve_endpoint(ConnectionSettings(name="node1", address="gpu-alias"), settings(tmp_path))
    assert (alias.address, alias.port, alias.user) == ("10.1.2.3", 2022, "cfguser")


def test_the_inventory_route_beats_ssh_config_and_none_means_no_bastion(tmp_path):
    routed = resolve_endpoint(ConnectionSettings(name="gpu7", proxy_jump=parse_route("other@hop:2")),
                              settings(tmp_path))
    # a bastion ssh_config gives no key gets the host's
    assert routed.jumps == (hop("hop", 2, "other", [FLEET_KEY]),)
    assert resolve_endpoint(ConnectionSettings(name="gpu7", proxy_jump=()), settings(tmp_path)).jumps == ()
    assert resolve_endpoint(ConnectionSettings(name="direct", user="u"), settings(tmp_path)).jumps == ()
    bare = resolve_endpoint(ConnectionSettings(name="gpu7", user="u"), settings(tmp_path, config=None))
    assert (bare.address, bare.port, bare.key_files, bare.jumps) == ("gpu7", 22, [], ())


def test_every_hop_is_chained_and_the_first_hops_own_proxyjump_is_followed(tmp_path):
    """As `ssh -J inner,last` runs `ssh -J inner last`: inner's ssh_config ProxyJump
    (gate) comes first; last's is not followed (it is reached through inner)."""
    host = ConnectionSettings(name="gpu7", user="u", key="/k/id", proxy_jump=parse_route("inner,ops@last"))
    jumps = resolve_endpoint(host, settings(tmp_path)).jumps
    assert jumps == (hop("10.0.0.1", 2201, "gateuser", GATE_KEYS),
                     hop("10.0.0.2", 22, getpass.getuser(), ["/k/id"]),
                     hop("last", 22, "ops", ["/k/id"]))
    assert [str(j) for j in jumps][1:] == ["%s@10.0.0.2:22" % getpass.getuser(), "ops@last:22"]


@pytest.mark.parametrize("host, needles", [
    (ConnectionSettings(name="badport"), ["host 'badport'", "field 'Port'", "'22x'"]),
    (ConnectionSettings(name="badjump"), ["host 'badjump'", "field 'ProxyJump'", "'ops@gate:22x'",
                            "1-65535"]),
    (ConnectionSettings(name="gpu1", proxy_jump=parse_route("badport")),
     ["host 'badport' (bastion of gpu1)", "field 'Port'"]),
    (ConnectionSettings(name="gpu1", proxy_jump=parse_route("loop1")),
     ["field 'ProxyJump'", "loop1 -> loop2 -> loop1", "ProxyJump none"]),
    (ConnectionSettings(name="gpu1", address="badport"),
     ["host 'gpu1' (ssh_config matched on its ansible_host badport)", "field 'Port'"]),
])
def test_an_unusable_ssh_config_value_names_the_file_host_and_field(tmp_path, host, needles):
    with pytest.raises(InputError) as caught:
        resolve_endpoint(host, settings(tmp_path))
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "ssh_config")), message
    for needle in needles:
        assert needle in message, message


@pytest.mark.parametrize("raised, kind, retryable", [
    (ConnectionRefusedError(), "unreachable", True),
    (socket.timeout(), "unreachable", True),
    (socket.gaierror(-2, "Name or service not known"), "unreachable", False),
    (paramiko.AuthenticationException("no"), "auth", False),
    (paramiko.SSHException("Error reading SSH protocol banner"), "unreachable", True),
    (paramiko.SSHException("Incompatible ssh peer"), "protocol", True),
    (EOFError(), "protocol", True),
    (OSError(113, "No route to host"), "unreachable", True),
    (TransportError("auth", "kept as it is"), "auth", False),
])
def test_error_seam_kinds_and_which_are_worth_a_retry(raised, kind, retryable):
    with pytest.raises(TransportError) as caught:
        with translate_errors("gpu1:22"):
            raise raised
    assert (caught.value.kind, caught.value.retryable) == (kind, retryable)


class Listener(LoopbackListener):
    """Hands each connection to `serve`, one after the other, and counts them."""

    def __init__(self, address: str, serve):
        self.serve = serve
        super().__init__(address)

    def handle(self, conn: socket.socket) -> None:
        self.serve(conn)

    @property
    def accepted(self) -> int:
        return len(self.connections)


def no_ssh(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    conn.close()


class Server(paramiko.ServerInterface):
    """paramiko's server side: accepts any public key when `login`, and counts the
    commands it was asked to run, dropping the connection at the first."""

    def __init__(self, login: bool):
        self.login = login
        self.commands: list[bytes] = []
        self.channels: list[paramiko.Channel | None] = []
        self.transport: paramiko.Transport | None = None

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username, key) -> int:
        return paramiko.AUTH_SUCCESSFUL if self.login else paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel, command: bytes) -> bool:
        self.commands.append(command)
        threading.Timer(0.2, self.transport.close).start()  # dies mid-run
        return True


HOST_KEY = paramiko.ECDSAKey.generate()


def ssh_server(server: Server):
    def serve(conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        server.transport = transport
        transport.add_server_key(HOST_KEY)
        try:
            transport.start_server(server=server)
            server.channels.append(transport.accept(20))  # a collected channel closes
            while transport.is_active():
                time.sleep(0.05)  # holds the connection while the client keeps it
        except (paramiko.SSHException, EOFError, OSError):
            pass
        finally:
            transport.close()
    return serve


@pytest.fixture
def client_key(tmp_path) -> str:
    path = str(tmp_path / "id_ecdsa")
    paramiko.ECDSAKey.generate().write_private_key_file(path)
    return path


def connect(tmp_path, listener: Listener, key: str | None = None, retries: int = 2,
            seconds: float = 30):
    host = ConnectionSettings(name="box", address=listener.address, port=listener.port, user="u", key=key)
    connector = SshConnector(settings(tmp_path, config=None, policy="accept-new",
                                      retries=retries, retry_backoff=0.05))
    return connector.open(host, Deadline(seconds))


def test_a_listener_that_speaks_no_ssh_is_retried_then_unreachable(tmp_path, loopback_address):
    listener = Listener(loopback_address, no_ssh)
    try:
        with pytest.raises(TransportError) as caught:
            connect(tmp_path, listener, retries=2)
    finally:
        listener.close()
    assert caught.value.kind == "unreachable" and caught.value.retryable
    assert listener.accepted == 3  # the first try and two retries


def test_no_retry_when_the_deadline_leaves_no_room_for_the_backoff(tmp_path, loopback_address):
    listener = Listener(loopback_address, no_ssh)
    try:
        with pytest.raises(TransportError):
            connect(tmp_path, listener, retries=5, seconds=1.0)
    finally:
        listener.close()
    assert listener.accepted == 1


def test_a_refused_login_is_never_retried(tmp_path, loopback_address, client_key):
    server = Server(login=False)
    listener = Listener(loopback_address, ssh_server(server))
    try:
        with pytest.raises(TransportError) as caught:
            connect(tmp_path, listener, key=client_key, retries=3)
    finally:
        listener.close()
    assert caught.value.kind == "auth" and not caught.value.retryable
    assert "authentication refused for user u" in caught.value.message
    assert listener.accepted == 1


def test_a_connection_lost_after_the_command_was_sent_is_not_retryable(
        tmp_path, loopback_address, client_key):
    server = Server(login=True)
    listener = Listener(loopback_address, ssh_server(server))
    try:
        with connect(tmp_path, listener, key=client_key) as session:
            with pytest.raises(TransportError) as caught:
                session.run("python3 -c probe", b"payload")
    finally:
        listener.close()
    assert caught.value.kind == "protocol" and not caught.value.retryable, caught.value.message
    assert server.commands == [b"python3 -c probe"], caught.value.message
    assert listener.accepted == 1


class CancellingBastion(Server):
    """A bastion that lets the client in just as the run is cancelled (Ctrl-C), and
    records each forward it is asked for."""

    def __init__(self, cancel: threading.Event):
        super().__init__(login=True)
        self.cancel = cancel
        self.forwards: list[tuple[str, int]] = []

    def check_auth_publickey(self, username, key) -> int:
        self.cancel.set()
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_direct_tcpip_request(self, chanid, origin, destination) -> int:
        self.forwards.append(destination)
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED


def test_a_run_cancelled_at_a_bastion_opens_no_further_hop(tmp_path, loopback_address, client_key):
    cancel = threading.Event()
    bastion = CancellingBastion(cancel)
    listener = Listener(loopback_address, ssh_server(bastion))
    host = ConnectionSettings(name="box", address=loopback_address, port=2222, user="u", key=client_key,
                proxy_jump=(JumpHop(loopback_address, "u", listener.port),))
    connector = SshConnector(settings(tmp_path, config=None, policy="accept-new", retries=0))
    try:
        with pytest.raises(TransportError) as caught:
            connector.open(host, Deadline(30), cancel)
    finally:
        listener.close()
    assert caught.value.kind == "interrupted", caught.value.message
    assert bastion.forwards == [] and listener.accepted == 1
