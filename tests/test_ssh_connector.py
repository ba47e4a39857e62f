"""The SSH connector's pure parts without sshd: ProxyJump specs, inventory values over
ssh_config, the error seam's kinds, and the retry decision (only a failure before the
command was sent is retried), the last against real listeners on loopback: one that
speaks no SSH, and paramiko's own server side, which refuses a login or drops the
connection once the command arrived."""

from __future__ import annotations

import os
import socket
import threading
import time

import paramiko
import pytest

from fleetcheck.connectors.base import Deadline, TransportError
from fleetcheck.connectors.ssh import (KnownHosts, SshConnector, SshSettings, parse_jump,
                                       resolve_endpoint, translate_errors)
from fleetcheck.inventory import Host
from probe_helpers import LoopbackListener

ADDRESS = "127.%d.250.1" % int(os.environ.get("FLEETCHECK_LOOPBACK_NET", "0"))


@pytest.mark.parametrize("spec, expected", [
    ("bastion", (None, "bastion", 22)),
    ("ops@bastion", ("ops", "bastion", 22)),
    ("ops@bastion:2222", ("ops", "bastion", 2222)),
    ("[::1]:2200", (None, "::1", 2200)),
    ("me@[fe80::1]", ("me", "fe80::1", 22)),
    ("::1", (None, "::1", 22)),  # two colons: an IPv6 address, not host:port
    ("a@first:1, b@second:2", ("a", "first", 1)),  # a list: the first hop
    ("odd@user@gate:23", ("odd@user", "gate", 23)),  # the last @ splits user from host
])
def test_parse_jump(spec, expected):
    assert parse_jump(spec) == expected


CONFIG = """\
Host gpu*
    HostName 10.1.2.3
    Port 2022
    User cfguser
    IdentityFile ~/.ssh/fleet_key
    ProxyJump jump@gate:2200

Host direct
    ProxyJump none
"""


def settings(tmp_path, config: str | None = CONFIG, policy: str = "strict",
             **extra) -> SshSettings:
    return SshSettings(known_hosts=KnownHosts(str(tmp_path / "known_hosts"), policy),
                       ssh_config=paramiko.SSHConfig.from_text(config) if config else None,
                       **extra)


def test_ssh_config_fills_what_the_inventory_leaves_open(tmp_path):
    endpoint = resolve_endpoint(Host(name="gpu7", address="gpu7"), settings(tmp_path))
    assert (endpoint.address, endpoint.port, endpoint.user) == ("10.1.2.3", 2022, "cfguser")
    assert endpoint.key_files == [os.path.expanduser("~/.ssh/fleet_key")]
    assert endpoint.proxy_jump == "jump@gate:2200"


def test_inventory_values_win_over_ssh_config(tmp_path):
    host = Host(name="gpu7", address="127.0.0.9", port=2200, user="inv", key="/k/id",
                proxy_jump="other@hop")
    endpoint = resolve_endpoint(host, settings(tmp_path))
    assert (endpoint.address, endpoint.port, endpoint.user) == ("127.0.0.9", 2200, "inv")
    assert endpoint.key_files == ["/k/id"] and endpoint.proxy_jump == "other@hop"


def test_proxyjump_none_and_no_config_mean_no_bastion(tmp_path):
    assert resolve_endpoint(Host(name="direct", address="direct", user="u"),
                            settings(tmp_path)).proxy_jump is None
    bare = resolve_endpoint(Host(name="gpu7", address="gpu7", user="u"),
                            settings(tmp_path, config=None))
    assert (bare.address, bare.port, bare.key_files, bare.proxy_jump) == ("gpu7", 22, [], None)


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

    def __init__(self, serve):
        self.serve = serve
        super().__init__(ADDRESS)

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
                time.sleep(0.05)
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
    host = Host(name="box", address=ADDRESS, port=listener.port, user="u", key=key)
    connector = SshConnector(settings(tmp_path, config=None, policy="accept-new",
                                      retries=retries, retry_backoff=0.05))
    return connector.open(host, Deadline(seconds))


def test_a_listener_that_speaks_no_ssh_is_retried_then_unreachable(tmp_path):
    listener = Listener(no_ssh)
    try:
        with pytest.raises(TransportError) as caught:
            connect(tmp_path, listener, retries=2)
    finally:
        listener.close()
    assert caught.value.kind == "unreachable" and caught.value.retryable
    assert listener.accepted == 3  # the first try and two retries


def test_no_retry_when_the_deadline_leaves_no_room_for_the_backoff(tmp_path):
    listener = Listener(no_ssh)
    try:
        with pytest.raises(TransportError):
            connect(tmp_path, listener, retries=5, seconds=1.0)
    finally:
        listener.close()
    assert listener.accepted == 1


def test_a_refused_login_is_never_retried(tmp_path, client_key):
    server = Server(login=False)
    listener = Listener(ssh_server(server))
    try:
        with pytest.raises(TransportError) as caught:
            connect(tmp_path, listener, key=client_key, retries=3)
    finally:
        listener.close()
    assert caught.value.kind == "auth" and not caught.value.retryable
    assert "authentication refused for user u" in caught.value.message
    assert listener.accepted == 1


def test_a_connection_lost_after_the_command_was_sent_is_not_retryable(tmp_path, client_key):
    server = Server(login=True)
    listener = Listener(ssh_server(server))
    try:
        with connect(tmp_path, listener, key=client_key) as session:
            with pytest.raises(TransportError) as caught:
                session.run("python3 -c probe", b"payload")
    finally:
        listener.close()
    assert caught.value.kind == "protocol" and not caught.value.retryable, caught.value.message
    assert server.commands == [b"python3 -c probe"], caught.value.message
    assert listener.accepted == 1
