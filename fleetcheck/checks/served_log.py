"""`served-log`: what each judged server printed when it started, against what the code
and the config say. The aux layer ids it printed are the runtime witness of the
dflash-layer-offset verdict; the speculative config it printed, of its command line; the
runner line, of a mixed drafter's need; a fatal line or a restart loop, of a server that
does not run what it was given. A log that is not found, or whose start-up is gone, is a
skip that says which: never a fail."""

from __future__ import annotations

from typing import Any

from fleetcheck.checks.aspects import Verdict
from fleetcheck.checks.drafter import LAYER_IDS_KEY, SLIDING, layer_offset, loaded_config, lookup
from fleetcheck.checks.served_entries import judged_pids
from fleetcheck.facts import Facts, LogLine, ServedProcess, ServerLog
from fleetcheck.checks.verdict import skipped
from fleetcheck.results import CheckResult, Evidence
from fleetcheck.status import Status

LOG_ID = "served-log"
LOG_TITLE = "What the server's own log says it loaded"
RESTART_LOOP = 3  # start-ups in one log: the server keeps failing and being restarted
# the command line's names for what the engine's SpeculativeConfig repr prints
SPEC_FIELDS = (("method", "method"), ("model", "drafter"), ("num_spec_tokens",
                                                           "num_speculative_tokens"))


def evidence(log: ServerLog, line: LogLine) -> Evidence:
    """`file:line: text` for a log file, `SOURCE: text` otherwise."""
    return Evidence(file=log.path or log.source, line=line.line if log.path else None,
                    text=line.text or "")


def drafter_layer_ids(facts: Facts, server: ServedProcess) -> list[int] | None:
    """target_layer_ids as the install's loader returned the drafter's config, else as
    its config.json says."""
    model = server.drafter_model
    if model is None or model.config is None:
        return None
    for data in (loaded_config(facts, model), model.config.data):
        ids = lookup(data, LAYER_IDS_KEY) if isinstance(data, dict) else None
        if isinstance(ids, list) and ids and all(isinstance(i, int) and not
                                                 isinstance(i, bool) for i in ids):
            return ids
    return None


def is_mixed(server: ServedProcess) -> bool:
    model = server.drafter_model
    data = model.config.data if model and model.config else None
    types = data.get("layer_types") if isinstance(data, dict) else None
    return isinstance(types, list) and SLIDING in types and any(t != SLIDING for t in types)


def judge_aux(verdict: Verdict, facts: Facts, server: ServedProcess, log: ServerLog,
              who: str) -> None:
    printed = log.aux_layers
    ids = drafter_layer_ids(facts, server)
    offset, found = layer_offset(facts)
    if printed is None:
        if (server.method or "").lower() == "dflash" and log.engine is not None:
            verdict.add(Status.WARN, "%s: the log's start-up has no aux layers line, so the "
                        "offset it runs with is not witnessed" % who)
        return
    if ids is None or len(ids) != len(printed.ids):
        verdict.add(Status.WARN, "%s printed aux layers %s, which the drafter's "
                    "target_layer_ids %s cannot be held against" % (
                        who, printed.ids, ids if ids is not None else "(unknown)"),
                    evidence(log, printed))
        return
    shifts = {p - i for p, i in zip(printed.ids, ids)}
    shift = shifts.pop() if len(shifts) == 1 else None
    if shift == 1 and offset in (1, None):
        verdict.add(Status.PASS, "%s printed aux layers %s: target_layer_ids %s + 1, the "
                    "offset fix at work" % (who, printed.ids, ids), evidence(log, printed))
        return
    verdict.add(Status.FAIL, "%s printed aux layers %s for target_layer_ids %s: %s, not +1 "
                "(dflash-layer-offset: %s)" % (
                    who, printed.ids, ids, "+%d" % shift if shift is not None and shift >= 0
                    else "%d" % shift if shift is not None else "no constant offset", found),
                evidence(log, printed))


def judge_spec(verdict: Verdict, server: ServedProcess, log: ServerLog, who: str) -> None:
    engine = log.engine
    printed = engine.spec if engine is not None else None
    if not printed:
        return
    differ = []
    for field, attribute in SPEC_FIELDS:
        said, given = printed.get(field), getattr(server, attribute)
        if said in (None, "None") or given is None:
            continue
        if str(said) != str(given):
            differ.append("%s %s (the command line says %s)" % (field, said, given))
    if differ:
        verdict.add(Status.FAIL, "%s's engine started with %s" % (who, ", ".join(differ)),
                    evidence(log, engine))
    else:
        verdict.add(Status.PASS, "%s's engine started with the command line's speculative "
                    "config (%s)" % (who, ", ".join("%s=%s" % (f, printed.get(f))
                                                    for f, _ in SPEC_FIELDS if f in printed)),
                    evidence(log, engine))


def judge_server(verdict: Verdict, facts: Facts, server: ServedProcess,
                 templates: dict[str, list[str]]) -> dict[str, Any] | None:
    """One server's aspects; the live acceptance it printed, for the details."""
    who = "pid %d" % server.pid
    log = server.log
    if log is None:
        verdict.add(Status.SKIP, "%s: its log was not looked for" % who)
        return None
    if log.source is None:
        verdict.add(Status.SKIP, "%s: no log found (stdout and stderr are not files, no "
                    "logging config names a file, no journal)%s" % (
                        who, ": " + "; ".join(log.tried) if log.tried else ""))
        return None
    live = None
    if log.metrics is not None:
        live = {"pid": server.pid, "time": log.metrics.time, "line": log.metrics.text,
                "values": dict(log.metrics.values or {})}
    if not templates.get("engine") and not templates.get("aux_layers"):
        verdict.add(Status.SKIP, "%s: this install prints none of the start-up lines "
                    "fleetcheck reads (no logger call printing vllm_config or the aux "
                    "layers)" % who)
        return live
    for line in log.fatal:
        verdict.add(Status.FAIL, "%s's log has a fatal line: %s" % (who, line.text),
                    evidence(log, line))
    if log.engine is None:
        verdict.add(Status.SKIP, "%s: the start-up lines are not in %s (%s read%s): rotated "
                    "away, or the log starts later" % (
                        who, log.source, "%d lines" % (log.lines_read or 0),
                        ", head and tail" if log.cut else ""))
        return live
    if (log.startups or 0) >= RESTART_LOOP:
        verdict.add(Status.WARN, "%s's log holds %d start-ups: a restart loop?" % (
            who, log.startups))
    judge_spec(verdict, server, log, who)
    judge_aux(verdict, facts, server, log, who)
    if is_mixed(server) and templates.get("runner_v2") and log.runner_v2 is None:
        verdict.add(Status.WARN, "%s serves a drafter of mixed sliding/full layers, and its "
                    "log does not say it uses the V2 model runner" % who)
    return live


def served_log_checks(facts: Facts) -> list[CheckResult]:
    """served-log, when judged servers run on the host; none otherwise (the fleet step
    pads hosts without it)."""
    served = facts.served
    if served is None or served.error:
        return []
    judged = judged_pids(facts)
    servers = [s for s in served.servers if s.pid in judged]
    if not servers:
        return []
    verdict = Verdict()
    templates = dict(served.log_templates or {})
    live = [seen for seen in (judge_server(verdict, facts, s, templates) for s in servers)
            if seen]
    recorded = {"live": live, "templates": templates,
                "sources": [{"pid": s.pid, "source": s.log.source if s.log else None}
                            for s in servers]}
    return [verdict.result(LOG_ID, LOG_TITLE, "nothing to judge", recorded)]


def not_served(reason: str) -> CheckResult:
    return skipped(LOG_ID, LOG_TITLE, reason)
