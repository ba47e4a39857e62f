"""smoke-acceptance: acceptance measured from vLLM's own counters around the load.

Counters are parsed with prometheus_client (not by hand), `_created` series ignored,
summed over engines; acceptance rate = dAccepted / dDraftTokens, mean acceptance length =
1 + dAccepted / dDrafts, per-position rate = dAcceptedPerPos[p] / dDrafts.
Fleet-level flags (a host far below the fleet median, a per-position curve that
collapses) are added once every host is in.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from fleetcheck.results import CheckResult, Evidence, HostResult
from fleetcheck.smoke_settings import SmokeSettings
from fleetcheck.text import counted
from fleetcheck.status import Status

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Smoke

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
GENERATION = "vllm:generation_tokens"
TITLE = "Speculative decoding acceptance under a smoke load"
FLEET_TITLE = "Acceptance compared with the fleet"

MESSAGES = {
    "unreachable": "no vLLM server answers at %(url)s (%(detail)s)",
    "unhealthy": "vLLM at %(url)s is not healthy: %(detail)s (503: the engine died)",
    "models": "cannot learn the served model: %(detail)s",
    "metrics": "cannot read metrics: %(detail)s",
    "server-exited": "the launched server exited during startup (%(detail)s); its log ends:\n"
                     "%(log)s",
    "startup-timeout": "the launched server did not become healthy: %(detail)s; log tail:\n"
                       "%(log)s",
    "stalled": "vLLM at %(url)s did not answer in time: %(detail)s",
    "deadline": "the smoke load stopped at the host's deadline: %(detail)s",
    "internal": "the smoke load failed on the host: %(detail)s",
}


def counter_totals(text: str) -> tuple[dict[str, float], dict[int, float], set[str]]:
    """Counter totals summed over every label but `position`; also the names present."""
    from prometheus_client.parser import text_string_to_metric_families  # smoke runs only
    totals: dict[str, float] = {}
    per_position: dict[int, float] = {}
    present: set[str] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue  # _created and anything that is not the counter's value
            name = sample.name[:-len("_total")]
            present.add(name)
            if name == PER_POSITION:
                position = int(sample.labels.get("position", "0"))
                per_position[position] = per_position.get(position, 0.0) + sample.value
            else:
                totals[name] = totals.get(name, 0.0) + sample.value
    return totals, per_position, present


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


def measure(facts: Smoke) -> dict[str, Any]:
    """Numbers of one load, exactly from the counter deltas."""
    before, pos_before, present = counter_totals(facts.metrics_before)
    after, pos_after, present_after = counter_totals(facts.metrics_after)
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in
             (DRAFTS, DRAFT_TOKENS, ACCEPTED, GENERATION)}
    drafts = delta[DRAFTS]
    positions = sorted(set(pos_before) | set(pos_after))
    per_position = [(pos_after.get(p, 0.0) - pos_before.get(p, 0.0)) / drafts
                    if drafts else 0.0 for p in positions]
    load = facts.load
    results = load.results
    ok = [r for r in results if r.ok]
    latencies = [r.latency_s for r in ok]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    return {
        "model": facts.model,
        "acceptance_rate": delta[ACCEPTED] / delta[DRAFT_TOKENS] if delta[DRAFT_TOKENS] else None,
        "mean_acceptance_length": 1 + delta[ACCEPTED] / drafts if drafts else None,
        "per_position": per_position,
        "drafts": drafts, "draft_tokens": delta[DRAFT_TOKENS], "accepted_tokens": delta[ACCEPTED],
        "generation_tokens": delta[GENERATION],
        "requests": {"ok": len(ok), "failed": len(results) - len(ok),
                     "planned": load.planned or 0},
        "tokens_per_s": tokens / load.wall_s if load.wall_s else None,
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p95_s": percentile(latencies, 0.95),
        "spec_counters_present": DRAFTS in present and DRAFTS in present_after,
        "budget_exhausted": bool(load.budget_exhausted),
        "url": facts.url, "mode": facts.mode,
    }


def judge_smoke(facts: Smoke, options: SmokeSettings) -> tuple[CheckResult, dict | None]:
    """The smoke-acceptance check and the host-level `smoke` numbers (None when the load
    could not run)."""
    def out(status: str, message: str, numbers: dict | None = None,
            evidence: list[Evidence] | None = None) -> tuple[CheckResult, dict | None]:
        return (CheckResult(id="smoke-acceptance", title=TITLE, status=status, message=message,
                            evidence=evidence or [], details={"mode": facts.mode,
                                                              "url": facts.url}),
                numbers)

    log = facts.log_tail or ""
    log_evidence = [Evidence(facts.log_file, None, line)
                    for line in log.splitlines()[-8:]] if log else []
    error = facts.error
    if error is not None:
        message = MESSAGES.get(error.kind, "%(detail)s") % {
            "url": facts.url, "detail": error.detail, "log": log[-1500:] or "(the log is empty)"}
        died = error.kind in ("server-exited", "startup-timeout")
        status = Status.FAIL if died else Status.ERROR
        return out(status, message, evidence=log_evidence)
    try:
        numbers = measure(facts)
    except ValueError as exc:  # the server's own text: prometheus_client's parser refused it
        return out(Status.ERROR, "the server's /metrics text cannot be parsed: %s" % exc)
    failed = numbers["requests"]["failed"]
    first_error = next((r.error or "no error text" for r in facts.load.results if not r.ok),
                       None)
    evidence = [Evidence(None, None, "deltas over the load: drafts %d, draft tokens %d, accepted "
                         "tokens %d, generation tokens %d; requests ok %d, failed %d" % (
                             numbers["drafts"], numbers["draft_tokens"],
                             numbers["accepted_tokens"], numbers["generation_tokens"],
                             numbers["requests"]["ok"], failed))] + log_evidence
    if numbers["requests"]["ok"] == 0:
        if failed:
            return out(Status.ERROR, "every request failed (%d): %s" % (failed, first_error),
                       numbers, evidence)
        if numbers["budget_exhausted"]:
            return out(Status.ERROR, "no request was sent before the time budget (%.0fs) ran out"
                       % options.time_budget_s, numbers, evidence)
        return out(Status.ERROR, "no request was sent: the load planned %s"
                   % counted(numbers["requests"]["planned"], "request"), numbers, evidence)
    if not numbers["spec_counters_present"]:
        return out(Status.FAIL, "the server exports no vllm:spec_decode_* counters: speculative "
                   "decoding is not configured (no --speculative-config)", numbers, evidence)
    if numbers["drafts"] == 0:
        if numbers["generation_tokens"] == 0:
            return out(Status.ERROR, "no counter moved while %s succeeded: the server looks like "
                       "it runs with --disable-log-stats, so acceptance cannot be measured"
                       % counted(numbers["requests"]["ok"], "request"), numbers, evidence)
        return out(Status.FAIL, "no drafts at all: %s generated but the drafter proposed nothing"
                   % counted(int(numbers["generation_tokens"]), "token was", "tokens were"),
                   numbers, evidence)
    if numbers["accepted_tokens"] == 0:
        return out(Status.FAIL, "no accepted tokens: the target rejected every draft token (%s of "
                   "%s; a broken drafter: wrong weights, or hidden states from the wrong target "
                   "layers)" % (counted(int(numbers["draft_tokens"]), "draft token"),
                                counted(int(numbers["drafts"]), "draft")),
                   numbers, evidence)
    rate, length = numbers["acceptance_rate"], numbers["mean_acceptance_length"]
    summary = "acceptance rate %.1f%%, mean acceptance length %.2f over %s" % (
        100 * rate, length, counted(int(numbers["drafts"]), "draft"))
    notes = []
    if failed:
        notes.append("%d of %s failed (first: %s)" % (
            failed, counted(failed + numbers["requests"]["ok"], "request"), first_error))
    if numbers["budget_exhausted"]:
        notes.append("the time budget of %.0fs ran out after %d of %d requests" % (
            options.time_budget_s, failed + numbers["requests"]["ok"],
            numbers["requests"]["planned"]))
    suffix = ("; " + "; ".join(notes)) if notes else ""
    if rate < options.min_acceptance_rate or length < options.min_mean_acceptance_length:
        return out(Status.FAIL, "%s: below the thresholds (rate >= %.0f%%, length >= %.1f)%s" % (
            summary, 100 * options.min_acceptance_rate, options.min_mean_acceptance_length,
            suffix), numbers, evidence)
    return out(Status.WARN if notes else Status.PASS, summary + suffix, numbers, evidence)


def collapse_position(per_position: list[float], options: SmokeSettings) -> int | None:
    """First position after which every rate is ~0, if that comes early in the curve
    (healthy curves decay gradually; a missing sliding window cuts them off)."""
    if len(per_position) <= options.collapse_after_position + 1:
        return None
    head = per_position[:options.collapse_after_position]
    rest = per_position[options.collapse_after_position:]
    if head and max(head) > 5 * options.collapse_below and max(rest) < options.collapse_below:
        return options.collapse_after_position
    return None


def fleet_checks(hosts: list[HostResult], smoke_numbers: dict[str, dict],
                 options: SmokeSettings) -> dict[str, CheckResult]:
    """smoke-fleet per host: far below the fleet median, or a collapsing curve."""
    lengths = {name: n["mean_acceptance_length"] for name, n in smoke_numbers.items()
               if n and n.get("mean_acceptance_length") is not None}
    median = statistics.median(lengths.values()) if lengths else None
    out: dict[str, CheckResult] = {}
    for host in hosts:
        numbers = smoke_numbers.get(host.name)
        if not numbers or numbers.get("mean_acceptance_length") is None:
            out[host.name] = CheckResult("smoke-fleet", FLEET_TITLE, Status.SKIP,
                                         "no acceptance measured on this host")
            continue
        problems = []
        length = numbers["mean_acceptance_length"]
        if median and len(lengths) >= 3 and length < options.fleet_median_ratio * median:
            problems.append("mean acceptance length %.2f is far below the fleet median %.2f "
                            "(< %.0f%% of it)" % (length, median,
                                                   100 * options.fleet_median_ratio))
        collapse = collapse_position(numbers["per_position"], options)
        if collapse is not None:
            problems.append("per-position acceptance collapses to ~0 after position %d (%s): "
                            "the signature of a drafter missing its sliding window past 2,048 "
                            "tokens" % (collapse, ", ".join("%.2f" % r for r in
                                                            numbers["per_position"][:8])))
        if problems:
            out[host.name] = CheckResult("smoke-fleet", FLEET_TITLE, Status.WARN,
                                         "; ".join(problems), details={"fleet_median": median})
        elif len(lengths) < 3:
            out[host.name] = CheckResult("smoke-fleet", FLEET_TITLE, Status.PASS,
                                         "no collapse in the per-position curve; not compared "
                                         "with a fleet median (%s measured, 3 needed)"
                                         % counted(len(lengths), "host"),
                                         details={"fleet_median": median})
        else:
            out[host.name] = CheckResult("smoke-fleet", FLEET_TITLE, Status.PASS,
                                         "in line with the fleet (median mean acceptance length "
                                         "%.2f)" % median, details={"fleet_median": median})
    return out
