"""`connection: ssh`'s machinery (ssh.py declares the connection): connect (with
bastions), verify host keys, authenticate, and run commands over one paramiko transport
per host.

paramiko, socket and OS errors are translated here into TransportError kinds, so the
runner only ever sees fleetcheck's kinds. paramiko is used directly rather than through
fabric's Connection: one socket, one transport and one channel per command, ssh_config
parsed and keys loaded once per run.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import selectors
import socket
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

if "invoke" not in sys.modules:
    # paramiko imports invoke (and with it unittest.mock and more, ~50 ms of start-up CPU)
    # only to run ssh_config `Match exec` commands; it handles invoke being absent.
    # enable_match_exec() brings it back for the configs that use it.
    sys.modules["invoke"] = None  # type: ignore[assignment]
    import paramiko
    del sys.modules["invoke"]
else:
    import paramiko

from fleetcheck.addresses import Route, parse_route
from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.connectors.base import (Answerer, CommandResult, Connector, Deadline, Session,
                                        TransportError, wait_for)
from fleetcheck.connectors.dialogue import converse
from fleetcheck.input_error import InputError
from fleetcheck.status import ErrorKind


def key_fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "%s SHA256:%s" % (key.get_name(), base64.b64encode(digest).decode().rstrip("="))


@dataclass
class KnownHosts:
    """known_hosts loaded once per run; accept-new appends to this file and no other."""

    path: str
    policy: str = "strict"
    # told each key accept-new adds, as a line for the user (the command line prints it)
    on_added: Callable[[str], None] | None = None
    _keys: paramiko.HostKeys = field(default_factory=paramiko.HostKeys)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if os.path.exists(self.path):
            try:
                self._keys.load(self.path)
            except (OSError, paramiko.SSHException) as exc:
                raise ValueError("cannot read known_hosts %s: %s" % (self.path, exc))

    @staticmethod
    def lookup_name(address: str, port: int) -> str:
        return address if port == 22 else "[%s]:%d" % (address, port)

    def known_types(self, address: str, port: int) -> list[str]:
        """Key types known for a host, so the handshake asks for one of them (as OpenSSH
        orders its HostKeyAlgorithms by known_hosts)."""
        with self._lock:
            known = self._keys.lookup(self.lookup_name(address, port))
        return list(known.keys()) if known is not None else []

    def verify(self, address: str, port: int, key: paramiko.PKey) -> None:
        name = self.lookup_name(address, port)
        with self._lock:
            known = self._keys.lookup(name)
            if known is not None and key.get_name() in known:
                if known[key.get_name()] == key:
                    return
                raise TransportError(
                    "host-key", "host key for %s CHANGED: server offers %s, %s has another; "
                    "refusing to connect (remove the old line only if the change is expected)"
                    % (name, key_fingerprint(key), self.path))
            if known is not None:
                # never trust a new key type for a host we already know (a way in for a
                # man in the middle), whatever the policy
                raise TransportError(
                    "host-key", "%s offers a %s key, but %s holds only %s for it: refused"
                    % (name, key.get_name(), self.path, ", ".join(known.keys())))
            if self.policy != "accept-new":
                raise TransportError(
                    "host-key", "unknown host %s (%s) is not in %s: refused; to trust it on "
                    "first use run with --host-key-policy accept-new"
                    % (name, key_fingerprint(key), self.path))
            self._keys.add(name, key.get_name(), key)
            directory = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(directory, mode=0o700, exist_ok=True)
            with open(self.path, "a", encoding="ascii") as handle:
                handle.write("%s %s %s\n" % (name, key.get_name(), key.get_base64()))
        if self.on_added is not None:
            self.on_added("added host key for %s (%s) to %s" % (name, key_fingerprint(key),
                                                                self.path))


class KeyRing:
    """Private keys loaded once per run, however many hosts use them."""

    def __init__(self) -> None:
        self._loaded: dict[str, paramiko.PKey | Exception] = {}
        self._lock = threading.Lock()
        self._agent_keys: list[paramiko.PKey] | None = None

    def load(self, path: str) -> paramiko.PKey:
        path = os.path.expanduser(path)
        with self._lock:
            if path not in self._loaded:
                try:
                    self._loaded[path] = paramiko.PKey.from_path(path)
                except (OSError, paramiko.SSHException, ValueError) as exc:
                    self._loaded[path] = exc
            value = self._loaded[path]
        if isinstance(value, Exception):
            raise TransportError("auth", "cannot load key %s: %s" % (path, value))
        return value

    def agent_keys(self) -> list[paramiko.PKey]:
        with self._lock:
            if self._agent_keys is None:
                try:
                    self._agent_keys = list(paramiko.Agent().get_keys()) \
                        if os.environ.get("SSH_AUTH_SOCK") else []
                except (paramiko.SSHException, OSError):
                    self._agent_keys = []
            return self._agent_keys

    def default_key_paths(self) -> list[str]:
        home = os.path.expanduser("~/.ssh")
        return [os.path.join(home, name) for name in ("id_ed25519", "id_ecdsa", "id_rsa")
                if os.path.exists(os.path.join(home, name))]


@dataclass
class SshSettings:
    known_hosts: KnownHosts
    ssh_config: paramiko.SSHConfig | None = None
    keys: KeyRing = field(default_factory=KeyRing)
    retries: int = 1
    retry_backoff: float = 0.5
    ssh_config_path: str = "ssh_config"  # named in the errors of its values
    # host name -> its endpoint, resolved before the run (resolve_endpoints)
    endpoints: dict[str, "Endpoint"] = field(default_factory=dict)
    # what resolving found and does not use, for the user, each once (resolve_endpoints)
    notes: list[str] = field(default_factory=list)

    def lookup(self, name: str) -> dict[str, Any]:
        return self.ssh_config.lookup(name) if self.ssh_config else {}


@dataclass
class Endpoint:
    """One machine to connect to, after the inventory and ssh_config are merged, with
    the bastions in front of it in the order they are visited."""

    address: str
    port: int
    user: str
    key_files: list[str]
    jumps: tuple["Endpoint", ...] = ()

    def __str__(self) -> str:
        address = "[%s]" % self.address if ":" in self.address else self.address
        return "%s@%s:%d" % (self.user, address, self.port)


def resolve_endpoint(host: ConnectionSettings, settings: SshSettings) -> Endpoint:
    """The inventory's explicit values, then ssh_config, then ssh's defaults, as Ansible
    runs `ssh -o Port=.. -o User=.. <ansible_host>`: ssh_config is matched on the name
    ssh is given (ansible_host when set, else the inventory name) and its HostName then
    translates that name. InputError for an ssh_config value that cannot be used."""
    where = "host '%s'" % host.name if host.destination == host.name else \
        "host '%s' (ssh_config matched on its ansible_host %s)" % (host.name, host.destination)
    config = settings.lookup(host.destination)
    address = config.get("hostname", host.destination)
    port = host.port if host.port is not None else config_port(settings, where, config)
    user = host.user or config.get("user") or getpass.getuser()
    key_files = [host.key] if host.key else list(config.get("identityfile", []))
    route = host.proxy_jump if host.proxy_jump is not None else \
        config_route(settings, where, config)
    jumps = resolve_route(route, settings, key_files, host.name, ())
    return Endpoint(address=address, port=port, user=user, key_files=key_files, jumps=jumps)


def resolve_route(route: Route, settings: SshSettings, target_keys: list[str],
                  target: str, following: tuple[str, ...]) -> tuple[Endpoint, ...]:
    """Each hop with its own settings from ssh_config (a hop's user and port in the
    route win), as OpenSSH runs `ssh -J a,b` as `ssh -J a b`: the first hop's own
    ProxyJump is followed, later hops' are not. `following`: the first hops whose
    ProxyJump led here, to refuse a loop that OpenSSH would follow forever."""
    if not route:
        return ()
    hops = []
    for index, hop in enumerate(route):
        where = "host '%s' (bastion of %s)" % (hop.host, target)
        config = settings.lookup(hop.host)
        if index == 0:
            if hop.host in following:
                raise InputError(settings.ssh_config_path, where, "ProxyJump",
                                 "the bastions' ProxyJump settings lead back to %s (%s): "
                                 "give it `ProxyJump none`" % (hop.host, " -> ".join(
                                     following + (hop.host,))))
            before = config_route(settings, where, config)
            if before:
                hops.extend(resolve_route(before, settings, target_keys, target,
                                          following + (hop.host,)))
        # a hop ssh_config gives no key uses the host's (a bastion that takes the
        # same key needs no ssh_config entry)
        keys = list(config.get("identityfile", [])) or list(target_keys)
        hops.append(Endpoint(
            address=config.get("hostname", hop.host),
            port=hop.port if hop.port is not None else config_port(settings, where, config),
            user=hop.user or config.get("user") or getpass.getuser(), key_files=keys))
    return tuple(hops)


def config_port(settings: SshSettings, where: str, config: dict[str, Any]) -> int:
    text = config.get("port", "22")
    if not (text.isdigit() and 0 < int(text) < 65536):
        raise InputError(settings.ssh_config_path, where, "Port",
                         "must be a port number 1-65535, got %r" % text)
    return int(text)


def config_route(settings: SshSettings, where: str, config: dict[str, Any]) -> Route:
    spec = config.get("proxyjump")
    if spec is None:
        return ()
    try:
        return parse_route(spec)
    except ValueError as exc:
        raise InputError(settings.ssh_config_path, where, "ProxyJump", "%r: %s" % (spec, exc))


def resolve_endpoints(hosts: list[ConnectionSettings], settings: SshSettings) -> None:
    """Every SSH host resolved once, before the run: a bad ssh_config value (a port, a
    route) is exit 2 naming the file, the host and the field, before any connection, and
    ssh_config's `Match exec` commands run once per host."""
    for host in hosts:
        if host.connection == "ssh":
            try:
                settings.endpoints[host.name] = resolve_endpoint(host, settings)
            except paramiko.SSHException:
                continue  # a name CanonicalizeHostname cannot resolve: that host's error
            files = settings.lookup(host.destination).get("userknownhostsfile")
            if files and files != settings.known_hosts.path:
                note = ("ssh_config's UserKnownHostsFile %s (%s) is not read: host keys are "
                        "checked against %s (--known-hosts)" % (files, settings.ssh_config_path,
                                                                settings.known_hosts.path))
                if note not in settings.notes:
                    settings.notes.append(note)


@contextmanager
def translate_errors(where: str) -> Iterator[None]:
    """paramiko / socket / OS errors -> TransportError, at this one seam."""
    try:
        yield
    except TransportError:
        raise
    except socket.gaierror as exc:
        raise TransportError(ErrorKind.UNREACHABLE,
                             "%s: name does not resolve (%s)" % (where, exc.strerror))
    except ConnectionRefusedError:
        raise TransportError(ErrorKind.UNREACHABLE, "%s: connection refused" % where,
                             retryable=True)
    except (socket.timeout, TimeoutError):
        raise TransportError(ErrorKind.UNREACHABLE, "%s: timed out (no answer)" % where,
                             retryable=True)
    except paramiko.BadHostKeyException as exc:
        raise TransportError("host-key", "%s: host key changed: %s" % (where, exc))
    except paramiko.AuthenticationException as exc:
        raise TransportError("auth", "%s: %s" % (where, exc))
    except paramiko.ChannelException as exc:
        # the bastion before this hop could not open the forward to it
        if exc.code == paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED:
            raise TransportError(ErrorKind.UNREACHABLE, "%s: the bastion before it refused to "
                                 "forward to it (%s; does its sshd allow TCP forwarding?)"
                                 % (where, exc.text))
        raise TransportError(ErrorKind.UNREACHABLE, "%s: the bastion before it could not connect "
                             "to it (%s)" % (where, exc.text), retryable=True)
    except paramiko.SSHException as exc:
        text = str(exc)
        if "timeout opening channel" in text.lower():
            raise TransportError(ErrorKind.UNREACHABLE,
                                 "%s: the bastion before it did not open the "
                                 "forward to it in time" % where, retryable=True)
        if "banner" in text.lower():
            raise TransportError(ErrorKind.UNREACHABLE, "%s: no SSH banner (%s)" % (where, text),
                                 retryable=True)
        raise TransportError("protocol", "%s: SSH error: %s" % (where, text), retryable=True)
    except (EOFError, ConnectionResetError, BrokenPipeError) as exc:
        raise TransportError("protocol", "%s: connection closed (%s)" % (where, type(exc).__name__),
                             retryable=True)
    except OSError as exc:
        raise TransportError(ErrorKind.UNREACHABLE, "%s: %s" % (where, exc.strerror or exc),
                             retryable=True)


class SshSession(Session):
    """One authenticated SSH transport to a host, through each of its bastions in turn
    (each hop's transport carries the next one's TCP stream, direct-tcpip)."""

    def __init__(self, endpoint: Endpoint, settings: SshSettings, deadline: Deadline,
                 cancel: threading.Event | None = None):
        self.endpoint = endpoint
        self.settings = settings
        self.deadline = deadline
        self.transports: list[paramiko.Transport] = []
        try:
            self.transport = self._open(endpoint, cancel)
        except BaseException:
            self.close()
            raise

    def _open(self, endpoint: Endpoint, cancel: threading.Event | None) -> paramiko.Transport:
        through: paramiko.Transport | None = None
        count = len(endpoint.jumps)
        for index, hop in enumerate(endpoint.jumps + (endpoint,)):
            if cancel is not None and cancel.is_set():
                raise TransportError("interrupted", "run interrupted (Ctrl-C) while connecting")
            where = str(hop) if index == count else \
                "via bastion %d of %d %s" % (index + 1, count, hop)
            try:
                with translate_errors(where):
                    through = self._connect(hop, through, where)
            except TransportError as exc:
                if index < count and not exc.message.startswith(where):
                    exc.message = "%s: %s" % (where, exc.message)  # which hop failed
                    exc.args = (exc.message,)
                raise
        assert through is not None
        return through

    def _connect(self, endpoint: Endpoint, through: paramiko.Transport | None,
                 where: str) -> paramiko.Transport:
        """One hop: its TCP stream (direct, or forwarded by the hop before), its host
        key checked under its own name and port, then its login."""
        target = (endpoint.address, endpoint.port)
        if through is None:
            sock: socket.socket | paramiko.Channel = socket.create_connection(
                target, timeout=self.deadline.left())
        else:
            sock = through.open_channel("direct-tcpip", target, ("127.0.0.1", 0),
                                        timeout=self.deadline.left())
        try:
            transport = paramiko.Transport(sock)
        except BaseException:
            sock.close()
            raise
        self.transports.append(transport)
        known = self.settings.known_hosts.known_types(endpoint.address, endpoint.port)
        if known:
            options = transport.get_security_options()
            wanted = set(known) | ({"rsa-sha2-512", "rsa-sha2-256"} if "ssh-rsa" in known
                                   else set())
            preferred = [t for t in options.key_types if t in wanted]
            if preferred:
                options.key_types = preferred
        transport.banner_timeout = self.deadline.left()
        transport.handshake_timeout = self.deadline.left()
        transport.start_client(timeout=self.deadline.left())
        if not transport.is_active() or transport.host_key is None:
            # start_client returns quietly on its timeout: a listener that accepted
            # TCP but never spoke SSH (no banner, or a stalled key exchange)
            raise TransportError(ErrorKind.UNREACHABLE, "%s: no SSH banner / handshake within the "
                                 "host deadline of %.0fs" % (where, self.deadline.seconds))
        self.settings.known_hosts.verify(endpoint.address, endpoint.port,
                                         transport.get_remote_server_key())
        self._authenticate(transport, endpoint)
        return transport

    def _authenticate(self, transport: paramiko.Transport, endpoint: Endpoint) -> None:
        keyring = self.settings.keys
        tried: list[str] = []
        candidates: list[tuple[str, paramiko.PKey]] = []
        if endpoint.key_files:
            for path in endpoint.key_files:
                candidates.append((path, keyring.load(path)))
        else:
            for key in keyring.agent_keys():
                candidates.append(("agent:" + key_fingerprint(key), key))
            for path in keyring.default_key_paths():
                try:
                    candidates.append((path, keyring.load(path)))
                except TransportError:
                    continue
        for label, key in candidates:
            tried.append(label)
            transport.auth_timeout = self.deadline.left()
            try:
                transport.auth_publickey(endpoint.user, key)
            except paramiko.AuthenticationException:
                continue
            if transport.is_authenticated():
                return
        raise TransportError(
            "auth", "authentication refused for user %s at %s:%d; keys tried: %s"
            % (endpoint.user, endpoint.address, endpoint.port,
               ", ".join(tried) if tried else "none (no key in inventory, agent or ~/.ssh)"))

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        where = "%s:%d" % (self.endpoint.address, self.endpoint.port)
        with translate_errors(where):
            channel = self.transport.open_session(timeout=self.deadline.left())
        try:
            with translate_errors(where):
                channel.settimeout(self.deadline.left())  # a host that never reads stdin
                channel.exec_command(command)
                return converse(ChannelStreams(channel), payload, self.deadline, cancel,
                                answer)
        except TransportError as exc:
            exc.retryable = False  # the command was sent: never run it twice
            if exc.kind == ErrorKind.UNREACHABLE:  # it was reached: the connection died mid-run
                raise TransportError("protocol", "connection lost after the command was "
                                     "sent (%s)" % exc.message)
            raise
        except Exception as exc:
            if self.transport.is_active():
                raise  # not the connection: a bug, to be seen as one
            # paramiko can fail in odd ways on a transport that died under it
            raise TransportError("protocol", "connection lost after the command was sent "
                                 "(%s: %s)" % (type(exc).__name__, exc))
        finally:
            try:
                channel.close()
            except (EOFError, OSError, paramiko.SSHException):
                pass  # a connection that died: its error (above) is the host's, not this

    def close(self) -> None:
        for transport in reversed(self.transports):
            transport.close()


class ChannelStreams:
    """A paramiko channel as the dialogue's Streams (stdout and stderr share one window)."""

    def __init__(self, channel: paramiko.Channel):
        self.channel = channel

    def send(self, data: bytes, deadline: Deadline) -> None:
        try:
            self.channel.sendall(data)
        except OSError:
            # the command exited before reading all its input: what it wrote says why
            if not (self.channel.closed or self.channel.exit_status_ready()):
                raise

    def close_input(self) -> None:
        if not self.channel.closed:
            self.channel.shutdown_write()

    def _drained(self) -> bool:
        return self.channel.eof_received or self.channel.closed

    def read_out(self) -> Optional[bytes]:
        if self.channel.recv_ready():
            return self.channel.recv(1 << 16)
        return None if self._drained() else b""

    def read_err(self) -> Optional[bytes]:
        if self.channel.recv_stderr_ready():
            return self.channel.recv_stderr(1 << 16)
        return None if self._drained() else b""

    def finished(self) -> bool:
        channel = self.channel
        if channel.recv_ready() or channel.recv_stderr_ready():
            return False
        return channel.closed or (channel.exit_status_ready() and channel.eof_received)

    def wait(self, timeout: float) -> None:
        if self.channel.eof_received:
            # stdout closed but no exit status yet: the channel's fd stays readable, so
            # waiting on it would spin; a host that closes stdout and lingers is polled
            time.sleep(0.02)
        else:
            wait_for([self.channel], selectors.EVENT_READ, timeout)

    def exit_status(self) -> Optional[int]:
        if not self.channel.exit_status_ready():
            return None
        status = self.channel.recv_exit_status()
        return None if status == -1 else status


class SshConnector(Connector):
    """Transient failures while connecting (refused, reset, no banner) are retried with
    backoff inside the deadline; auth and host-key failures never, and a command that
    was sent is never sent again."""

    connection = "ssh"

    def __init__(self, settings: SshSettings):
        self.settings = settings

    def open(self, host: ConnectionSettings, deadline: Deadline,
             cancel: threading.Event | None = None) -> SshSession:
        endpoint = self.settings.endpoints.get(host.name) or \
            resolve_endpoint(host, self.settings)
        attempt = 0
        while True:
            try:
                return SshSession(endpoint, self.settings, deadline, cancel)
            except TransportError as exc:
                attempt += 1
                backoff = self.settings.retry_backoff * (2 ** (attempt - 1))
                if not exc.retryable or attempt > self.settings.retries or \
                        (cancel is not None and cancel.is_set()) or \
                        deadline.end - time.monotonic() < backoff + 1:
                    raise
                time.sleep(backoff)


def enable_match_exec() -> None:
    """Give paramiko its invoke back, for an ssh_config with `Match exec`."""
    import invoke
    import paramiko.config
    paramiko.config.invoke = invoke
    paramiko.config.invoke_import_error = None
