"""Containers on a box: wraps another connector's session (the box's one SSH session, or
this machine for `connection: local`) and runs each command inside a container, as
pyinfra's docker connector wraps its local one.

A box may have several engines, and an engine binary may hold nothing (a docker CLI with
no daemon behind it, beside Podman). So unless `container_engine` pins one, every engine
present (docker, podman, nerdctl, containerd's ctr) is asked whether it holds the
container, in that order, and the first that does runs the command: one POSIX sh script,
one round trip. On Kubernetes nodes kubelet's containers run under containerd; they are
named `POD/CONTAINER` or `NAMESPACE/POD/CONTAINER` and found by kubelet's labels.
`container: auto` lists the running containers of every engine present and probes each
whose command is a vLLM server.

Every failure of the engine (no engine holds the container, not running, daemon down,
permission denied on its socket, an exec that hangs) is a host error of kind `container`
naming the container and quoting each engine's own words, within the host's deadline.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.text import printable
from fleetcheck.connectors.base import (Answerer, CommandResult, Connector, Deadline, EngineLog,
                                        Session, Target, TransportError)
from fleetcheck.variables import Check, Variable, text

DOCKER_LIKE = ("docker", "podman", "nerdctl")  # one CLI: inspect, exec -i, ps --format
ENGINES = DOCKER_LIKE + ("ctr",)
# ctr's own default, then the socket of k3s and RKE2's embedded containerd; a socket
# that does not exist is not dialled (ctr would wait 10 s for it)
CONTAINERD_SOCKETS = ("/run/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock")
CONTAINERD_NAMESPACES = ("k8s.io", "default")  # kubelet's namespace, then ctr's default
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_NAME = "io.kubernetes.pod.name"
POD_CONTAINER = "io.kubernetes.container.name"
# written to stderr by the command inside the container before anything else: its absence
# means the engine never ran the command, and what came before it is the engine's words
INSIDE = b"fleetcheck-inside-container\n"
SERVER_MARKS = ("vllm serve", "vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server",
                "/vllm serve", "vllm.entrypoints.cli.main serve",
                "-m dynamo.vllm")  # NVIDIA Dynamo's vLLM worker
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                           r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
CONTAINERD_NAME = re.compile(r"[A-Za-z0-9]+([._-][A-Za-z0-9]+)*")
ENGINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # docker's and podman's names and ids
TAIL_LINES = 5000  # what the engine streams for the tail: the last lines, cut to bytes here
KUBELET_LOGS = "/var/log/pods"  # kubelet's: NAMESPACE_POD_UID/CONTAINER/RESTARTS.log
# kubelet's CRI log line: time, stream, F(ull) or P(artial), the text
CRI_LINE = re.compile(rb"^\S+ (?:stdout|stderr) ([FP]) ?(.*)$")
# the engine's log of a container, head and tail apart ($mark), or the engine's words
DOCKER_LOG = r"""out=$(bounded "$e" logs --tail 1 "$id" 2>&1 >/dev/null) ||
  { printf '%s error\n%s\n' "$mark" "$out"; exit 0; }
bounded "$e" logs "$id" 2>&1 | head -c "$head"
printf '\n%s\n' "$mark"
bounded "$e" logs --tail "$lines" "$id" 2>&1 | tail -c "$tail"
"""
KUBELET_LOG = r"""f=$(ls -t "$logs"/NAMESPACE_"$pod"_*/"$c"/*.log 2>/dev/null | head -n 1)
[ -n "$f" ] || { printf '%s error\nno log of it under %s\n' "$mark" "$logs"; exit 0; }
printf '%s\n' "$f"
head -c "$head" "$f"
printf '\n%s\n' "$mark"
tail -c "$tail" "$f"
"""

# The engine-finding functions every script starts with. Inventory values reach them only
# as shell variables assigned with shlex.quote (assign(), call()). Their stderr protocol:
# `fleetcheck-said ENGINE` / its words / `fleetcheck-said-end` for an engine that does not
# hold the container; `fleetcheck-using<TAB>ENGINE<TAB>ID[<TAB>SOCKET<TAB>NAMESPACE]` just
# before the engine runs the command; `fleetcheck-ambiguous NAMESPACE ID...`.
FUNCTIONS = r"""nl='
'
PATH=$PATH:/var/lib/rancher/rke2/bin
said() { printf 'fleetcheck-said %s\n%s\nfleetcheck-said-end\n' "$1" "$2" >&2; }
using() {
  printf 'fleetcheck-using' >&2; for f in "$@"; do printf '\t%s' "$f" >&2; done; printf '\n' >&2
}
has() {
  command -v "$1" >/dev/null 2>&1 && return 0
  [ -z "$pinned" ] || said "$1" "not found on the box (PATH=$PATH)"; return 1
}
bounded() {
  if command -v timeout >/dev/null 2>&1; then timeout -s KILL "$bound" "$@"; else "$@"; fi
}
asked() {
  if [ "$2" = 124 ] || [ "$2" = 137 ]; then said "$1" "did not answer within $bound s${3:+ ($3)}"
  else said "$1" "$3"; fi
}
socket_up() {
  [ -S "$1" ] && return 0; said ctr "no containerd socket at $1"; return 1
}
run_docker() {
  using "$1" "$3"
  if [ -n "$user" ]; then exec "$1" exec -i -u "$user" "$2" sh -c "$inside"; fi
  exec "$1" exec -i "$2" sh -c "$inside"
}
run_ctr() {
  using ctr "$3" "$1" "$2"
  if [ -n "$user" ]; then
    exec ctr -a "$1" -n "$2" tasks exec --exec-id "$exec_id" --user "$user" "$3" sh -c "$inside"
  fi
  exec ctr -a "$1" -n "$2" tasks exec --exec-id "$exec_id" "$3" sh -c "$inside"
}
ask_docker() {
  has "$1" || return 0
  out=$(bounded "$1" container inspect --format '{{.Id}}' "$want" 2>&1) &&
    run_docker "$1" "$want" "${out##*"$nl"}"
  asked "$1" $? "$out"
}
running() {
  printf '%s\n' "$2" | awk -v id="$1" '$1 == id && $3 == "RUNNING" {f = 1} END {exit !f}'
}
ask_ctr() {
  sock=$1; shift
  socket_up "$sock" || return 0
  for ns in "$@"; do
    if [ -n "$filter" ]; then
      ids=$(bounded ctr -a "$sock" -n "$ns" containers ls -q "$filter" 2>&1) ||
        { asked ctr $? "$ids"; return 0; }
      [ -n "$ids" ] || continue
      tasks=$(bounded ctr -a "$sock" -n "$ns" tasks ls 2>&1) || { asked ctr $? "$tasks"; return 0; }
      live=''
      for i in $ids; do if running "$i" "$tasks"; then live="$live $i"; fi; done
      set -- $live
      if [ $# -gt 1 ]; then printf 'fleetcheck-ambiguous %s%s\n' "$ns" "$live" >&2; exit 125; fi
      if [ $# -eq 1 ]; then run_ctr "$sock" "$ns" "$1"; fi
      run_ctr "$sock" "$ns" "${ids%%"$nl"*}"
    elif out=$(bounded ctr -a "$sock" -n "$ns" containers info "$want" 2>&1 >/dev/null); then
      run_ctr "$sock" "$ns" "$want"
    else
      s=$?; asked ctr $s "$out"
      case $s in 124|137) return 0;; esac  # a wedged containerd: its other namespaces too
    fi
  done
  [ -z "$filter" ] || said ctr "no container of $wanted in namespaces $* at $sock"
}
list_docker() {
  has "$1" || return 0
  if out=$(bounded "$1" ps --no-trunc --format '{{.ID}}\t{{.Names}}\t{{.Command}}' 2>&1); then
    printf 'fleetcheck-engine-%s %s\n%s\n' "$mark" "$1" "$out"
  else
    asked "$1" $? "$out"
  fi
}
list_ctr() {
  sock=$1; shift
  socket_up "$sock" || return 0
  for ns in "$@"; do
    tasks=$(bounded ctr -a "$sock" -n "$ns" tasks ls 2>&1) || { asked ctr $? "$tasks"; return 0; }
    for i in $(printf '%s\n' "$tasks" | awk 'NR > 1 && $3 == "RUNNING" {print $1}'); do
      if info=$(bounded ctr -a "$sock" -n "$ns" containers info "$i" 2>&1); then
        printf 'fleetcheck-ctr-%s\t%s\t%s\t%s\n%s\n' "$mark" "$sock" "$ns" "$i" "$info"
      fi
    done
  done
}
"""


@dataclass(frozen=True)
class KubeName:
    """A container named as Kubernetes names it, matched against kubelet's labels."""

    pod: str
    container: str
    namespace: str | None = None

    def label_filter(self) -> str:
        """ctr's filter syntax; the names are DNS names (checked), so quoting is plain."""
        pairs = [(POD_NAME, self.pod), (POD_CONTAINER, self.container)]
        if self.namespace:
            pairs.append((POD_NAMESPACE, self.namespace))
        return ",".join('labels."%s"=="%s"' % pair for pair in pairs)

    def words(self) -> str:
        where = "namespace %s, " % self.namespace if self.namespace else ""
        return "%spod %s, container %s" % (where, self.pod, self.container)


def kube_name(spec: str) -> KubeName | None:
    """The Kubernetes names in `container: [NAMESPACE/]POD/CONTAINER`, None for an engine's
    own name or id (which cannot hold '/'); ValueError says what is wrong."""
    if "/" not in spec:
        return None
    parts = spec.split("/")
    if len(parts) not in (2, 3):
        raise ValueError("Kubernetes names are POD/CONTAINER or NAMESPACE/POD/CONTAINER, got %r"
                         % spec)
    *namespace, pod, container = parts
    if namespace and not DNS_LABEL.fullmatch(namespace[0]):
        raise ValueError("namespace %r is not a Kubernetes namespace name (lowercase letters, "
                         "digits and '-')" % namespace[0])
    if not DNS_SUBDOMAIN.fullmatch(pod):
        raise ValueError("pod %r is not a Kubernetes pod name (lowercase letters, digits, '-' "
                         "and '.')" % pod)
    if not DNS_LABEL.fullmatch(container):
        raise ValueError("container %r is not a Kubernetes container name (lowercase letters, "
                         "digits and '-')" % container)
    return KubeName(pod, container, namespace[0] if namespace else None)


def container_var_problem(field: str, value: str) -> str | None:
    """What makes an inventory value of a container variable unusable, or None."""
    if field == "container" and value.lower() == "auto" and value != "auto":
        return "is %r: write `auto` (lowercase) to find the box's vLLM containers" % value
    if field in ("container", "container_user") and value.startswith("-"):
        return "must not start with '-' (the engine would read it as an option), got %r" \
            % value
    if field == "container" and value != "auto":
        try:
            kube_name(value)
        except ValueError as exc:
            return str(exc)
    if field == "container_engine" and value not in ENGINES:
        return "must be one of %s, got %r" % (", ".join(ENGINES), value)
    if field == "containerd_namespace" and not CONTAINERD_NAME.fullmatch(value):
        return "is not a containerd namespace (letters, digits, '.', '_', '-'), got %r" % value
    if field == "containerd_address" and (not value.startswith("/") or " " in value):
        return "must be the absolute path of containerd's socket, got %r" % value
    return None


NUMBERS_ALLOWED = ("container", "container_user")


def checked(setting: str) -> Check:
    """The inventory's check of one container variable: container_var_problem's."""
    def check(value: Any) -> str:
        if setting in NUMBERS_ALLOWED and isinstance(value, int) and \
                not isinstance(value, bool):
            value = str(value)  # a uid (`container_user: 1000`), an all-digit short id
        value = text(value)
        problem = container_var_problem(setting, value)
        if problem:
            raise ValueError(problem)
        return value
    return check


# the inventory variables the wrapper reads, whatever the box's connection
VARIABLES = (
    Variable("container", ("container",), checked("container"), common_word=True,
             not_typos=("containers",)),
    Variable("container_engine", ("container_engine",), checked("container_engine")),
    Variable("container_user", ("container_user",), checked("container_user")),
    Variable("containerd_namespace", ("containerd_namespace",), checked("containerd_namespace")),
    Variable("containerd_address", ("containerd_address",), checked("containerd_address")),
)


@dataclass(frozen=True)
class Placement:
    """The container a command runs in: which engine holds it, its id, and its names."""

    engine: str
    id: str
    name: str | None = None  # the engine's own name (docker, podman, nerdctl)
    address: str | None = None  # containerd's socket (ctr)
    namespace: str | None = None  # containerd's namespace (ctr)
    kube: KubeName | None = None

    def facts(self) -> dict[str, str]:
        """For the results: a reader sees which engine ran the probe, and in what."""
        facts = {"engine": self.engine, "id": self.id}
        optional = {"name": self.name, "containerd_address": self.address,
                    "containerd_namespace": self.namespace}
        if self.kube:
            optional.update(k8s_namespace=self.kube.namespace, k8s_pod=self.kube.pod,
                            k8s_container=self.kube.container)
        facts.update((key, value) for key, value in optional.items() if value)
        return facts

    def label(self) -> str:
        """Its part of `BOX/...` under `container: auto`."""
        if self.kube:
            return "/".join(n for n in (self.kube.namespace, self.kube.pod, self.kube.container)
                            if n)
        return self.name or self.id


def quote_text(data: bytes, limit: int = 400) -> str:
    return printable(data.strip(), limit).strip() or "(no message)"


def looks_like_vllm_server(command: str) -> bool:
    text = " ".join(command.replace('"', " ").split())
    return any(mark in text for mark in SERVER_MARKS) or text.startswith("vllm serve")


def assign(**values: str) -> str:
    """Shell variables holding inventory values, each quoted once."""
    return "".join("%s=%s\n" % (name, shlex.quote(value)) for name, value in values.items())


def call(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words) + "\n"


def engine_bound(deadline: Deadline) -> str:
    """Seconds one engine may take to say whether it holds the container (where the box
    has `timeout`): a wedged daemon is skipped, and the host's deadline is left for the
    engines after it and for the probe."""
    return "%d" % max(2, min(15, deadline.left() / 4))


def engines_of(host: ConnectionSettings) -> tuple[str, ...]:
    return (host.container_engine,) if host.container_engine else ENGINES


def containerd_calls(host: ConnectionSettings, function: str) -> str:
    """`function SOCKET NAMESPACE...` for each containerd socket to try."""
    sockets = (host.containerd_address,) if host.containerd_address else CONTAINERD_SOCKETS
    namespaces = ((host.containerd_namespace,) if host.containerd_namespace
                  else CONTAINERD_NAMESPACES)
    return "".join(call(function, socket, *namespaces) for socket in sockets)


def cri_text(data: bytes) -> bytes:
    """kubelet's CRI log as the lines the server wrote (partial lines joined)."""
    out, partial = [], b""
    for line in data.split(b"\n"):
        match = CRI_LINE.match(line)
        if match is None:
            continue
        partial += match.group(2)
        if match.group(1) == b"F":
            out.append(partial)
            partial = b""
    return b"\n".join(out) + (b"\n" if out else b"")


def said_blocks(text: str) -> Iterator[tuple[str, str]]:
    """(engine, words) for each `fleetcheck-said` block of the script's output."""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("fleetcheck-said ") and line != "fleetcheck-said-end":
            words = []
            for more in lines:
                if more == "fleetcheck-said-end":
                    break
                words.append(more)
            yield line[len("fleetcheck-said "):], " ".join(w.strip() for w in words if w.strip())


def engines_said(text: str) -> str:
    return "; ".join("%s: %s" % (engine, words or "(no message)")
                     for engine, words in said_blocks(text))


class ContainerSession(Session):
    """Commands run inside one container, through the box's session: the one `container`
    names (each engine present asked for it), or one already found (`placed`)."""

    reads_engine_log = True

    def __init__(self, inner: Session, host: ConnectionSettings, deadline: Deadline,
                 placed: Placement | None = None):
        self.inner = inner
        self.host = host
        self.deadline = deadline
        self.spec = placed.label() if placed else host.container
        self.placed = placed

    def placement(self) -> dict[str, str] | None:
        return self.placed.facts() if self.placed else None

    def command(self, command: str) -> str:
        inside = "printf %s >&2; %s" % (shlex.quote(INSIDE.decode()[:-1] + "\\n"), command)
        # an exec id unique in the container whoever else execs into it at the same time
        prelude = FUNCTIONS + assign(inside=inside, user=self.host.container_user or "",
                                     exec_id="fleetcheck-" + secrets.token_hex(8),
                                     bound=engine_bound(self.deadline))
        if self.placed is not None:
            if self.placed.engine == "ctr":
                return prelude + call("run_ctr", self.placed.address or "",
                                      self.placed.namespace or "", self.placed.id)
            return prelude + call("run_docker", self.placed.engine, self.placed.id,
                                  self.placed.id)
        kube = kube_name(self.spec)
        engines = engines_of(self.host)
        script = prelude + assign(
            want=self.spec, filter=kube.label_filter() if kube else "",
            wanted=kube.words() if kube else self.spec,
            pinned="1" if self.host.container_engine or kube else "")
        if not kube:
            script += "".join(call("ask_docker", e) for e in engines if e in DOCKER_LIKE)
        if "ctr" in engines:
            script += "if has ctr; then\n%sfi\n" % containerd_calls(self.host, "ask_ctr")
        return script + "printf 'fleetcheck-none\\n' >&2; exit 125\n"

    def run(self, command: str, payload: bytes, cancel: threading.Event | None = None,
            answer: Answerer | None = None) -> CommandResult:
        where = "container %s on %s" % (self.spec, self.host.name)
        if self.placed is None and kube_name(self.spec) and \
                self.host.container_engine not in (None, "ctr"):
            raise TransportError("container", "%s: Kubernetes names are found by kubelet's "
                                 "labels through containerd's ctr, but container_engine is %s"
                                 % (where, self.host.container_engine))
        try:
            result = self.inner.run(self.command(command), payload, cancel, answer)
        except TransportError as exc:
            if exc.kind == "timeout":
                raise TransportError("container", "%s: exec did not finish within the host "
                                     "deadline of %.0fs (%s)" % (where, self.deadline.seconds,
                                                                 exc.message))
            raise
        start = result.stderr.find(INSIDE)
        header = (result.stderr if start < 0 else result.stderr[:start]).decode(
            "utf-8", "replace")
        engine_words = self.read_header(header)
        if start < 0:
            raise TransportError("container", "%s: %s" % (where, self.failure(
                header, engine_words, result.exit_status)))
        return CommandResult(result.stdout, result.stderr[start + len(INSIDE):],
                             result.exit_status)

    def engine_log(self, head_bytes: int, tail_bytes: int,
                   cancel: threading.Event | None = None) -> EngineLog | None:
        """The log the engine keeps of the container the probe ran in: docker, podman and
        nerdctl give it (`logs`); for containerd, kubelet's file of a Kubernetes
        container (containerd keeps none of its own). One command on the box."""
        placed = self.placed
        if placed is None:
            return None
        mark = "fleetcheck-log-" + secrets.token_hex(8)
        values = dict(mark=mark, head=str(head_bytes + 1), tail=str(tail_bytes),
                      bound=engine_bound(self.deadline))
        if placed.engine in DOCKER_LIKE:
            source = "%s logs %s" % (placed.engine, placed.name or placed.id[:12])
            script = FUNCTIONS + assign(e=placed.engine, id=placed.id, lines=str(TAIL_LINES),
                                        **values) + DOCKER_LOG
        elif placed.engine == "ctr" and placed.kube is not None:
            kube = placed.kube
            source = "kubelet's log of %s" % kube.words()
            # the names are DNS labels (checked): no glob or separator in them
            script = assign(logs=KUBELET_LOGS, ns=kube.namespace or "", pod=kube.pod,
                            c=kube.container, **values) + KUBELET_LOG.replace(
                                "NAMESPACE", '"$ns"' if kube.namespace else "*")
        else:
            return None
        result = self.inner.run(script, b"", cancel)
        out = result.stdout
        if out.startswith(mark.encode() + b" error\n"):
            return EngineLog(source, b"", None, quote_text(out[len(mark) + 7:]) or
                             "exit %d" % result.exit_status)
        head, found, tail = out.partition(b"\n" + mark.encode() + b"\n")
        if not found:
            return EngineLog(source, b"", None, "the log read stopped (exit %d): %s" % (
                result.exit_status, quote_text(result.stderr)))
        if placed.engine == "ctr":
            path, _, head = head.partition(b"\n")
            source = "%s (%s)" % (source, printable(path, 300))
        whole = len(head) <= head_bytes
        head = head[:head_bytes]
        if placed.engine == "ctr":
            if not whole:  # a CRI line cut inside its text would pass for a whole one
                head = head[:head.rfind(b"\n") + 1]
            head, tail = cri_text(head), cri_text(tail)
        return EngineLog(source, head, None if whole else tail)

    def read_header(self, header: str) -> str:
        """Records the engine the script used; returns what the engine itself wrote."""
        lines = header.splitlines()
        for index, line in enumerate(lines):
            if line.startswith("fleetcheck-using\t") and self.placed is None:
                engine, cid, *rest = line.split("\t")[1:] + ["", ""]
                ctr = engine == "ctr"
                kube = kube_name(self.spec)
                self.placed = Placement(engine, cid, None if ctr or kube else self.spec,
                                        rest[0] if ctr else None, rest[1] if ctr else None,
                                        kube)
            if line.startswith("fleetcheck-using\t"):
                return "\n".join(lines[index + 1:])
        return header

    def failure(self, header: str, engine_words: str, status: int) -> str:
        """Why the command never ran inside the container, in the engines' own words."""
        if self.placed is not None:
            return "%s could not run the probe in it (id %s, exit %d): %s" % (
                self.placed.engine, self.placed.id, status, quote_text(engine_words.encode()))
        ambiguous = [line.split()[1:] for line in header.splitlines()
                     if line.startswith("fleetcheck-ambiguous ")]
        if ambiguous:
            namespace, *ids = ambiguous[0]
            return ("it matches %d running containers in containerd namespace %s (%s): name "
                    "its Kubernetes namespace too, as NAMESPACE/POD/CONTAINER"
                    % (len(ids), namespace, ", ".join(ids)))
        said = list(said_blocks(header))
        if "fleetcheck-none" not in header:
            return "the engine-finding script failed (exit %d): %s" % (
                status, quote_text(header.encode()))
        if not said:
            return ("container engine not found on the box: none of %s is in its PATH"
                    % ", ".join(engines_of(self.host)))
        if all(words.startswith("not found on the box") for _, words in said):
            return "container engine %s not found on the box" % " or ".join(e for e, _ in said)
        return "no container engine on the box holds it: %s" % quote_text(
            engines_said(header).encode(), 1200)


class ContainerConnector(Connector):
    """Wraps the connector of the box's `connection`; its capabilities are the box's."""

    def __init__(self, inner: Connector):
        self.inner = inner
        self.connection = inner.connection
        self.can_answer = inner.can_answer
        self.can_cancel = inner.can_cancel

    def open(self, host: ConnectionSettings, deadline: Deadline,
             cancel: threading.Event | None = None) -> Session:
        return self.inner.open(host, deadline, cancel)

    def targets(self, host: ConnectionSettings, session: Session, deadline: Deadline,
                cancel: threading.Event | None = None) -> list[Target]:
        if host.container != "auto":
            return [Target(host.name, ContainerSession(session, host, deadline))]
        return [Target("%s/%s" % (host.name, label),
                       ContainerSession(session, host, deadline, placed))
                for label, placed in self.vllm_containers(host, session, deadline, cancel)]

    def vllm_containers(self, host: ConnectionSettings, session: Session, deadline: Deadline,
                        cancel: threading.Event | None) -> list[tuple[str, Placement]]:
        """The running containers of every engine present whose command is a vLLM server,
        each with the name it is reported by (unique on the box)."""
        engines = engines_of(host)
        mark = secrets.token_hex(8)  # unknown to any container: its command cannot forge one
        listing = FUNCTIONS + "exec 2>&1\n" + assign(
            pinned="1" if host.container_engine else "", bound=engine_bound(deadline),
            mark=mark)
        listing += "".join(call("list_docker", e) for e in engines if e in DOCKER_LIKE)
        if "ctr" in engines:
            listing += "if has ctr; then\n%sfi\n" % containerd_calls(host, "list_ctr")
        try:
            result = session.run(listing, b"", cancel)
        except TransportError as exc:
            if exc.kind == "timeout":
                raise TransportError("container", "listing containers on %s did not finish "
                                     "within the host deadline (%s)" % (host.name, exc.message))
            raise
        text = result.stdout.decode("utf-8", "replace")
        seen: set[str] = set()
        running: list[str] = []
        found: list[tuple[str, Placement]] = []
        for placed, command in listed_containers(text, mark, Asked.of(host)):
            if placed.id in seen:  # podman-docker's docker, nerdctl beside ctr: one container
                continue
            seen.add(placed.id)
            running.append(placed.label())
            if looks_like_vllm_server(command):
                label = placed.label()
                if any(label == other for other, _ in found):
                    label += "@" + placed.engine
                found.append((label, placed))
        if found:
            return found
        if any(engine == host.container_engine and words.startswith("not found on the box")
               for engine, words in said_blocks(text)):
            raise TransportError("container", "container engine %s not found on the box"
                                 % host.container_engine)
        said = engines_said(text)
        raise TransportError("container", "container: auto found no running container on %s "
                             "whose command is a vLLM server (running: %s)%s" % (
                                 host.name, quote_text(", ".join(running).encode())
                                 if running else "none",
                                 "; engines skipped: " + quote_text(said.encode(), 1200)
                                 if said else ""))


@dataclass(frozen=True)
class Asked:
    """What a listing asked: only rows under these engines, sockets and namespaces are
    taken, so no text a container prints can choose the program that runs next."""

    engines: tuple[str, ...]
    sockets: tuple[str, ...]
    namespaces: tuple[str, ...]

    @classmethod
    def of(cls, host: ConnectionSettings) -> "Asked":
        return cls(engines_of(host),
                   (host.containerd_address,) if host.containerd_address else CONTAINERD_SOCKETS,
                   (host.containerd_namespace,) if host.containerd_namespace
                   else CONTAINERD_NAMESPACES)


def listed_containers(text: str, mark: str, asked: Asked) -> Iterator[tuple[Placement, str]]:
    """(where, command) for each running container the listing script printed. Section
    lines carry the listing's random `mark`, and name an engine, socket and namespace
    that were asked; any other line starting one is a container's text, never a section."""
    engine_line, ctr_line = "fleetcheck-engine-%s " % mark, "fleetcheck-ctr-%s\t" % mark
    section: list[str] = []
    block: list[str] = []
    for line in text.splitlines() + [None]:
        # ctr's JSON escapes what a container wrote, so an engine's own words (a
        # `fleetcheck-said` block) are the only other line that can end its block
        ends_ctr = bool(section) and section[0] == "ctr" and line is not None and \
            line.startswith("fleetcheck-said ")
        if line is None or ends_ctr or line.startswith((engine_line, ctr_line)):
            if section and section[0] == "ctr":
                found = containerd_container(section[1:], "\n".join(block))
                if found is not None:
                    yield found
            block = []
            section = []
            if line is None or ends_ctr:
                continue
            if line.startswith(engine_line):
                engine = line[len(engine_line):]
                if engine in asked.engines and engine in DOCKER_LIKE:
                    section = ["docker-like", engine]
            else:
                where = line[len(ctr_line):].split("\t")
                if "ctr" in asked.engines and len(where) == 3 and \
                        where[0] in asked.sockets and where[1] in asked.namespaces:
                    section = ["ctr"] + where
            continue
        if section and section[0] == "docker-like":
            cid, _, rest = line.partition("\t")
            name, _, command = rest.partition("\t")
            # a row a container's own command could forge (its text holds a newline) names
            # no container an engine would make: never handed to the engine
            if ENGINE_NAME.fullmatch(cid.strip()) and ENGINE_NAME.fullmatch(name.strip()):
                yield Placement(section[1], cid.strip(), name=name.strip()), command
        else:
            block.append(line)


def containerd_container(where: list[str], info: str) -> tuple[Placement, str] | None:
    """A container from `ctr containers info` (labels, OCI spec), or None if unreadable."""
    if len(where) != 3:
        return None
    address, namespace, cid = where
    try:
        data = json.loads(info)
        labels = data.get("Labels") or {}
        args = (data.get("Spec") or {}).get("process", {}).get("args") or []
    except (ValueError, AttributeError):
        return None
    kube = None
    if labels.get(POD_NAME) and labels.get(POD_CONTAINER):
        names = [labels.get(POD_NAMESPACE), labels[POD_NAME], labels[POD_CONTAINER]]
        try:  # labels are the box's words: reported only when they are Kubernetes names
            kube = kube_name("/".join(str(n) for n in names if n))
        except ValueError:
            kube = None
    return (Placement("ctr", cid, address=address, namespace=namespace, kube=kube),
            " ".join(str(a) for a in args))
