"""Real OpenSSH servers on loopback, for the demo, the tests and the benchmark.

Each host is its own sshd on its own 127.0.1.N address with its own host key. To make one
path (say /opt/ml-env) hold a different install on each host, each sshd runs in its own
mount namespace with a bind mount (needs root and util-linux's unshare). Nothing here
touches a network beyond 127.0.0.0/8.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from dataclasses import dataclass, field

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
# What root's ~/.bashrc is on a stock Debian box. sshd runs every command through bash, and
# Debian's bash reads ~/.bashrc for commands run by sshd; this machine's root .bashrc adds
# `pyenv init` (~0.13 s CPU per SSH session, for every tool), which a GPU host would not have
# and which on one machine competes with the controller for the same cores.
STOCK_ROOT_BASHRC = "/usr/share/base-files/dot.bashrc"
# The second octet of every loopback address a fleet hands out (127.N.x.y): several test
# runs on one machine (worktrees, CI beside a session) then never fight over an address.
LOOPBACK_NET = int(os.environ.get("FLEETCHECK_LOOPBACK_NET", "0"))


def missing_requirements() -> list[str]:
    """What this machine lacks to run real sshd hosts, as install advice."""
    problems = []
    if not os.path.exists(SSHD):
        problems.append("OpenSSH server: apt-get install -y openssh-server")
    if not shutil.which("ssh-keygen"):
        problems.append("ssh-keygen: apt-get install -y openssh-client")
    if os.geteuid() != 0:
        problems.append("root (sshd per host in its own mount namespace): run as root")
    if not shutil.which("unshare") or not shutil.which("nsenter"):
        problems.append("unshare/nsenter: apt-get install -y util-linux")
    return problems


def keygen(path: str, kind: str = "ed25519") -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", path],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@dataclass
class TestHost:
    name: str
    address: str
    port: int
    directory: str
    mounts: dict[str, str] = field(default_factory=dict)
    sshd_options: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    own_pids: bool = True  # its own PID namespace; False: it sees this machine's processes

    @property
    def host_key_pub(self) -> tuple[str, str]:
        """(key type, base64 blob) of the host's public key, as known_hosts wants them."""
        with open(os.path.join(self.directory, "host_key.pub"), encoding="ascii") as handle:
            kind, blob = handle.read().split()[0:2]
        return kind, blob


class LoopbackFleet:
    """A set of sshd hosts sharing one client key and one known_hosts file."""

    def __init__(self, workdir: str, first_octet: int | None = None, base_index: int = 10,
                 stock_bashrc: bool = True):
        """first_octet: the third octet of its addresses (127.NET.first_octet.x), by default
        FLEETCHECK_LOOPBACK_BLOCK or 1 (the test suite gives each of its processes a block
        of its own, so the demos its tests start never share an address). stock_bashrc:
        each host's root sees Debian's stock .bashrc (bind-mounted in its mount namespace)
        rather than this machine's."""
        self.stock_bashrc = stock_bashrc and os.path.isfile(STOCK_ROOT_BASHRC)
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.client_key = os.path.join(self.workdir, "client_key")
        if not os.path.exists(self.client_key):
            keygen(self.client_key)
        self.known_hosts = os.path.join(self.workdir, "known_hosts")
        self.hosts: list[TestHost] = []
        self.third_octet = (first_octet if first_octet is not None
                            else int(os.environ.get("FLEETCHECK_LOOPBACK_BLOCK", "1")))
        self.next_index = base_index
        self.skipped: list[str] = []  # addresses passed over: something listened there
        os.makedirs("/run/sshd", exist_ok=True)

    def next_address(self) -> str:
        """The next address of the block where nothing listens on any port: another
        fleet's sshd there (a second test run, a `demo --keep`) would answer for ours."""
        taken = listening_addresses()
        while True:
            address = "127.%d.%d.%d" % (LOOPBACK_NET, self.third_octet, self.next_index)
            self.next_index += 1
            if self.next_index > 254:
                self.third_octet += 1
                self.next_index = 1
            if address not in taken:
                return address
            self.skipped.append(address)

    def add(self, name: str, mounts: dict[str, str] | None = None,  # source "DIR:ro": read-only
            sshd_options: dict[str, str] | None = None, port: int = 22,
            address: str | None = None, known: bool = True, own_pids: bool = True) -> TestHost:
        directory = os.path.join(self.workdir, "hosts", name)
        os.makedirs(directory, exist_ok=True)
        host = TestHost(name=name, address=address or self.next_address(), port=port,
                        directory=directory, mounts=dict(mounts or {}),
                        sshd_options=dict(sshd_options or {}), own_pids=own_pids)
        key = os.path.join(directory, "host_key")
        if not os.path.exists(key):
            keygen(key)
        shutil.copy(self.client_key + ".pub", os.path.join(directory, "authorized_keys"))
        self._write_config(host)
        if known:
            self.trust(host)
        self.hosts.append(host)
        return host

    def trust(self, host: TestHost) -> None:
        kind, blob = host.host_key_pub
        name = host.address if host.port == 22 else "[%s]:%d" % (host.address, host.port)
        with open(self.known_hosts, "a", encoding="ascii") as handle:
            handle.write("%s %s %s\n" % (name, kind, blob))

    def _write_config(self, host: TestHost) -> None:
        options = {
            "ListenAddress": "%s:%d" % (host.address, host.port),
            "HostKey": os.path.join(host.directory, "host_key"),
            "PidFile": os.path.join(host.directory, "sshd.pid"),
            "AuthorizedKeysFile": os.path.join(host.directory, "authorized_keys"),
            "UsePAM": "no", "StrictModes": "no", "PasswordAuthentication": "no",
            "KbdInteractiveAuthentication": "no", "PubkeyAuthentication": "yes",
            "PermitRootLogin": "prohibit-password", "MaxStartups": "1000:30:2000",
            "MaxSessions": "64", "LogLevel": "ERROR", "UseDNS": "no",
        }
        options.update(host.sshd_options)
        with open(os.path.join(host.directory, "sshd_config"), "w", encoding="ascii") as handle:
            for key, value in options.items():
                handle.write("%s %s\n" % (key, value))

    def _command(self, host: TestHost) -> list[str]:
        """sshd in its own mount namespace (its bind mounts) and PID namespace (its own
        /proc, so processes started "on" one host are seen by that host only)."""
        sshd = "exec %s -D -e -f %s" % (SSHD, os.path.join(host.directory, "sshd_config"))
        if os.geteuid() != 0:
            return ["/bin/sh", "-c", sshd]
        binds = ""
        mounts = dict(host.mounts)
        home_rc = os.path.expanduser("~/.bashrc")
        if self.stock_bashrc and os.path.isfile(home_rc):
            mounts.setdefault(home_rc, STOCK_ROOT_BASHRC + ":ro")
        for target, source in mounts.items():
            readonly = source.endswith(":ro")
            source = source[:-3] if readonly else source
            if os.path.isdir(source):
                binds += "mkdir -p '%s' && " % target
            binds += "mount --bind '%s' '%s' && " % (source, target)
            if readonly:
                binds += "mount -o remount,bind,ro '%s' && " % target
        pids = ["-p", "--fork", "--mount-proc", "--kill-child"] if host.own_pids else []
        return ["unshare", "-m"] + pids + ["--propagation", "private", "/bin/sh", "-c",
                                           binds + sshd]

    def sshd_pid(self, host: TestHost) -> int:
        """The sshd inside the host's namespaces (the child of unshare)."""
        assert host.process is not None
        pid = host.process.pid
        for _ in range(100):
            try:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as handle:
                    children = handle.read().split()
            except OSError:
                children = []
            if children:
                return int(children[0])
            time.sleep(0.05)
        return pid

    def spawn_on(self, host: TestHost, script: str) -> subprocess.Popen:
        """Start a process "on" the host: inside its mount and PID namespaces."""
        return subprocess.Popen(["nsenter", "-t", str(self.sshd_pid(host)), "-m", "-p",
                                 "/bin/bash", "-c", script], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self, timeout: float = 20.0) -> None:
        """Starts every host not yet running; AddressInUse before any starts if something
        already listens where one of them would (its banner would pass for the host's)."""
        taken = listeners()
        for host in self.hosts:
            if host.process is None:
                for address in (host.address, "0.0.0.0"):
                    if (address, host.port) in taken:
                        raise AddressInUse("%s:%d (host %s): address in use: something "
                                           "already listens on %s:%d" % (
                                               host.address, host.port, host.name, address,
                                               host.port))
        for host in self.hosts:
            if host.process is None:
                for target, source in host.mounts.items():
                    if os.path.isdir(source[:-3] if source.endswith(":ro") else source):
                        os.makedirs(target, exist_ok=True)  # a file is mounted on a file
                log = open(os.path.join(host.directory, "sshd.log"), "ab")
                host.process = subprocess.Popen(self._command(host), stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL)
                log.close()
        end = time.monotonic() + timeout
        for host in self.hosts:
            while not banner_ready(host.address, host.port):
                if host.process is not None and host.process.poll() is not None:
                    raise RuntimeError("sshd for %s exited: %s" % (host.name, self.log(host)))
                if time.monotonic() > end:
                    raise RuntimeError("sshd for %s did not start: %s" % (host.name, self.log(host)))
                time.sleep(0.05)

    def log(self, host: TestHost) -> str:
        return log_tail(os.path.join(host.directory, "sshd.log"))

    def kill(self, host: TestHost) -> None:
        if host.process is not None and host.process.poll() is None:
            host.process.send_signal(signal.SIGKILL)
            host.process.wait()
            wait_closed([host])


    def stop(self) -> None:
        """SIGKILL: unshare ignores SIGTERM while it waits, and --kill-child takes sshd
        and every process of the host's PID namespace down with it."""
        for host in self.hosts:
            if host.process is not None and host.process.poll() is None:
                host.process.kill()
        for host in self.hosts:
            if host.process is not None:
                try:
                    host.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    host.process.kill()
                    host.process.wait()
                host.process = None
        wait_closed(self.hosts)

    def __enter__(self) -> "LoopbackFleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AddressInUse(RuntimeError):
    """A host's address and port are taken by a listener that is not the host's sshd."""


def listeners() -> set[tuple[str, int]]:
    """(IPv4 address, port) of every TCP socket listening in this network namespace, from
    /proc/net/tcp and tcp6 (IPv4-mapped addresses); empty where /proc cannot say."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4 or fields[3] != "0A":  # TCP_LISTEN
                continue
            hex_address, hex_port = fields[1].split(":")
            # the kernel prints each 32-bit word of the address in host byte order
            raw = b"".join(struct.pack("=I", int(hex_address[i:i + 8], 16))
                           for i in range(0, len(hex_address), 8))
            if len(raw) == 4:
                address = str(ipaddress.IPv4Address(raw))
            elif not any(raw):  # [::], dual-stack: every IPv4 address too
                address = "0.0.0.0"
            else:
                mapped = ipaddress.IPv6Address(raw).ipv4_mapped
                if mapped is None:
                    continue
                address = str(mapped)
            found.add((address, int(hex_port, 16)))
    return found


def wait_closed(hosts: list[TestHost], timeout: float = 10.0) -> None:
    """Until no stopped host's sshd still listens: unshare exits before the sshd its
    --kill-child killed has closed its socket, and a restart must find the port free."""
    end = time.monotonic() + timeout
    wanted = {(host.address, host.port) for host in hosts}
    while time.monotonic() < end and wanted & listeners():
        time.sleep(0.02)


def listening_addresses() -> set[str]:
    """The IPv4 addresses where something listens, on any port."""
    return {address for address, _ in listeners()}


def log_tail(path: str, size: int = 2000) -> str:
    """The end of a daemon's log, for the error saying it did not start."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-size:]
    except OSError:
        return ""


def banner_ready(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5) as sock:
            sock.settimeout(0.5)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def free_loopback_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]
