"""What a host serves, in the words every renderer uses: one line per running server
(port, served names, target, drafter and its revision, method and
num_speculative_tokens, the environment that changes spec decode, where the models were
found, what the server says about itself over HTTP) and one per drafter named only by an
expectation."""

from __future__ import annotations

from typing import Any

from fleetcheck.checks.served_entries import NAMED
from fleetcheck.results import HostResult

ENV_SHOWN = ("VLLM_USE_V2_MODEL_RUNNER", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_HOME")


def model_words(model: dict[str, Any] | None) -> str:
    """`spec@revision (from where)`, or why it was not found."""
    if not model:
        return "none"
    text = str(model.get("spec") or "?")
    if model.get("revision"):
        text += "@" + str(model["revision"])[:12]
    if model.get("error"):
        return text + " (%s)" % model["error"]
    if model.get("kind") == "hub":
        text += " (hub cache %s, from %s)" % (model.get("cache"), model.get("cache_from"))
    elif model.get("kind") == "modelscope":
        text += " (ModelScope cache %s, from %s)" % (model.get("cache"), model.get("cache_from"))
    elif model.get("dir"):
        text += " (directory)"
    return text


def server_words(entry: dict[str, Any]) -> str:
    if entry.get(NAMED) is True:
        return "expected drafter %s: no server serves it here" % model_words(entry)
    parts = ["pid %s port %s%s%s" % (entry.get("pid"), entry.get("port"),
                                     " (vllm_url)" if entry.get("serving") else "",
                                     "" if entry.get("judged", True) else
                                     " (another install's server: named, not judged)")]
    if entry.get("served_names"):
        parts.append("served as " + ", ".join(map(str, entry["served_names"])))
    parts.append("target " + model_words(entry.get("target")))
    if entry.get("drafter"):
        parts.append("drafter " + model_words(entry.get("drafter")))
    if entry.get("method") or entry.get("num_speculative_tokens") is not None:
        parts.append("method %s, num_speculative_tokens %s (%s)" % (
            entry.get("method"), entry.get("num_speculative_tokens"), entry.get("spec_from")))
    env = entry.get("env") or {}
    shown = ["%s=%s" % (k, env[k]) for k in ENV_SHOWN if k in env]
    if shown:
        parts.append("env " + " ".join(shown))
    if entry.get("environ_error"):
        parts.append(str(entry["environ_error"]))
    http = entry.get("http") or {}
    if http.get("models") or http.get("version"):
        parts.append("HTTP says: models %s, version %s" % (
            ", ".join(map(str, http.get("models") or [])) or "-", http.get("version") or "-"))
    elif http.get("error"):
        parts.append("HTTP: %s" % http["error"])
    log = entry.get("log") or {}
    if log.get("source"):
        parts.append("log %s (%s lines read)" % (log["source"], log.get("lines_read")))
        live = log.get("live")
        if live:
            parts.append("live acceptance%s: %s" % (
                " at " + str(live["time"]) if live.get("time") else "",
                ", ".join("%s %s" % (k, v) for k, v in (live.get("values") or {}).items())))
    for note in entry.get("notes") or []:
        parts.append("NOTE " + str(note))
    return "; ".join(parts)


def served_lines(host: HostResult) -> list[str]:
    return [server_words(entry) for entry in host.served or []]


def served_drafters(host: HostResult) -> list[str]:
    """The drafters a host serves, as `spec@revision`, for a diff."""
    out = []
    for entry in host.served or []:
        model = entry.get("drafter") if entry.get(NAMED) is not True else None
        if model:
            out.append("%s@%s" % (model.get("spec"), (model.get("revision") or "?")[:12]))
    return sorted(out)
