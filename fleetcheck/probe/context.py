"""One probe run's context, built once and passed to every reader: the deadline, the
process table, and one ServerProcess record per vLLM server. Each server is read from
/proc once (owner, cwd, root, argv with its --config file's arguments, environment,
listening sockets); the readers of its configuration, log and smoke load all take that
record instead of re-deriving it, so they cannot disagree on who owns a server, where
it listens or which speculative config it runs."""

import os
import time

SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server",
                  "vllm.entrypoints.cli.main")
MAX_ENVIRON_BYTES = 1024 * 1024
WITNESS_BUDGET_S = 3.0  # the HTTP witness's time for every server of a host together
TCP_LISTEN = "0A"
# set by the node agent's chroot prelude (node_chroot.py): the mount namespace it entered
PATHS_NAMESPACE = "FLEETCHECK_PATHS_NAMESPACE"
OTHER_MOUNTS = "runs in another mount namespace, whose paths this probe does not read: " \
    "set `container:` to probe inside it"


def own_ancestry():
    pids = set()
    pid = os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def process_table():
    """[(pid, argv)] of every other process, or None when /proc cannot be listed."""
    mine = own_ancestry()
    table = []
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if pid in mine:
            continue
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
        except OSError:
            continue
        if argv:
            table.append((pid, argv))
    return table


def server_script(argv):
    """(index of the `vllm` program in a `vllm serve` command line, None), (None, the
    module) for `python -m vllm.entrypoints...`, or None for any other process."""
    for i, arg in enumerate(argv[:3]):
        if os.path.basename(arg) == "vllm" and argv[i + 1:i + 2] == ["serve"]:
            return i, None
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1]
        if module in SERVER_MODULES:
            return None, module
    return None


def listening_sockets(pid):
    """{socket inode: (address, port)} of the TCP sockets listening in the process's own
    network namespace (/proc/PID/net/tcp and tcp6): what this process could own."""
    out = {}
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as handle:
                rows = handle.read(8 * 1024 * 1024).splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != TCP_LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            try:
                out[fields[9]] = (hex_address(address), int(port, 16))
            except ValueError:
                continue
    return out


def hex_address(text):
    """/proc/net/tcp's address (little-endian words of hex) as text."""
    import socket
    raw = bytes.fromhex(text)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(words) == 4 else socket.AF_INET6, words)


def socket_inodes(pid):
    """The inodes of the sockets the process holds open (its fd links `socket:[N]`)."""
    found = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return found
    for fd in fds[:65536]:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            found.add(link[8:-1])
    return found


def link_of(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


class ServerProcess(object):
    """One vLLM server as /proc shows it, read once. `argv` is the command line;
    `parsed_argv` is what the server parsed (a --config file's arguments spliced in, the
    file read as `owner` could read it); `listening` the (address, port) pairs its own
    sockets listen on."""

    __slots__ = ("pid", "argv", "index", "module", "owner", "cwd", "root", "parsed_argv",
                 "config_error", "listening", "elsewhere", "_environ", "_settings", "_spec")

    def __init__(self, pid, argv, index, module, mount_ns=None):
        from fleetcheck.probe.trust import owner_of
        self.pid, self.argv, self.index, self.module = pid, argv, index, module
        self.owner = owner_of(pid)
        self.cwd = link_of("/proc/%d/cwd" % pid)
        self.root = link_of("/proc/%d/root" % pid)
        theirs = link_of("/proc/%d/ns/mnt" % pid)
        # the paths it names are paths in its own mount namespace: read here, they would
        # be another file (the host's at the same path)
        self.elsewhere = OTHER_MOUNTS if mount_ns and theirs and theirs != mount_ns \
            else None
        self.parsed_argv, self.config_error = argv, None
        if "--config" in argv and self.elsewhere:
            self.config_error = "--config is not read: %s" % self.elsewhere
        elif "--config" in argv:  # the reader (and its json and re) only where one is named
            from fleetcheck.probe.config_file_args import with_config_file
            self.parsed_argv, self.config_error = with_config_file(self.pid, argv, self.cwd,
                                                                   index, self.owner)
        sockets = listening_sockets(pid)
        self.listening = sorted(set(sockets[i] for i in socket_inodes(pid) if i in sockets)) \
            if sockets else []
        self._environ = None
        self._settings = None
        self._spec = None

    def listens_on(self, port):
        return any(p == port for _, p in self.listening)

    def environ(self):
        """(every variable as text, error or None), read once: /proc/PID/environ is
        readable only by root or the process's own user."""
        if self._environ is None:
            from fleetcheck.probe.files import ProbeFileError, read_bytes
            env, error = {}, None
            try:
                data = read_bytes("/proc/%d/environ" % self.pid, MAX_ENVIRON_BYTES)
            except ProbeFileError as exc:
                data, error = b"", str(exc).split(": ", 1)[-1]
            for item in data.split(b"\0"):
                name, eq, value = item.partition(b"=")
                if eq:
                    env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
            self._environ = (env, error)
        return self._environ

    def speculative(self):
        """(speculative config dict or None, the flag it came from, errors), parsed once
        by vLLM's rule (server_config.speculative_config)."""
        if self._spec is None:
            from fleetcheck.probe.server_config import speculative_config
            self._spec = speculative_config(self.parsed_argv)
        return self._spec

    def settings(self):
        """The target, speculative settings and served names from what the server parsed
        (server_config.server_settings), computed once."""
        if self._settings is None:
            from fleetcheck.probe.server_config import server_settings
            self._settings = server_settings(self.parsed_argv, self.index,
                                             self.speculative())
        return self._settings


class ProbeContext(object):
    """What one probe run shares: `deadline` (time.monotonic() seconds) every wait takes,
    the process table read once, the vLLM servers read once, and `install_reader`: the
    Owner whose access the checked install's files are read with (None: the probe's
    own), decided once the install is chosen; the pids judged against it; and the HTTP
    witness's budget, one per host."""

    def __init__(self, plan, started=None):
        started = time.monotonic() if started is None else started
        self.deadline = started + float(plan.get("time_budget_s") or 60.0) - 1.0
        self.serving_port = plan.get("serving_port")
        self.table = process_table()
        # the mount namespace whose paths this probe reads: its own, or the one the node
        # agent chrooted it into (node_chroot.py says which)
        self.mount_ns = os.environ.get(PATHS_NAMESPACE) or link_of("/proc/self/ns/mnt")
        self.servers = []
        for pid, argv in self.table or []:
            found = server_script(argv)
            if found is not None:
                self.servers.append(ServerProcess(pid, argv, found[0], found[1],
                                                  self.mount_ns))
        self.install_reader = None
        self.judged = set()  # pids of the servers judged: witnessed first
        self.witness_budget = WITNESS_BUDGET_S
        self.witness_spent = 0.0
        self.code_runners = {}  # (interpreter, owner uid) -> trust.code_runner's answer

    def left(self):
        return self.deadline - time.monotonic()

    def witness_left(self):
        """Seconds the HTTP witness may still take: the host's budget, within the
        deadline."""
        return min(self.witness_budget - self.witness_spent, self.left() - 1.0)

    def server(self, pid):
        return next((s for s in self.servers if s.pid == pid), None)

    def serving(self):
        """The server whose own socket listens on vllm_url's port, or None."""
        if self.serving_port is None:
            return None
        return next((s for s in self.servers if s.listens_on(self.serving_port)), None)
