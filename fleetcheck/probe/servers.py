"""Running vLLM servers, read from /proc: pid, start time, interpreter, port, and the
site dirs their vllm comes from (the .so files of vllm/ a server has mapped, else its
interpreter's or its `vllm` script's venv), ranked as the install to judge. The probe's
context (context.py) reads /proc once for this and the install-in-progress look-up."""

import os
import time

from fleetcheck.probe.install import interpreter_site_dirs, venv_site_dirs
from fleetcheck.probe.trust import is_port, trusted


SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth")
REDACTED = "***"


def shown_cmdline(argv, limit=300):
    """A command line as the results may show it: the values of flags named like secrets
    (`--api-key sk-...`, `--hf-token=...`) and the user:password of URLs replaced, since
    the line leaves the host in every report."""
    out = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        secret = arg.startswith("-") and any(w in name.lower() for w in SECRET_WORDS)
        if secret and eq:
            arg = name + "=" + REDACTED
        elif secret:
            hide_next = True
        out.append(without_userinfo(arg))
    return " ".join(out)[:limit]


def without_userinfo(arg):
    """`https://user:pass@host/x` as `https://***@host/x`."""
    scheme = arg.find("://")
    if scheme < 0:
        return arg
    rest = arg[scheme + 3:]
    at, slash = rest.find("@"), rest.find("/")
    if at < 0 or (0 <= slash < at):
        return arg
    return arg[:scheme + 3] + REDACTED + rest[at:]


def port_of(argv):
    """The port argparse ends with: the last `--port` given (a --config file's comes
    before the command line's own), else vLLM's default; None when that is no port."""
    port = 8000
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--port" and i + 1 < len(argv) else \
            arg[7:] if arg.startswith("--port=") else None
        if value is not None:
            port = int(value) if value.isascii() and value.isdigit() and len(value) < 6 \
                else None
    return port if is_port(port) else None


def started_at(pid):
    """Start time (seconds since the epoch): how long ago the process started (uptime
    minus its start in clock ticks since boot) taken from the clock now. /proc/stat's
    btime is whole seconds and drifts from the wall clock on VMs, too coarse to compare
    with file mtimes."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def mapped_vllm_sites(pid):
    """Site dirs of the vllm/ files (compiled modules) the process has mapped."""
    sites = []
    try:
        with open("/proc/%d/maps" % pid) as handle:
            for line in handle:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                cut = path.rfind("/vllm/")
                if cut > 0 and path.endswith(".so"):
                    site = path[:cut]
                    if site not in sites:
                        sites.append(site)
    except OSError:
        pass
    return sites


def trusted_site(sites):
    """Whether root or the probe's own user owns the server's site dirs: a service
    account serving an install its administrator made."""
    me = os.geteuid()
    for site in sites:
        try:
            if os.stat(site).st_uid not in (0, me):
                return False
        except OSError:
            return False
    return bool(sites)


def rank_of(server, serving_port):
    """(rank, why) of a server as the install to judge, lowest first: 0 its own socket
    listens on vllm_url's port (the server the fleet reaches); 1 it runs as root or the
    probe's user, or from a site dir one of them owns; 2 another user's server, whose
    install is judged only when no other install is found."""
    if serving_port is not None and server.listens_on(serving_port):
        return 0, "listening on vllm_url's port %d" % serving_port
    owner = server.owner
    if owner is not None and trusted(owner):
        return 1, "of user %s" % owner.name
    return 2, "of user %s" % (owner.name if owner else "(gone)")


def running_servers(context):
    """Every running vLLM server process this host (or container) shows, best candidate
    for the install to judge first (rank_of), each saying why it ranks where it does."""
    if context.table is None:
        return {"error": "cannot list /proc", "servers": []}
    servers = []
    for server in context.servers:
        pid, argv, index = server.pid, server.argv, server.index
        owner = server.owner
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            exe = None
        # a venv's python is a symlink to the base interpreter, so the command line's
        # interpreter (the shebang of a `vllm` script) says more than /proc/PID/exe
        interpreter = argv[0] if argv[0].startswith("/") and index != 0 else exe
        sites = mapped_vllm_sites(pid) if not server.elsewhere else []
        how = "mapped" if sites else ("another mount namespace" if server.elsewhere
                                      else None)
        if server.elsewhere:
            pass  # its paths name its own files: no install is looked for through them
        elif not sites and index is not None and argv[index].startswith("/"):
            home = os.path.dirname(os.path.dirname(argv[index]))
            if os.path.isfile(os.path.join(home, "pyvenv.cfg")):
                sites = venv_site_dirs(home)
        if not sites and not server.elsewhere:
            sites = interpreter_site_dirs(interpreter or exe)
        rank, why = rank_of(server, context.serving_port)
        if rank == 2 and trusted_site(sites):
            rank, why = 1, "of user %s, running an install root or the probe's user owns" % (
                owner.name if owner else "(gone)")
        servers.append({"pid": pid, "cmdline": shown_cmdline(argv), "exe": exe,
                        "uid": owner.uid if owner else None,
                        "user": owner.name if owner else None,
                        "interpreter": interpreter, "started_at": started_at(pid),
                        "port": port_of(server.parsed_argv),
                        "listening": [p for _, p in server.listening][:16],
                        "site_dirs": sites,
                        "real_site_dirs": [os.path.realpath(p) for p in sites],
                        "site_from": how or "interpreter", "rank": rank, "ranked": why})
    servers.sort(key=lambda s: s["rank"])  # stable: pid order within a rank
    return {"servers": servers}
