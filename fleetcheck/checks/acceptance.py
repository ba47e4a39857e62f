"""smoke-acceptance: acceptance measured from vLLM's own counters, request by request.

The load's totals are the counter deltas around it, parsed with prometheus_client
(`_created` series ignored, summed over engines): acceptance rate = dAccepted /
dDraftTokens, mean acceptance length = 1 + dAccepted / dDrafts, per-position rate =
dAcceptedPerPos[p] / dDrafts. Requests are sent one at a time with a scrape after each, so
every request has its own deltas, and the request is the unit of the intervals
(intervals.py): drafts within a request are correlated. The verdict has three outcomes:
fail when the interval lies wholly past a line (broken, or regressed against a
reference), warn when it straddles one (inconclusive, with the requests that would
decide), pass otherwise. The fleet check compares each host with the fleet's per-prompt
median once every host is in.
"""

from __future__ import annotations

import json
import statistics
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fleetcheck.intervals import (CONFIDENCE, Interval, mean_interval, ratio_interval,
                                  requests_to_decide, shifted, widened, wilson)
from fleetcheck.checks.verdict import check_result, skipped
from fleetcheck.results import CheckResult, Evidence, HostResult
from fleetcheck.smoke_settings import Reference, SmokeSettings, prompt_set
from fleetcheck.text import counted
from fleetcheck.status import Status

if TYPE_CHECKING:  # for annotations: the facts module loads when an answer is decoded
    from fleetcheck.facts import Served, Smoke

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
    "cancelled": "the smoke load was stopped (SIGINT or SIGTERM on the host, or its input "
                 "closed): %(detail)s",
    "internal": "the smoke load failed on the host: %(detail)s",
}


# the names vLLM's SpecDecoding metrics call prints its values by (v1/spec_decode/metrics.py)
LIVE_LENGTH = "mean_acceptance_length"
LIVE_RATE = "draft_acceptance_rate"


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


def pct(value: float) -> str:
    return "%.1f%%" % (100 * value)


def ci_text(interval: Interval | None, percent: bool = False) -> str:
    """'(95% CI 4.12-5.30)', or why there is none."""
    if interval is None:
        return "(no interval: fewer than 2 requests with drafts)"
    form = pct if percent else (lambda v: "%.2f" % v)
    return "(%d%% CI %s-%s)" % (round(100 * CONFIDENCE), form(interval.low), form(interval.high))


def as_json(interval: Interval | None) -> dict | None:
    return interval.as_json() if interval is not None else None


def per_request(facts: Smoke) -> list[dict[str, Any]]:
    """Every request's own deltas (those whose scrapes both worked), in the order sent."""
    out = []
    for r in facts.load.results:
        entry: dict[str, Any] = {"prompt": r.prompt, "ok": bool(r.ok),
                                 "prompt_tokens": r.prompt_tokens,
                                 "completion_tokens": r.completion_tokens,
                                 "latency_s": r.latency_s}
        if not r.ok:  # what the server answered: its HTTP status and its own message
            entry.update({"status": r.status, "error": r.error})
        c = r.counters
        if c is not None:
            entry.update({"drafts": c.drafts, "draft_tokens": c.draft_tokens,
                          "accepted_tokens": c.accepted_tokens,
                          "generation_tokens": c.generation_tokens,
                          "acceptance_length": 1 + c.accepted_tokens / c.drafts
                          if c.drafts else None,
                          "per_position": list(c.per_position)})
            if r.ok and r.completion_tokens is not None and \
                    c.generation_tokens > r.completion_tokens:
                # the server generated more than this request's own tokens while it ran:
                # other clients' traffic is in these deltas
                entry["other_traffic"] = True
        elif r.counters_error:
            entry["counters_error"] = r.counters_error
        out.append(entry)
    return out


def measure(facts: Smoke, options: SmokeSettings | None = None) -> dict[str, Any]:
    """Numbers of one load: the totals exactly from the counter deltas, the intervals
    from the requests' own deltas."""
    before, pos_before, present = counter_totals(facts.metrics_before)
    after, pos_after, present_after = counter_totals(facts.metrics_after)
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in
             (DRAFTS, DRAFT_TOKENS, ACCEPTED, GENERATION)}
    drafts = delta[DRAFTS]
    positions = sorted(set(pos_before) | set(pos_after))
    accepted_at = [pos_after.get(p, 0.0) - pos_before.get(p, 0.0) for p in positions]
    per_position = [n / drafts if drafts else 0.0 for n in accepted_at]
    load = facts.load
    results = load.results
    ok = [r for r in results if r.ok]
    latencies = [r.latency_s for r in ok]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    requests = per_request(facts)
    shared = [r for r in requests if r.get("other_traffic")]
    clean = [r for r in requests if "drafts" in r and not r.get("other_traffic")]
    if shared:  # a busy server: only the requests whose deltas are their own are judged
        drafts, accepted_at, delta = own_deltas(clean, len(positions))
        per_position = [n / drafts if drafts else 0.0 for n in accepted_at]
    units = [r for r in clean if r["ok"] and r.get("drafts")]
    accepted_i = [r["accepted_tokens"] for r in units]
    k = len(positions) or None
    rate_ci = widened(ratio_interval(accepted_i, [r["draft_tokens"] for r in units]),
                      wilson(delta[ACCEPTED], delta[DRAFT_TOKENS]))
    rate_ci = shifted(rate_ci, 0.0, 0.0, 1.0)
    length_ci = shifted(ratio_interval(accepted_i, [r["drafts"] for r in units]), 1.0, 1.0,
                        (k + 1.0) if k else None)
    first_ci = None
    if positions:
        first_ci = shifted(widened(ratio_interval(
            [(r.get("per_position") or [0.0])[0] for r in units], [r["drafts"] for r in units]),
            wilson(accepted_at[0], drafts)), 0.0, 0.0, 1.0)
    counted_requests = [r for r in requests if "drafts" in r]
    return {
        "model": facts.model,
        "acceptance_rate": delta[ACCEPTED] / delta[DRAFT_TOKENS] if delta[DRAFT_TOKENS] else None,
        "mean_acceptance_length": 1 + delta[ACCEPTED] / drafts if drafts else None,
        "per_position": per_position,
        "intervals": {
            "acceptance_rate": as_json(rate_ci),
            "mean_acceptance_length": as_json(length_ci),
            "first_position": as_json(first_ci),
            # Wilson over drafts: drafts are not independent, so the least uncertainty
            "per_position": [as_json(wilson(n, drafts)) for n in accepted_at],
        },
        "drafts": drafts, "draft_tokens": delta[DRAFT_TOKENS], "accepted_tokens": delta[ACCEPTED],
        "generation_tokens": delta[GENERATION],
        # requests whose deltas counted other clients' traffic (not judged), and how many
        # requests the numbers come from when there were some
        "other_traffic": len(shared), "judged_requests": len(clean) if shared else None,
        "requests": {"ok": len(ok), "failed": len(results) - len(ok),
                     "planned": load.planned or 0, "measured": len(units)},
        "per_request": requests,
        "per_request_sums": {
            "drafts": sum(r["drafts"] for r in counted_requests),
            "draft_tokens": sum(r["draft_tokens"] for r in counted_requests),
            "accepted_tokens": sum(r["accepted_tokens"] for r in counted_requests)},
        "tokens_per_s": tokens / load.wall_s if load.wall_s else None,
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p95_s": percentile(latencies, 0.95),
        "spec_counters_present": DRAFTS in present and DRAFTS in present_after,
        "budget_exhausted": bool(load.budget_exhausted),
        "prompt_set": prompt_set(options.prompt_set)["version"] if options else None,
        "served_spec": facts.served_spec.config if facts.served_spec else None,
        "url": facts.url, "mode": facts.mode,
        "fingerprints": list(dict.fromkeys(r.fingerprint for r in ok if r.fingerprint)),
    }


def own_deltas(requests: list[dict[str, Any]], k: int
               ) -> tuple[float, list[float], dict[str, float]]:
    """(drafts, accepted per position, the totals) summed over the requests' own deltas:
    the load's numbers when other traffic moved the server's counters during some."""
    drafts = float(sum(r["drafts"] for r in requests))
    width = max([k] + [len(r.get("per_position") or []) for r in requests])
    accepted_at = [float(sum((r.get("per_position") or [])[p] if p < len(
        r.get("per_position") or []) else 0.0 for r in requests)) for p in range(width)]
    totals = {DRAFTS: drafts, DRAFT_TOKENS: float(sum(r["draft_tokens"] for r in requests)),
              ACCEPTED: float(sum(r["accepted_tokens"] for r in requests)),
              GENERATION: float(sum(r["generation_tokens"] for r in requests))}
    return drafts, accepted_at, totals


def interval_of(numbers: dict, name: str) -> Interval | None:
    raw = numbers["intervals"].get(name)
    if raw is None:
        return None
    return Interval(raw["low"], raw["high"], raw["method"], raw["n"], raw.get("unit_sd"))


def drafter_window(config: Any) -> int | None:
    """The sliding window a drafter config gives its sliding layers, or None when it has
    none: `dflash_config.swa_window_size` (with `use_swa`), else the top-level
    `sliding_window` when a layer is `sliding_attention` or `use_sliding_window` is true."""
    if not isinstance(config, dict):
        return None
    dflash = config.get("dflash_config")
    if isinstance(dflash, dict) and dflash.get("use_swa") and \
            isinstance(dflash.get("swa_window_size"), int):
        return dflash["swa_window_size"]
    window = config.get("sliding_window")
    types = config.get("layer_types")
    sliding = (isinstance(types, list) and "sliding_attention" in types) or \
        config.get("use_sliding_window") is True
    return window if sliding and isinstance(window, int) and not isinstance(window, bool) \
        else None


def live_acceptance(facts: Smoke, served: Served | None) -> dict[str, Any] | None:
    """The last SpecDecoding metrics line the server on the load's port logged (served-log
    read it, by the install's own format and names) before the load, or None. A log read
    through the container engine is read after the whole probe, the load included: its
    last line may be the load's own, so it is not set beside the load."""
    if served is None or not facts.url:
        return None
    port = urlsplit(facts.url).port
    for server in served.servers:
        log = server.log
        if server.port == port and log is not None and log.metrics is not None and \
                not log.engine_stream:
            return {"time": log.metrics.time, "source": log.source,
                    "values": dict(log.metrics.values or {})}
    return None


def percent_value(text: Any) -> float | None:
    """A logged percentage (`17.2`) as a fraction."""
    try:
        return float(text) / 100.0
    except (TypeError, ValueError):
        return None


def served_drafter_config(facts: Smoke, served: Served | None) -> tuple[Any, str | None]:
    """(the drafter's config, where it was read) for the server the load went to: the
    launched drafter's config.json, or the served facts' drafter of the server on the
    URL's port."""
    if facts.drafter_config is not None and facts.drafter_config.data is not None:
        return facts.drafter_config.data, facts.drafter_config.path
    if served is None or not facts.url:
        return None, None
    port = urlsplit(facts.url).port
    for server in served.servers:
        place = server.drafter_model
        if server.port == port and place is not None and place.config is not None:
            return place.config.data, place.config.path
    return None, None


def spec_of(numbers: dict) -> dict:
    spec = numbers.get("served_spec")
    return spec if isinstance(spec, dict) else {}


def matching_reference(numbers: dict, options: SmokeSettings) -> Reference | None:
    """The playbook's reference for this host's drafter, k and prompt set (a key a
    reference leaves out matches any); None when none matches."""
    spec = spec_of(numbers)
    k = spec.get("num_speculative_tokens") or (len(numbers["per_position"]) or None)
    for ref in options.reference:
        if ref.drafter is not None and ref.drafter != spec.get("model"):
            continue
        if ref.method is not None and ref.method != spec.get("method"):
            continue
        if ref.num_speculative_tokens is not None and ref.num_speculative_tokens != k:
            continue
        if ref.prompt_set is not None and ref.prompt_set != numbers.get("prompt_set"):
            continue
        return ref
    return None


def decide(interval: Interval | None, estimate: float | None, line: float) -> str:
    """below | straddles | above: where the interval lies against the line."""
    if interval is None:
        return "straddles"
    if interval.high < line:
        return "below"
    if interval.low < line:
        return "straddles"
    return "above"


def would_decide(interval: Interval | None, estimate: float | None, line: float) -> int | None:
    if interval is None or interval.unit_sd is None or estimate is None:
        return None
    return requests_to_decide(estimate, interval.unit_sd, line)


def inconclusive(measured: int, needed: list[int | None]) -> str:
    known = [n for n in needed if n is not None]
    if needed and len(known) == len(needed):
        more = "about %d would decide" % max(known)
    elif known:
        more = "at least %d would be needed" % max(known)
    else:
        more = "no number of requests would decide while the estimate sits on the line"
    return "inconclusive: %s; %s" % (counted(measured, "request"), more)


def judge_smoke(facts: Smoke, options: SmokeSettings,
                served: Served | None = None) -> tuple[CheckResult, dict | None]:
    """The smoke-acceptance check and the host-level `smoke` numbers (None when the load
    could not run)."""
    def out(status: str, message: str, numbers: dict | None = None,
            evidence: list[Evidence] | None = None,
            details: dict | None = None) -> tuple[CheckResult, dict | None]:
        return (check_result("smoke-acceptance", TITLE, status, message,
                             evidence=evidence or (), details={"mode": facts.mode,
                                                               "url": facts.url,
                                                               **(details or {})}),
                numbers)

    log = facts.log_tail or ""
    log_evidence = [Evidence(facts.log_file, None, line)
                    for line in log.splitlines()[-8:]] if log else []
    spec = facts.served_spec.config if facts.served_spec is not None else None
    synthetic = isinstance(spec, dict) and spec.get("rejection_sample_method") == "synthetic"
    error = facts.error
    if error is not None and not synthetic:
        message = MESSAGES.get(error.kind, "%(detail)s") % {
            "url": facts.url, "detail": error.detail, "log": log[-1500:] or "(the log is empty)"}
        died = error.kind in ("server-exited", "startup-timeout")
        status = Status.FAIL if died else Status.ERROR
        return out(status, message, evidence=log_evidence)
    numbers = None
    if error is None:
        try:
            numbers = measure(facts, options)
        except ValueError as exc:  # the server's own text: prometheus_client's parser refused it
            if not synthetic:
                return out(Status.ERROR, "the server's /metrics text cannot be parsed: %s" % exc)
    if synthetic:
        said = ", ".join("%s %s" % (k, spec[k]) for k in ("synthetic_acceptance_length",
                                                         "synthetic_acceptance_rates")
                         if spec.get(k) is not None)
        return out(Status.FAIL, "not a measurement: the server's speculative config (%s) sets "
                   "rejection_sample_method: synthetic%s, so vLLM accepts drafts at the rate it "
                   "was told, whatever the drafter proposes; serve with rejection_sample_method "
                   "standard to measure acceptance" % (
                       facts.served_spec.source or "?", " (%s)" % said if said else ""),
                   numbers, [Evidence(None, None, "speculative config: %s" % spec)])
    assert numbers is not None
    failed = numbers["requests"]["failed"]
    ok_count = numbers["requests"]["ok"]
    first_error = next((r.error or "no error text" for r in facts.load.results if not r.ok),
                       None)
    evidence = [Evidence(None, None, "deltas over the load: drafts %d, draft tokens %d, accepted "
                         "tokens %d, generation tokens %d; requests ok %d, failed %d" % (
                             numbers["drafts"], numbers["draft_tokens"],
                             numbers["accepted_tokens"], numbers["generation_tokens"],
                             ok_count, failed))]
    evidence += [Evidence(None, None, "request %s: drafts %d, accepted %d, acceptance length %s"
                          % (r["prompt"], r["drafts"], r["accepted_tokens"],
                             "%.2f" % r["acceptance_length"] if r["acceptance_length"]
                             else "-"))
                 for r in numbers["per_request"] if "drafts" in r][:EVIDENCE_REQUESTS]
    evidence += [Evidence(None, None, "request %s failed: %s" % (r["prompt"], r.get("error")
                                                               or "HTTP %s" % r.get("status")))
                 for r in numbers["per_request"] if not r["ok"]][:EVIDENCE_REQUESTS]
    if numbers.get("other_traffic"):
        evidence.insert(0, Evidence(None, None, "other traffic was counted: %s generated more "
                                    "tokens than they returned while they ran, so their deltas "
                                    "are not judged; the numbers come from the %s whose deltas "
                                    "are their own" % (
                                        counted(numbers["other_traffic"], "request"),
                                        counted(numbers["judged_requests"] or 0, "request"))))
    evidence += log_evidence
    if ok_count and numbers.get("other_traffic") and not numbers["judged_requests"]:
        return out(Status.ERROR, "other traffic was counted: while each of the %s ran, the "
                   "server generated more tokens than the request got back, so its counters "
                   "say nothing of this load alone; measure on an idle server (or in launch "
                   "mode)" % counted(numbers["other_traffic"], "request"), numbers, evidence)
    if ok_count == 0:
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
    generated = sum(r.completion_tokens or 0 for r in facts.load.results if r.ok)
    if numbers["drafts"] == 0:
        if numbers["generation_tokens"] == 0:
            return out(Status.ERROR, "no counter moved while %s succeeded: the server looks like "
                       "it runs with --disable-log-stats, so acceptance cannot be measured"
                       % counted(ok_count, "request"), numbers, evidence)
        return out(Status.ERROR, "speculation is off: %s generated over %s and the draft "
                   "counters did not move (no drafts at all), so there is no acceptance to "
                   "measure" % (counted(int(numbers["generation_tokens"] or generated),
                                        "token was", "tokens were"),
                                counted(ok_count, "request")), numbers, evidence)
    return judge_numbers(facts, numbers, options, served, evidence, first_error, out)


EVIDENCE_REQUESTS = 12  # per-request lines in the evidence; the JSON keeps every one


def judge_numbers(facts: Smoke, numbers: dict, options: SmokeSettings, served: Served | None,
                  evidence: list[Evidence], first_error: str | None,
                  out: Any) -> tuple[CheckResult, dict | None]:
    rate, length = numbers["acceptance_rate"], numbers["mean_acceptance_length"]
    rate_ci = interval_of(numbers, "acceptance_rate")
    length_ci = interval_of(numbers, "mean_acceptance_length")
    first_ci = interval_of(numbers, "first_position")
    first = numbers["per_position"][0] if numbers["per_position"] else None
    measured = numbers["requests"]["measured"]
    summary = "acceptance rate %s %s, mean acceptance length %.2f %s%s over %s, %s" % (
        pct(rate), ci_text(rate_ci, True), length, ci_text(length_ci),
        ", position 0 %s %s" % (pct(first), ci_text(first_ci, True)) if first is not None
        else "", counted(measured, "request"), counted(int(numbers["drafts"]), "draft"))
    live = live_acceptance(facts, served)
    numbers["live"] = live
    if live is not None:
        summary += "; the server's own log said mean acceptance length %s at %s (%s, " \
            "before this load)" % (live["values"].get(LIVE_LENGTH, "?"), live["time"] or
                                   "an unknown time", live["source"])
    broken_lines = ("the broken line: acceptance rate %s, position 0 %s"
                    % (pct(options.broken_acceptance_rate), pct(options.broken_first_position)))
    rate_side = decide(rate_ci, rate, options.broken_acceptance_rate)
    first_side = decide(first_ci, first, options.broken_first_position) if first is not None \
        else "above"
    if rate_side == "below" or first_side == "below":
        lead = ""
        if numbers["accepted_tokens"] == 0:
            lead = ("no accepted tokens: the target rejected every draft token (%s of %s; a "
                    "broken drafter: wrong weights, or hidden states from the wrong target "
                    "layers); " % (counted(int(numbers["draft_tokens"]), "draft token"),
                                   counted(int(numbers["drafts"]), "draft")))
        numbers["verdict"] = "broken"
        return out(Status.FAIL, "%sbroken: %s, wholly below %s" % (lead, summary, broken_lines),
                   numbers, evidence)
    needed: list[int | None] = []
    reasons: list[str] = []
    if rate_side == "straddles":
        needed.append(would_decide(rate_ci, rate, options.broken_acceptance_rate))
        reasons.append("the acceptance rate's interval straddles %s"
                       % pct(options.broken_acceptance_rate))
    if first_side == "straddles":
        needed.append(would_decide(first_ci, first, options.broken_first_position))
        reasons.append("position 0's interval straddles %s" % pct(options.broken_first_position))
    reference = matching_reference(numbers, options)
    numbers["reference"] = None
    if reference is not None:
        line = options.reference_fraction * reference.mean_acceptance_length
        numbers["reference"] = {"mean_acceptance_length": reference.mean_acceptance_length,
                                "from": "playbook", "line": line,
                                "fraction": options.reference_fraction}
        side = decide(length_ci, length, line)
        against = "%.0f%% of %s = %.2f" % (100 * options.reference_fraction, reference.label(),
                                            line)
        if side == "below":
            numbers["verdict"] = "regressed"
            return out(Status.FAIL, "regressed: %s; the mean acceptance length's interval lies "
                       "wholly below %s" % (summary, against), numbers, evidence)
        if side == "straddles":
            needed.append(would_decide(length_ci, length, line))
            reasons.append("the mean acceptance length's interval straddles %s" % against)
        else:
            summary += "; at or above %s" % against
    notes = []
    if numbers["requests"]["failed"]:
        failed = numbers["requests"]["failed"]
        notes.append("%d of %s failed (first: %s)" % (
            failed, counted(failed + numbers["requests"]["ok"], "request"), first_error))
    if numbers["budget_exhausted"]:
        notes.append("the time budget of %.0fs ran out after %d of %d requests" % (
            options.time_budget_s, numbers["requests"]["failed"] + numbers["requests"]["ok"],
            numbers["requests"]["planned"]))
    live_rate = percent_value(live["values"].get(LIVE_RATE)) if live else None
    if live_rate is not None and live_rate < options.broken_acceptance_rate:
        notes.append("the server's own log says its traffic accepted %s of draft tokens at %s, "
                     "below the broken line %s: this load passes, what it served then did not"
                     % (pct(live_rate), live["time"] or "an unknown time",
                        pct(options.broken_acceptance_rate)))
    config, where = served_drafter_config(facts, served)
    window = drafter_window(config)
    reached = max(((r.prompt_tokens or 0) + (r.completion_tokens or 0)
                   for r in facts.load.results if r.ok), default=0)
    numbers["context"] = {"longest_request_tokens": reached, "drafter_window": window,
                          "drafter_config": where}
    if window is not None and reached <= window:
        notes.append("the longest request reached %s of context, within the drafter's sliding "
                     "window of %d (%s): the sliding-window path was never exercised; send a "
                     "prompt longer than the window (the prompt set's 7th is over 3,000 tokens)"
                     % (counted(reached, "token"), window, where))
    suffix = ("; " + "; ".join(notes)) if notes else ""
    if reasons:
        numbers["verdict"] = "inconclusive"
        return out(Status.WARN, "%s: %s (%s)%s" % (inconclusive(measured, needed), summary,
                                                   "; ".join(reasons), suffix),
                   numbers, evidence, {"requests_to_decide": max(
                       [n for n in needed if n is not None], default=None)})
    numbers["verdict"] = Status.PASS.value
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


def prompt_lengths(numbers: dict) -> dict[str, float]:
    return {r["prompt"]: r["acceptance_length"] for r in numbers.get("per_request") or []
            if r.get("acceptance_length") is not None}


def versus_fleet(numbers: dict, fleet: dict[str, dict], median: float,
                 options: SmokeSettings) -> tuple[str, str, dict]:
    """(status, message, details) of one host against the fleet median: paired over the
    prompts it shares with the fleet, so a prompt's own difficulty cancels out. The
    difference is the host's per-prompt acceptance length minus the fleet's median for
    that prompt; regressed when its interval lies below -(1 - fraction) x median."""
    own = prompt_lengths(numbers)
    by_prompt: dict[str, list[float]] = {}
    for other in fleet.values():
        for prompt, value in prompt_lengths(other).items():
            by_prompt.setdefault(prompt, []).append(value)
    shared = [p for p in own if len(by_prompt.get(p, [])) >= 3]
    diffs = [own[p] - statistics.median(by_prompt[p]) for p in shared]
    line = -(1 - options.reference_fraction) * median
    interval = mean_interval(diffs)
    length = numbers["mean_acceptance_length"]
    details = {"fleet_median": median, "line": options.reference_fraction * median,
               "paired_prompts": len(diffs),
               "difference": sum(diffs) / len(diffs) if diffs else None,
               "difference_interval": as_json(interval)}
    against = "%.0f%% of the fleet median %.2f" % (100 * options.reference_fraction, median)
    if interval is None:
        return Status.WARN, "inconclusive: %s shared with 3+ hosts of the fleet, too few to " \
            "compare with %s" % (counted(len(diffs), "prompt"), against), details
    said = "mean acceptance length %.2f; per prompt, %+.2f against the fleet's median " \
        "(%d%% CI %+.2f to %+.2f over %s)" % (length, details["difference"],
                                               round(100 * CONFIDENCE), interval.low,
                                               interval.high, counted(len(diffs), "prompt"))
    side = decide(interval, details["difference"], line)
    if side == "below":
        return Status.FAIL, "regressed: %s, wholly below %s (a difference of %.2f)" % (
            said, against, line), details
    if side == "straddles":
        needed = would_decide(interval, details["difference"], line)
        details["requests_to_decide"] = needed
        return Status.WARN, "%s: %s, straddling %s (a difference of %.2f)" % (
            inconclusive(len(diffs), [needed]), said, against, line), details
    return Status.PASS, "in line with the fleet: %s; at or above %s" % (said, against), details


def fleet_checks(hosts: list[HostResult], smoke_numbers: dict[str, dict],
                 options: SmokeSettings) -> dict[str, CheckResult]:
    """smoke-fleet per host: regressed against the fleet's median (for a host with no
    reference of its own from the playbook), or a collapsing curve."""
    measured = {name: n for name, n in smoke_numbers.items()
                if n and n.get("mean_acceptance_length") is not None}
    lengths = {name: n["mean_acceptance_length"] for name, n in measured.items()}
    median = statistics.median(lengths.values()) if lengths else None
    drifts = fingerprint_drifts(hosts, smoke_numbers)
    out: dict[str, CheckResult] = {}
    for host in hosts:
        numbers = smoke_numbers.get(host.name)
        if not numbers or numbers.get("mean_acceptance_length") is None:
            out[host.name] = skipped("smoke-fleet", FLEET_TITLE,
                                     "no acceptance measured on this host")
            continue
        status, parts, details = Status.PASS, [], {"fleet_median": median}
        if numbers.get("reference"):
            parts.append("judged against the playbook's reference (smoke-acceptance), not the "
                         "fleet median %.2f" % median)
        elif len(lengths) >= 3:
            status, message, details = versus_fleet(numbers, measured, median, options)
            parts.append(message)
        else:
            parts.append("not compared with a fleet median (%s measured, 3 needed)"
                         % counted(len(lengths), "host"))
        collapse = collapse_position(numbers["per_position"], options)
        if collapse is not None:
            if status == Status.PASS:
                status = Status.WARN
            parts.append("per-position acceptance collapses to ~0 after position %d (%s): "
                         "the signature of a drafter missing its sliding window past 2,048 "
                         "tokens" % (collapse, ", ".join("%.2f" % r for r in
                                                         numbers["per_position"][:8])))
        drift = drifts.get(host.name)
        if drift is not None:
            if status == Status.PASS:
                status = Status.WARN
            parts.append(drift[0])
            details = {**details, "fingerprints": drift[1]}
        if not numbers.get("reference") and len(lengths) < 3 and status == Status.PASS:
            # nothing to compare with and nothing seen: not a verdict, so not a pass
            out[host.name] = skipped("smoke-fleet", FLEET_TITLE, "; ".join(
                [*parts, "no collapse in the per-position curve"]), **details)
            continue
        out[host.name] = check_result("smoke-fleet", FLEET_TITLE, status, *parts,
                                      details=details)
    return out


def served_as(host: HostResult, numbers: dict) -> str:
    """What a host serves, for the fingerprint comparison: its build and what its
    server's speculative config and model say."""
    vllm = host.vllm
    return json.dumps([vllm and vllm.version, vllm and vllm.commit, numbers.get("model"),
                       numbers.get("served_spec")], sort_keys=True, default=str)


def fingerprint_drifts(hosts: list[HostResult],
                       smoke_numbers: dict[str, dict]) -> dict[str, tuple[str, dict]]:
    """(message, {host: fingerprints}) for each host of a group (one build, one model,
    one speculative config) whose servers answered with more than one system_fingerprint
    (vLLM's hash of the whole engine config): replicas that look alike but do not run
    alike."""
    groups: dict[str, dict[str, list[str]]] = {}
    for host in hosts:
        numbers = smoke_numbers.get(host.name) or {}
        if numbers.get("fingerprints"):
            groups.setdefault(served_as(host, numbers), {})[host.name] = \
                list(numbers["fingerprints"])
    out: dict[str, tuple[str, dict]] = {}
    for members in groups.values():
        seen = {f for prints in members.values() for f in prints}
        if len(seen) < 2:
            continue
        words = ", ".join("%s %s" % (name, "/".join(prints))
                          for name, prints in sorted(members.items()))
        message = ("system_fingerprint differs among %s serving one build, model and "
                   "speculative config (%s): their engine configs differ"
                   % (counted(len(members), "host"), words))
        for name in members:
            out[name] = (message, dict(members))
    return out
