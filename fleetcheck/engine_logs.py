"""A server's log that only its container engine keeps (`podman logs`, `docker logs`,
kubelet's files under /var/log/pods, `kubectl logs`): the probe, inside the container,
finds the server writing to the container's own stream and sends back the install's
format strings; the controller reads the engine's log through the session and parses it
with them (probe/server_log.py's parser). What leaves this module is what the probe's own
log facts hold: the parsed values and the lines that decided, secrets redacted.

The format strings are the host's words: the controller splits them itself (nothing the
host sends is compiled), keeps only short formats and cuts long lines, and matching is a
linear scan (probe/server_log.py's match_format), so a hostile host cannot make the parse
cost more than reading the lines."""

from __future__ import annotations

import threading
from typing import Any

from fleetcheck.connectors.base import EngineLog, Session, TransportError
from fleetcheck.probe.server_log import CONVERSIONS, HEAD_BYTES, TAIL_BYTES, log_facts, template

KINDS = ("engine", "aux_layers", "metrics", "runner_v2", "fatal")  # what parse_lines reads
MAX_FORMATS = 16  # per kind; an install prints a handful
MIN_NEEDLE = 8  # a format's longest literal: shorter finds every line
MAX_FORMAT = 400  # characters of one format string
MAX_CONVERSIONS = 8
MAX_MATCHED_LINE = 16 * 1024  # vLLM's longest line (the engine config) is a few KB


def listed(value: Any) -> list[Any]:
    """A list the host sent, or nothing: the facts' types are checked only after this."""
    return value if isinstance(value, list) else []


def formats_of(value: Any) -> dict[str, list[dict[str, Any]]]:
    """The probe's format strings as templates split here, the unusable left out."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not isinstance(value, dict):
        return out
    for kind, items in value.items():
        if kind not in KINDS:
            continue
        for item in listed(items)[:MAX_FORMATS]:
            fmt = item.get("format") if isinstance(item, dict) else None
            if not isinstance(fmt, str) or len(fmt) > MAX_FORMAT or \
                    len(CONVERSIONS.findall(fmt)) > MAX_CONVERSIONS:
                continue
            args = [a if isinstance(a, str) else None for a in listed(item.get("args"))
                    ][:MAX_CONVERSIONS]
            line = item.get("line") if isinstance(item.get("line"), int) else 0
            made = template(str(item.get("file"))[:200], line, fmt, args)
            if len(made["needle"]) >= MIN_NEEDLE:
                out.setdefault(kind, []).append(made)
    return out


def cut_lines(data: bytes) -> bytes:
    return b"\n".join(line[:MAX_MATCHED_LINE] for line in data.split(b"\n"))


OVERLAP_PROBE = 64  # bytes of the tail looked for in the head
MAX_CANDIDATES = 64  # places in the head tried as the overlap's start


def joined(head: bytes, tail: bytes) -> tuple[bytes, bytes | None]:
    """(head, tail) of a log read from both ends by an engine that cannot seek: when the
    tail begins inside the head (a log shorter than both together), the whole log as the
    head and no tail, so no line is counted twice (a start-up twice looks like a
    restart) and none is lost; else the two as they are."""
    probe = tail[:OVERLAP_PROBE]
    at = head.find(probe) if probe else -1
    for _ in range(MAX_CANDIDATES):
        if at < 0:
            break
        if head[at:] == tail[:len(head) - at]:
            return head + tail[len(head) - at:], None
        at = head.find(probe, at + 1)
    return head, tail


def read_log(session: Session, cancel: threading.Event | None) -> EngineLog | None:
    try:
        return session.engine_log(HEAD_BYTES, TAIL_BYTES, cancel)
    except TransportError as exc:
        return EngineLog(source="the container engine's log", head=b"", tail=None,
                         error=exc.message)


def fill_engine_logs(facts: dict[str, Any], session: Session,
                     cancel: threading.Event | None = None) -> None:
    """Each server the probe marked `engine_stream` gets its log facts from the engine's
    log (in place); the probe's `log_formats` are consumed here and never reported. When
    several servers share the container's stream, its log is theirs together and is not
    given to any one of them."""
    served = facts.get("served")
    if not isinstance(served, dict):
        return
    formats = formats_of(served.pop("log_formats", None))
    pending = [s["log"] for s in listed(served.get("servers")) if isinstance(s, dict)
               and isinstance(s.get("log"), dict) and s["log"].get("engine_stream") is True
               and s["log"].get("source") is None]
    if not pending or not formats:
        return
    if len(pending) > 1:
        for log in pending:
            log["tried"] = [t for t in listed(log.get("tried")) if isinstance(t, str)] + [
                "the container engine's log: %d servers write to the container's one "
                "stream, so its lines are not one server's" % len(pending)]
        return
    (log,) = pending
    read = read_log(session, cancel)
    if read is None:
        return
    tried = [t for t in listed(log.get("tried")) if isinstance(t, str)]
    if read.error is not None:
        log["tried"] = tried + ["%s: %s" % (read.source, read.error)]
        return
    head, tail = (read.head, None) if read.tail is None else joined(read.head, read.tail)
    log.clear()
    log.update(log_facts(read.source, None, cut_lines(head),
                         None if tail is None else cut_lines(tail),
                         len(head) + len(tail or b""), formats, tried))
    log["engine_stream"] = True
