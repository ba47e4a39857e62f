"""What a host serves, as the results keep it and as the group check reads it back.

The results hold a host's `served` list as JSON (`server_summary` per running server,
`model_summary` with `named_by_expectation` per drafter only an expectation names). The
group check never reads those dicts: `HostServed.of` types them once, a server as a
`ServerEntry`, a named drafter as a `NamedDrafter`, and what the group compares as a
`ServedKey`. A host's key is always a set of keys (one per distinct config served), so
no reader tells a shape by its length."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Facts, ModelPlace, ServedProcess

DRAFTER_ID = "drafter-config"
DRAFTER_TITLE = "Drafter config against this install's code"
LOADED_ID = "drafter-loaded"
LOADED_TITLE = "Drafter config as this vLLM loads it"
SERVED_ID = "served-config"
SERVED_TITLE = "Same served config across the group, expected drafter"
IDS = (DRAFTER_ID, LOADED_ID, SERVED_ID)
TITLES = {DRAFTER_ID: DRAFTER_TITLE, LOADED_ID: LOADED_TITLE, SERVED_ID: SERVED_TITLE}
NAMED = "named_by_expectation"  # the field that tells a named drafter from a server


def judged_pids(facts: Facts) -> set[int]:
    """The servers judged against the checked install's code: those running it (their
    site dirs hold it) and the one on the host's vllm_url port, whatever it runs. As for
    install-running, servers of other installs on other ports are named, not judged:
    another install's code reads its drafter its own way."""
    install = facts.install
    site = install.site_real if install.site_real is not None else install.site_packages
    port = facts.servers.serving_port
    return {s.pid for s in facts.servers.servers
            if (site and site in (s.real_site_dirs or s.site_dirs)) or
            (port is not None and s.port == port)}


def served_summary(facts: Facts) -> list[dict[str, Any]] | None:
    """What each server of the host serves, and each drafter an expectation named."""
    served = facts.served
    if served is None:
        return None
    port = facts.servers.serving_port
    judged = judged_pids(facts)
    return [dict(server_summary(s, facts, port), judged=s.pid in judged)
            for s in served.servers] + \
        [model_summary(m, named=True) for m in served.named]


def model_summary(model: ModelPlace | None, named: bool = False) -> dict[str, Any]:
    if model is None:
        return {}
    out = {"spec": model.spec, "kind": model.kind, "dir": model.dir,
           "revision": model.revision, "revision_from": model.revision_from,
           "cache": model.cache, "cache_from": model.cache_from, "error": model.error,
           "config_sha256": config_digest(model)}
    if named:
        out[NAMED] = True
    return out


def server_summary(server: ServedProcess, facts: Facts,
                   serving_port: int | None) -> dict[str, Any]:
    """What one server serves, from where, which revision, and the evidence."""
    notes = list(server.errors)
    http = server.http
    witness: dict[str, Any] | None = None
    if http is not None:
        witness = {"url": http.url, "error": http.error,
                   "models": [m.id for m in http.models], "version": http.version}
        ids = [m.id for m in http.models if m.id]
        expected_ids = server.served_names or ([server.target] if server.target else [])
        if ids and expected_ids and sorted(ids) != sorted(expected_ids):
            notes.append("the server's /v1/models lists %s; its command line serves %s"
                         % (", ".join(ids), ", ".join(expected_ids)))
        roots = [m.root for m in http.models if m.root]
        if roots and server.target and server.target not in roots:
            notes.append("the server's /v1/models root is %s; its command line's model is %s"
                         % (", ".join(roots), server.target))
        install_version = facts.version_file.version if facts.version_file else None
        if http.version and install_version and http.version != install_version:
            notes.append("the server's /version says %s; the checked install on disk is %s"
                         % (http.version, install_version))
    return {"pid": server.pid, "port": server.port,
            "serving": serving_port is not None and server.port == serving_port,
            "served_names": list(server.served_names), "target": model_summary(
                server.target_model), "method": server.method, "method_from": server.method_from,
            "drafter": model_summary(server.drafter_model) if server.drafter_model else None,
            "num_speculative_tokens": server.num_speculative_tokens,
            "spec_from": server.spec_from, "env": dict(server.env),
            "environ_error": server.environ_error, "http": witness, "notes": notes,
            "log": log_summary(server)}


def log_summary(server: ServedProcess) -> dict[str, Any] | None:
    """Where the server's log was read, how much, and the values it printed."""
    log = server.log
    if log is None:
        return None
    out: dict[str, Any] = {"source": log.source, "path": log.path, "bytes": log.bytes,
                           "lines_read": log.lines_read, "startups": log.startups}
    if log.aux_layers is not None:
        out["aux_layers"] = list(log.aux_layers.ids)
    if log.engine is not None and log.engine.spec:
        out["speculative_config"] = dict(log.engine.spec)
    if log.runner_v2 is not None:
        out["v2_runner"] = True
    if log.metrics is not None:
        out["live"] = {"time": log.metrics.time, "values": dict(log.metrics.values or {})}
    if log.fatal:
        out["fatal"] = [line.text for line in log.fatal]
    if log.source is None:
        out["tried"] = list(log.tried)
    return out


def config_digest(model: ModelPlace) -> str | None:
    """sha256 of the config as read (keys sorted): what tells two drafters apart that carry
    no hub revision (a local directory, `./drafter` resolved from each server's cwd)."""
    if model.config is None or not isinstance(model.config.data, dict):
        return None
    text = json.dumps(model.config.data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


KEY_NAMES = ("target", "drafter", "drafter revision", "method", "num_speculative_tokens")


@dataclass(frozen=True)
class ServedKey:
    """What the group compares of one server: target, drafter, the drafter's identity
    (its hub revision, else `config <sha256 prefix>`), method and num_speculative_tokens."""

    target: str | None
    drafter: str | None
    identity: str | None
    method: str | None
    tokens: str

    def fields(self) -> tuple[str | None, ...]:
        return (self.target, self.drafter, self.identity, self.method, self.tokens)

    def label(self) -> str:
        shown = self.identity if self.identity and self.identity.startswith("config ") else \
            (self.identity or "no revision")[:12]  # a hub sha, or the config's digest
        return "target %s, drafter %s@%s, method %s, num_speculative_tokens %s" % (
            self.target, self.drafter, shown, self.method, self.tokens)

    def differences(self, other: ServedKey) -> list[str]:
        return [name for name, a, b in zip(KEY_NAMES, self.fields(), other.fields())
                if a != b]


def describe(key: frozenset[ServedKey]) -> str:
    return " | ".join(sorted(k.label() for k in key))


def differences(mine: frozenset[ServedKey], other: frozenset[ServedKey]) -> list[str]:
    """The fields two hosts' keys differ in, when each is one config; else the set."""
    if len(mine) == 1 and len(other) == 1:
        return next(iter(mine)).differences(next(iter(other)))
    return ["the set of servers"]


@dataclass(frozen=True)
class DrafterEntry:
    """A drafter as the results name it."""

    spec: str | None
    revision: str | None
    config_sha256: str | None
    error: str | None

    @classmethod
    def of(cls, data: Any) -> DrafterEntry | None:
        data = mapping(data)
        if not data:
            return None
        return cls(text(data.get("spec")), text(data.get("revision")),
                   text(data.get("config_sha256")), text(data.get("error")))

    def identity(self) -> str | None:
        return self.revision or ("config %s" % self.config_sha256[:12]
                                 if self.config_sha256 else None)

    def label(self) -> str:
        return (self.spec or "?") + ("@" + self.revision[:12] if self.revision else "")


@dataclass(frozen=True)
class ServerEntry:
    """One running server, as the results keep it."""

    pid: int | None
    port: int | None
    serving: bool  # on the host's vllm_url port
    judged: bool  # of the checked install, or on vllm_url
    target: str | None
    drafter: DrafterEntry | None
    method: str | None
    tokens: str
    notes: tuple[str, ...]

    @classmethod
    def of(cls, data: dict[str, Any]) -> ServerEntry:
        pid, port = data.get("pid"), data.get("port")
        return cls(pid=pid if isinstance(pid, int) else None,
                   port=port if isinstance(port, int) else None,
                   serving=data.get("serving") is True,
                   judged=data.get("judged", True) is not False,
                   target=text(mapping(data.get("target")).get("spec")),
                   drafter=DrafterEntry.of(data.get("drafter")),
                   method=text(data.get("method")),
                   tokens=str(data.get("num_speculative_tokens")),
                   notes=tuple(str(n) for n in data.get("notes") or []))

    def key(self) -> ServedKey:
        drafter = self.drafter
        return ServedKey(self.target, drafter.spec if drafter else None,
                         drafter.identity() if drafter else None, self.method, self.tokens)

    def words(self) -> str:
        return "pid %s (port %s) serves drafter %s" % (
            self.pid, self.port, self.drafter.label() if self.drafter else "none")


@dataclass(frozen=True)
class HostServed:
    """A host's `served` list, typed: its servers and the drafters only an expectation
    named."""

    servers: tuple[ServerEntry, ...]
    named: tuple[DrafterEntry, ...]

    @classmethod
    def of(cls, entries: list[dict[str, Any]] | None) -> HostServed:
        servers, named = [], []
        for entry in entries or []:
            if not isinstance(entry, dict):
                continue
            if entry.get(NAMED) is True:
                drafter = DrafterEntry.of(entry)
                if drafter is not None:
                    named.append(drafter)
            else:
                servers.append(ServerEntry.of(entry))
        return cls(tuple(servers), tuple(named))

    def judged(self) -> list[ServerEntry]:
        return [s for s in self.servers if s.judged]

    def compared(self) -> list[ServerEntry]:
        """The servers the group compares: the one on vllm_url, else every judged one."""
        judged = self.judged()
        return [s for s in judged if s.serving] or judged

    def key(self) -> frozenset[ServedKey] | None:
        compared = self.compared()
        return frozenset(s.key() for s in compared) if compared else None
