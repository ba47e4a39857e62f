"""How the probe travels: the remote command line, the stdin payload, and its answer.

The command carries no inventory value except the interpreter path (and, with become,
the become user), shell-quoted; the plan (venv, signatures) travels as JSON on stdin, so
nothing from the inventory is ever interpreted by a shell.
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import shlex
import threading
import zlib
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Protocol

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.text import printable
from fleetcheck.probe import MODULES as PROBE_MODULES
from fleetcheck.connectors.base import CommandResult, TransportError

if TYPE_CHECKING:
    from fleetcheck.facts import Facts

# stdin: a header line "<magic> <marshal length> <json length>", the probe modules as
# zlib-compressed marshalled code objects (used when the host's Python has the controller's
# bytecode magic: no compiling on every host), the same modules as JSON [[name, source], ...]
# (compiled otherwise), then the plan. A finder first on sys.meta_path serves the modules
# under their fleetcheck.probe.* names, so they import each other as they do locally, and
# each runs only when first imported: a host that verifies its build's bytes never pays
# for the analysis modules (nor the re and ast imports they need).
BOOTSTRAP = (
    "import sys\n"
    "sys.path[:]=[p for p in sys.path if p]\n"  # -I's job where -I is unknown (before 3.4)
    "if sys.version_info<(3,8):sys.stderr.write('fleetcheck-probe: too old: %s at %s\\n'%(sys.version.split()[0],"
    "sys.executable));sys.exit(3)\n"
    "import marshal,zlib,_frozen_importlib as i,_frozen_importlib_external as e\n"
    "b=sys.stdin.buffer;h=b.readline().split()\n"
    "m=zlib.decompress(b.read(int(h[1])));s=zlib.decompress(b.read(int(h[2])))\n"
    "if h[0].decode()==e.MAGIC_NUMBER.hex():c=dict(marshal.loads(m))\n"
    "else:\n"
    " import json;c=dict((n,compile(t,n,'exec')) for n,t in json.loads(s.decode()))\n"
    "class L:\n"
    " def find_spec(n,p=None,t=None):\n"
    "  if n in c or n in('fleetcheck','fleetcheck.probe'):"
    "return i.ModuleSpec(n,L,is_package=n not in c or any(k.startswith(n+'.')for k in c))\n"
    " def create_module(s):return None\n"
    " def exec_module(m):exec(c.get(m.__name__,''),m.__dict__)\n"
    "sys.meta_path.insert(0,L)\n"
    "import fleetcheck.probe.main as p;p.main()\n")


_MODULES_LOCK = threading.Lock()


def probe_modules(with_smoke: bool = False) -> bytes:
    """The probe's modules as the stdin payload starts with them (the plan follows; not
    what `fleetcheck probe-bundle` writes, which is a script with the plan inside).
    Built once per run: every worker thread asks for it at the same moment, and
    lru_cache alone would let each of those concurrent misses compile it again (~20 ms
    of controller CPU each)."""
    with _MODULES_LOCK:
        return build_probe_modules(with_smoke)


def probe_sources(with_smoke: bool) -> list[list[str]]:
    """[[module name, source], ...] of the probe, in dependency order (a package: its
    __init__.py)."""
    directory = os.path.join(os.path.dirname(__file__), "probe")
    sources = []
    for name in PROBE_MODULES:
        if name == "smoke_load" and not with_smoke:
            continue
        path = os.path.join(directory, *name.split("."))
        path = os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"
        with open(path, encoding="utf-8") as handle:
            sources.append(["fleetcheck.probe." + name, handle.read()])
    return sources


@lru_cache(maxsize=2)
def build_probe_modules(with_smoke: bool) -> bytes:
    """The probe modules in dependency order, compiled (marshal, for hosts whose Python
    matches ours) and as source (for the others). The smoke module, and the HTTP stack it
    imports, travels only when a smoke load is planned."""
    sources = probe_sources(with_smoke)
    # compressed: the bundle crosses every SSH connection, and paramiko's per-packet work
    # is controller CPU
    compiled = zlib.compress(marshal.dumps([(name, compile(source, name, "exec"))
                                            for name, source in sources]), 6)
    text = zlib.compress(json.dumps(sources).encode("utf-8"), 6)
    header = b"%s %d %d\n" % (importlib.util.MAGIC_NUMBER.hex().encode(), len(compiled),
                              len(text))
    return header + compiled + text


# Written on stderr by the bootstrap, with its version and path, by a Python older than the
# probe's floor (it exits 3 before reading anything): the bootstrap itself parses on 2.7.
PROBE_FLOOR = (3, 8)
TOO_OLD = b"fleetcheck-probe: too old:"

# Written on stderr by the remote shell when the named interpreter could not be executed
# and python3 runs the probe instead: what stderr holds before it is the shell's reason.
FALLBACK = b"fleetcheck: the named interpreter cannot be executed; running python3\n"
FALLBACK_PYTHON = "python3"


def probe_command(host: ConnectionSettings) -> str:
    """POSIX sh: run the bootstrap (which reads the probe from stdin) under the host's
    interpreter. Only when the shell cannot execute it at all (exit 126: not executable,
    127: not found, as POSIX sh reports a failed exec) is stdin still unread for sure,
    so only then does python3 run it instead. An interpreter that started and failed
    (too old, a broken stdlib) may have read stdin: its exit status and stderr are the
    answer (see interpreter_failure). The probe itself always exits 0. -B: no bytecode is
    written on the host; -E -s: the host's PYTHON* variables and user site are ignored, and
    the bootstrap drops the current directory from sys.path first (-I does all three, but
    a Python older than 3.4 refuses it before it could say its version); -S: no site
    processing (the probe needs none, and a Python with many .pth files takes tens of
    milliseconds to start)."""
    boot = shlex.quote(BOOTSTRAP)
    fallback = "exec %s -S -E -s -B -c %s" % (FALLBACK_PYTHON, boot)
    if host.interpreter == FALLBACK_PYTHON:
        return with_become(host, fallback)
    named = "%s -S -E -s -B -c %s" % (shlex.quote(host.interpreter), boot)
    marker = shlex.quote(FALLBACK.decode().rstrip("\n"))
    return with_become(host, "%s; s=$?; [ $s -ne 126 ] && [ $s -ne 127 ] && exit $s; "
                             "echo %s >&2; %s" % (named, marker, fallback))


def with_become(host: ConnectionSettings, command: str) -> str:
    """Ansible's become, sudo only: the whole command under `sudo -n` (never a password
    prompt: a sudo that wants one fails at once, see decode_answer), as the become user
    when one is given (root otherwise)."""
    if not host.become:
        return command
    user = ["-u", host.become_user] if host.become_user else []
    return " ".join(shlex.quote(part) for part in
                    ["sudo", "-n", *user, "--", "/bin/sh", "-c", command])


def become_failure(result: CommandResult, host: ConnectionSettings) -> TransportError | None:
    """sudo's own refusal (a password is required, not in sudoers, no sudo at all), told
    apart from the probe's answer: sudo prints `sudo: ...` and the probe never ran."""
    if not host.become or result.stdout or result.exit_status == 0:
        return None
    text = printable(result.stderr, 300).strip()
    as_user = host.become_user or "root"
    if "a password is required" in text:
        return TransportError("auth", "become: sudo -n wants a password to run the probe as "
                              "%s (%s); fleetcheck never types one: allow it NOPASSWD for the "
                              "login user" % (as_user, text))
    if "sudo: not found" in text or "sudo: command not found" in text:
        return TransportError("auth", "become: sudo is not installed on this host (%s)" % text)
    if text.startswith("sudo:"):
        return TransportError("auth", "become: sudo refused to run the probe as %s: %s"
                              % (as_user, text))
    return None


def interpreter_failure(result: CommandResult, host: ConnectionSettings) -> TransportError:
    """The probe exits 0: a failed exit with no answer is the interpreter's own failure,
    told in its own words (its stderr), naming which interpreter it was."""
    before, fell_back, after = result.stderr.partition(FALLBACK)
    if fell_back:  # the named one could not be executed: the shell said why, then python3 ran
        why = quote_stderr(before)
        ran = "%s (run because %s cannot be executed: %s)" % (FALLBACK_PYTHON, host.interpreter,
                                                              why)
        tried = "%s (%s) and %s" % (host.interpreter, why, FALLBACK_PYTHON)
    else:
        ran = "the probe's interpreter %s" % host.interpreter
        tried = host.interpreter
        after = result.stderr
    too_old = too_old_python(after)
    if too_old:
        return TransportError("probe", "%s is older than the probe needs (Python %s or newer): "
                              "name a newer one on this host with ansible_python_interpreter "
                              "(or python), or point venv at a 3.8+ install"
                              % (too_old, ".".join(map(str, PROBE_FLOOR))))
    if result.exit_status == 127 and (fell_back or host.interpreter == FALLBACK_PYTHON):
        return TransportError("probe", "no Python interpreter: tried %s (%s)"
                              % (tried, quote_stderr(after)))
    return TransportError("probe", "%s started and failed (exit %d): %s"
                          % (ran, result.exit_status, quote_stderr(after)))


def too_old_python(stderr: bytes) -> str | None:
    """'Python 3.7.16 at /usr/bin/python3.7' when the bootstrap said it is below the floor."""
    for line in stderr.splitlines():
        if line.startswith(TOO_OLD):
            version, _, where = line[len(TOO_OLD):].strip().partition(b" at ")
            return "Python %s at %s" % (printable(version, 40), printable(where, 300) or "?")
    return None


def quote_stderr(data: bytes, limit: int = 800) -> str:
    """A failing interpreter's stderr, bounded: its start says what broke (a fatal error,
    a missing prefix), its end the exception."""
    data = b" | ".join(line.strip() for line in data.splitlines() if line.strip())
    if not data:
        return "no message on stderr"
    if len(data) <= limit:
        return printable(data, limit)
    return "%s ... %s" % (printable(data[:limit // 4], limit),
                          printable(data[-(limit * 3 // 4):], limit))


def probe_payload(plan: dict[str, Any]) -> bytes:
    return probe_modules(bool(plan.get("smoke"))) + json.dumps(plan).encode("utf-8") + b"\n"


class InstallHints(Protocol):
    """What the plan says of where the install is: the inventory's host has these."""

    @property
    def venv(self) -> str | None: ...

    @property
    def site_packages(self) -> str | None: ...

    @property
    def interpreter(self) -> str: ...

    @property
    def vllm_url(self) -> str: ...


def host_plan(host: InstallHints, signatures: list[dict[str, Any]],
              integrity: dict[str, Any] | None = None,
              time_budget_s: float | None = None) -> dict[str, Any]:
    """Everything the probe needs, as data: no inventory value reaches a shell."""
    return {"venv": host.venv, "site_packages": host.site_packages,
            "interpreter": host.interpreter, "serving_port": serving_port(host.vllm_url),
            "signatures": signatures,
            "integrity": integrity, "time_budget_s": time_budget_s,
            # what the servers serve (probe/server_config.py); drafters added by the runner
            "served": {}}


def serving_port(url: str) -> int:
    """The port of the host's vllm_url: the server the fleet is meant to reach (the URL
    was checked when the inventory was read, so its port is one)."""
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)




def decode_answer(result: CommandResult, host: ConnectionSettings,
                  required: tuple[str, ...] = (),
                  complete: Callable[[dict[str, Any]], None] | None = None) -> Facts:
    """The probe's facts, typed, or a TransportError saying why the answer is not one.
    This is the one place an answer is decoded and its types checked (facts_decoder.py):
    past it, the checks read typed facts and may rely on them. `required`: the fact
    families this host's check plan needs (checks/plan.py). (The facts' description is imported here, with the
    first answer: building its classes costs ~25 ms that `fleetcheck --version` need not
    pay.) `complete`: what adds to the facts, as JSON, before their types are checked
    (a container engine's log, engine_logs.py)."""
    from fleetcheck.facts_decoder import MAX_DEPTH, FactsError, decode_facts, open_field
    refused = become_failure(result, host)
    if refused:
        raise refused
    if result.exit_status != 0 and not result.stdout.lstrip().startswith(b"{"):
        raise interpreter_failure(result, host)
    try:
        text = result.stdout.decode("utf-8")
        facts = json.loads(text)
    except RecursionError:
        where = open_field(text, MAX_DEPTH)
        raise TransportError("protocol", "answer is JSON but not shaped like the probe's "
                             "facts: %snested deeper than %d levels"
                             % ("field %s: " % where if where else "", MAX_DEPTH))
    except (UnicodeDecodeError, ValueError):
        raise TransportError(
            "protocol", "answer is not the probe's JSON (exit %d; stdout starts %r; stderr %r)"
            % (result.exit_status, printable(result.stdout, 80), printable(result.stderr, 200)))
    if not isinstance(facts, dict) or "probe_version" not in facts:
        raise TransportError("protocol", "answer is JSON but not the probe's facts")
    if facts.get("fatal"):
        raise TransportError("probe", "probe failed on the host: %s"
                             % printable(str(facts["fatal"]).encode("utf-8", "replace"), 500))
    if complete is not None:
        complete(facts)
    try:
        decoded = decode_facts(facts)
    except FactsError as exc:
        raise TransportError("protocol", "answer is JSON but not shaped like the probe's "
                             "facts: %s" % printable(str(exc).encode("utf-8", "replace"), 300))
    for family in required:
        if facts.get(family) is None:
            raise TransportError("protocol", "the answer holds no `%s` facts, which this "
                                 "host's plan asked for%s" % (family, MISSING_HINTS.get(family, "")))
    return decoded


# why a family a plan asks for can be missing, where that is a known mistake
MISSING_HINTS = {"integrity": " (facts a probe-bundle gathered with --no-integrity are judged "
                              "with --no-integrity)"}


def cut_answer_field(received: bytes) -> str | None:
    """For an answer stopped at the output cap: the field it was inside, if it was JSON."""
    from fleetcheck.facts_decoder import open_field
    if not received.lstrip()[:1] == b"{":
        return None
    return open_field(received.decode("utf-8", "replace"))
