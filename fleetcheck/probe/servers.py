"""Running vLLM servers, read from /proc: pid, start time, interpreter, port, and the
site dirs their vllm comes from (the .so files of vllm/ a server has mapped, else its
interpreter's or its `vllm` script's venv). One scan of /proc serves this and the
install-in-progress look-up."""

import os
import time

from fleetcheck.probe.install import interpreter_site_dirs, venv_site_dirs
from fleetcheck.probe.trust import is_port, owner_of

SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server",
                  "vllm.entrypoints.cli.main")
_TABLE = []


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
    """[(pid, argv)] of every other process, read once per probe."""
    if _TABLE:
        return _TABLE[0]
    mine = own_ancestry()
    table = []
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        pids = None
    for pid in pids or []:
        if pid in mine:
            continue
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
        except OSError:
            continue
        if argv:
            table.append((pid, argv))
    _TABLE.append(table if pids is not None else None)
    return _TABLE[0]


def server_script(argv):
    """The index of the `vllm` program in a `vllm serve` command line, or None; the
    module name for `python -m vllm.entrypoints...`."""
    for i, arg in enumerate(argv[:3]):
        if os.path.basename(arg) == "vllm" and argv[i + 1:i + 2] == ["serve"]:
            return i, None
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1]
        if module in SERVER_MODULES:
            return None, module
    return None


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


def parsed_argv(pid, argv, index, owner):
    """argv with a `--config FILE`'s arguments where vLLM puts them (the file read as
    the server's owner could read it); the reader (and the json and re it needs) is
    loaded only for a server that has one."""
    if "--config" not in argv:
        return argv
    from fleetcheck.probe.config_file_args import with_config_file
    return with_config_file(pid, argv, process_cwd(pid), index, owner)[0]


def process_cwd(pid):
    try:
        return os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        return None


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


def running_servers():
    """Every running vLLM server process this host (or container) shows."""
    table = process_table()
    if table is None:
        return {"error": "cannot list /proc", "servers": []}
    servers = []
    for pid, argv in table:
        found = server_script(argv)
        if found is None:
            continue
        index, module = found
        owner = owner_of(pid)
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            exe = None
        # a venv's python is a symlink to the base interpreter, so the command line's
        # interpreter (the shebang of a `vllm` script) says more than /proc/PID/exe
        interpreter = argv[0] if argv[0].startswith("/") and index != 0 else exe
        sites = mapped_vllm_sites(pid)
        how = "mapped" if sites else None
        if not sites and index is not None and argv[index].startswith("/"):
            home = os.path.dirname(os.path.dirname(argv[index]))
            if os.path.isfile(os.path.join(home, "pyvenv.cfg")):
                sites = venv_site_dirs(home)
        if not sites:
            sites = interpreter_site_dirs(interpreter or exe)
        servers.append({"pid": pid, "cmdline": shown_cmdline(argv), "exe": exe,
                        "uid": owner.uid if owner else None,
                        "user": owner.name if owner else None,
                        "interpreter": interpreter, "started_at": started_at(pid),
                        "port": port_of(parsed_argv(pid, argv, index, owner)),
                        "site_dirs": sites,
                        "real_site_dirs": [os.path.realpath(p) for p in sites],
                        "site_from": how or "interpreter"})
    return {"servers": servers}
