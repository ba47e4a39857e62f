"""checks/acceptance.py: vLLM's counters parsed with prometheus_client (summed over
engines, `_created` series ignored) and the load's numbers taken as deltas."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetcheck.checks.acceptance import counter_totals, measure
from fleetcheck.facts import Smoke
from fleetcheck.facts_decoder import decode

pytestmark = pytest.mark.unit

TEXT_BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 20.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 150.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 40.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 18.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 5.0
"""


def test_counters_summed_over_engines_created_ignored():
    totals, per_position, present = counter_totals(TEXT_BEFORE)
    assert totals["vllm:spec_decode_num_drafts"] == 30.0  # not 1.7e9 from _created
    assert totals["vllm:spec_decode_num_accepted_tokens"] == 90.0
    assert per_position == {0: 27.0, 1: 5.0}


def test_measure_takes_deltas():
    after = TEXT_BEFORE.replace("} 10.0", "} 14.0").replace("} 150.0", "} 210.0") \
        .replace("} 40.0", "} 58.0").replace('position="0"} 9.0', 'position="0"} 13.0') \
        .replace('position="1"} 5.0', 'position="1"} 7.0')
    numbers = measure(decode(Smoke, {"metrics_before": TEXT_BEFORE, "metrics_after": after,
                                     "load": {"results": [], "wall_s": 1.0, "planned": 0}}))
    assert numbers["drafts"] == 4 and numbers["draft_tokens"] == 60
    assert numbers["accepted_tokens"] == 18
    assert numbers["acceptance_rate"] == 18 / 60
    assert numbers["mean_acceptance_length"] == 1 + 18 / 4
    assert numbers["per_position"] == [4 / 4, 2 / 4]


# --- per-request measurement and the verdicts -------------------------------------------

from fleetcheck.checks.acceptance import drafter_window, fleet_checks, judge_smoke  # noqa: E402
from fleetcheck.intervals import ratio_interval  # noqa: E402
from fleetcheck.results import HostResult, VllmInfo  # noqa: E402
from fleetcheck.smoke_settings import SmokeSettings, validate_smoke  # noqa: E402


def metrics_text(drafts: float, accepted: float, per_position: list[float], k: int,
                 generation: float) -> str:
    lines = ["# TYPE vllm:spec_decode_num_drafts_total counter",
             'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} %r' % drafts,
             "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
             'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} %r' % (drafts * k),
             "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
             'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} %r' % accepted,
             "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    lines += ['vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",'
              'position="%d"} %r' % (p, v) for p, v in enumerate(per_position)]
    lines += ["# TYPE vllm:generation_tokens_total counter",
              'vllm:generation_tokens_total{engine="0",model_name="m"} %r' % generation]
    return "\n".join(lines) + "\n"


def load_facts(requests: list[tuple[int, list[int]]], k: int = 3, spec: dict | None = None,
               prompt_tokens: int = 20, drafter_config: dict | None = None,
               fingerprint: str | None = None) -> Smoke:
    """A load's facts from each request's (drafts, accepted per position): the per-request
    deltas as the probe sends them, the totals as the scrapes around the load."""
    results = []
    for i, (drafts, per_pos) in enumerate(requests):
        accepted = sum(per_pos)
        results.append({"prompt": "p%d" % i, "ok": True, "latency_s": 0.1, "status": 200,
                        "prompt_tokens": prompt_tokens, "completion_tokens": drafts + accepted,
                        "counters": {"drafts": drafts, "draft_tokens": drafts * k,
                                     "accepted_tokens": accepted,
                                     "generation_tokens": drafts + accepted,
                                     "per_position": per_pos}})
        if fingerprint is not None:
            results[-1]["fingerprint"] = fingerprint
    drafts = sum(r[0] for r in requests)
    per_pos = [sum(r[1][p] for r in requests) for p in range(k)]
    raw = {"mode": "attach", "url": "http://127.0.0.1:8000", "model": "m",
           "metrics_before": metrics_text(0, 0, [0] * k, k, 0),
           "metrics_after": metrics_text(drafts, sum(per_pos), per_pos, k, drafts + sum(per_pos)),
           "load": {"results": results, "wall_s": 1.0, "planned": len(requests)},
           "served_spec": {"from": "--speculative-config", "config": spec or {
               "method": "dflash", "model": "org/drafter", "num_speculative_tokens": k}}}
    if drafter_config is not None:
        raw["drafter_config"] = {"path": "/m/config.json", "data": drafter_config}
    return decode(Smoke, raw)


HEALTHY = [(20, [16, 12, 8]), (25, [20, 14, 9]), (18, [15, 11, 6]), (22, [17, 13, 10]),
           (30, [24, 19, 12]), (21, [16, 11, 7])]
DEAD = [(30, [0, 0, 0]), (28, [1, 0, 0]), (31, [0, 0, 0]), (29, [0, 0, 0])]


def test_per_request_deltas_give_the_intervals_of_the_totals():
    check, numbers = judge_smoke(load_facts(HEALTHY), SmokeSettings())
    assert check.status == "pass", check.message
    drafts = [d for d, _ in HEALTHY]
    accepted = [sum(p) for _, p in HEALTHY]
    want = ratio_interval(accepted, drafts)
    got = numbers["intervals"]["mean_acceptance_length"]
    assert (got["low"], got["high"]) == (pytest.approx(1 + want.low), pytest.approx(1 + want.high))
    assert numbers["mean_acceptance_length"] == 1 + sum(accepted) / sum(drafts)
    assert got["low"] < numbers["mean_acceptance_length"] < got["high"] and got["n"] == 6
    assert [r["acceptance_length"] for r in numbers["per_request"]] == [
        1 + a / d for a, d in zip(accepted, drafts)]
    assert numbers["per_request_sums"]["drafts"] == numbers["drafts"]
    assert len(numbers["intervals"]["per_position"]) == 3
    assert numbers["intervals"]["per_position"][0]["method"] == "wilson"
    assert "(95% CI" in check.message and numbers["verdict"] == "pass"


def test_incident_level_acceptance_is_broken_with_its_interval():
    check, numbers = judge_smoke(load_facts(DEAD), SmokeSettings())
    assert check.status == "fail" and "broken:" in check.message
    high = numbers["intervals"]["acceptance_rate"]["high"]
    assert high < 0.05 and "(95%% CI 0.0%%-%.1f%%)" % (100 * high) in check.message
    assert numbers["verdict"] == "broken"


def test_few_requests_straddling_the_broken_line_are_inconclusive_and_say_how_many_would_decide():
    check, numbers = judge_smoke(load_facts([(10, [1, 0, 0]), (10, [6, 2, 0])]), SmokeSettings())
    assert check.status == "warn", check.message
    assert check.message.startswith("inconclusive: 2 requests; about ")
    needed = check.details["requests_to_decide"]
    assert needed > 2 and "about %d would decide" % needed in check.message


def test_reference_regressed_inconclusive_and_pass():
    facts = load_facts(HEALTHY)
    length = judge_smoke(facts, SmokeSettings())[1]["mean_acceptance_length"]
    for ref, status, words in ((length * 1.5, "fail", "regressed:"),
                               (length * 1.05, "warn", "inconclusive:"),
                               (length * 0.9, "pass", "at or above 95% of the reference")):
        options = validate_smoke("pb.yaml", None, {"reference": {
            "mean_acceptance_length": ref, "drafter": "org/drafter"}}, SmokeSettings())
        check, numbers = judge_smoke(facts, options)
        assert check.status == status and words in check.message, (ref, check.message)
        assert numbers["reference"]["mean_acceptance_length"] == ref
    # a reference for another drafter does not apply
    options = validate_smoke("pb.yaml", None, {"reference": {
        "mean_acceptance_length": length * 1.5, "drafter": "org/other"}}, SmokeSettings())
    assert judge_smoke(facts, options)[0].status == "pass"


def test_synthetic_rejection_sampling_fails_naming_it():
    facts = load_facts(HEALTHY, spec={"method": "ngram", "num_speculative_tokens": 3,
                                      "rejection_sample_method": "synthetic",
                                      "synthetic_acceptance_length": 3.5})
    check, _ = judge_smoke(facts, SmokeSettings())
    assert check.status == "fail"
    assert "rejection_sample_method: synthetic" in check.message
    assert "synthetic_acceptance_length 3.5" in check.message


def test_a_prompt_set_within_the_drafters_window_gets_a_warning():
    config = {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 2048,
              "use_sliding_window": True}
    assert drafter_window(config) == 2048
    assert drafter_window({"layer_types": ["full_attention"], "sliding_window": 4096}) is None
    assert drafter_window({"dflash_config": {"use_swa": True, "swa_window_size": 1024}}) == 1024
    short = judge_smoke(load_facts(HEALTHY, drafter_config=config), SmokeSettings())[0]
    assert short.status == "warn" and "within the drafter's sliding window of 2048" in short.message
    long = judge_smoke(load_facts(HEALTHY, drafter_config=config, prompt_tokens=3000),
                       SmokeSettings())[0]
    assert long.status == "pass", long.message


def test_the_fleet_median_is_a_paired_reference():
    hosts, numbers = [], {}
    worse = [(d, [max(0, a - 6) for a in p]) for d, p in HEALTHY]
    for name, requests in (("a", HEALTHY), ("b", HEALTHY), ("c", HEALTHY), ("d", worse)):
        numbers[name] = judge_smoke(load_facts(requests), SmokeSettings())[1]
        hosts.append(HostResult(name=name, address=name, groups=(), status="pass"))
    verdicts = fleet_checks(hosts, numbers, SmokeSettings())
    assert verdicts["a"].status == "pass" and "in line with the fleet" in verdicts["a"].message
    assert verdicts["d"].status == "fail" and verdicts["d"].message.startswith("regressed:")
    assert "fleet median %.2f" % numbers["a"]["mean_acceptance_length"] in verdicts["d"].message


def test_hosts_serving_alike_with_different_fingerprints_are_warned_naming_them():
    """One build, model and speculative config on a, b and c, but c's engine config hashes
    differently (vLLM's system_fingerprint); d serves another drafter and is not compared
    with them."""
    hosts, numbers = [], {}
    other = {"method": "dflash", "model": "org/other", "num_speculative_tokens": 3}
    for name, fingerprint, spec in (("a", "vllm-0.33.0-1a2b3c4d", None),
                                    ("b", "vllm-0.33.0-1a2b3c4d", None),
                                    ("c", "vllm-0.33.0-99ff00ee", None),
                                    ("d", "vllm-0.33.0-77777777", other)):
        numbers[name] = judge_smoke(load_facts(HEALTHY, spec=spec, fingerprint=fingerprint),
                                    SmokeSettings())[1]
        hosts.append(HostResult(name=name, address=name, groups=(), status="pass",
                                vllm=VllmInfo(version="0.33.0", commit="4ba787ec9")))
    assert numbers["a"]["fingerprints"] == ["vllm-0.33.0-1a2b3c4d"]
    verdicts = fleet_checks(hosts, numbers, SmokeSettings())
    for name in ("a", "b", "c"):
        assert verdicts[name].status == "warn", verdicts[name]
        assert verdicts[name].details["fingerprints"] == {
            "a": ["vllm-0.33.0-1a2b3c4d"], "b": ["vllm-0.33.0-1a2b3c4d"],
            "c": ["vllm-0.33.0-99ff00ee"]}
        assert "c vllm-0.33.0-99ff00ee" in verdicts[name].message
    assert "fingerprints" not in verdicts["d"].details
    assert "system_fingerprint" not in verdicts["d"].message


def served_with_live_line(rate: str, length: str, port: int = 8000):
    """The served facts of a server on the load's port whose log's last SpecDecoding line
    printed these values (by the names of vLLM's own call)."""
    from fleetcheck.facts import Served
    metrics = {"line": None, "text": "SpecDecoding metrics: ...", "format":
               "vllm/v1/spec_decode/metrics.py:120", "ids": [], "spec": None, "time":
               "12-02 07:41:10", "values": {"mean_acceptance_length": length,
                                            "draft_acceptance_rate": rate}}
    return decode(Served, {"servers": [{"pid": 7, "port": port, "log": {
        "source": "fd 1 (/var/log/vllm.log)", "tried": [], "fatal": [], "metrics": metrics}}],
        "named": [], "drafters_asked": [], "codes": {}})


def test_the_servers_own_live_line_is_set_beside_the_loads_numbers():
    check, numbers = judge_smoke(load_facts(HEALTHY), SmokeSettings(),
                                 served_with_live_line("52.0", "2.56"))
    assert check.status == "pass", check.message
    assert numbers["live"]["values"]["mean_acceptance_length"] == "2.56"
    assert "the server's own log said mean acceptance length 2.56 at 12-02 07:41:10 " \
        "(fd 1 (/var/log/vllm.log), before this load)" in check.message
    other_port = judge_smoke(load_facts(HEALTHY), SmokeSettings(),
                             served_with_live_line("52.0", "2.56", port=9000))[1]
    assert other_port["live"] is None


def test_a_passing_load_on_a_server_whose_log_says_its_traffic_is_broken_warns():
    check, _ = judge_smoke(load_facts(HEALTHY), SmokeSettings(),
                           served_with_live_line("1.1", "1.03"))
    assert check.status == "warn", check.message
    assert "its traffic accepted 1.1% of draft tokens at 12-02 07:41:10, below the broken " \
        "line" in check.message


def test_the_probes_own_counter_sums_agree_with_prometheus_client():
    """Each request's deltas are summed on the host with the standard library; the load's
    totals on the controller with prometheus_client: the two must read the same text alike
    (label values with escaped quotes, commas and braces too)."""
    from fleetcheck.probe.smoke_load import counter_sums
    text = TEXT_BEFORE.replace('model_name="m"', 'model_name="a \\"b\\", {c}=d"') + \
        'vllm:generation_tokens_total{engine="0",model_name="m"} 7.0 1700000000000\n'
    totals, per_position, _ = counter_totals(text)
    sums = counter_sums(text)
    assert sums["drafts"] == totals["vllm:spec_decode_num_drafts"] == 30.0
    assert sums["accepted_tokens"] == totals["vllm:spec_decode_num_accepted_tokens"]
    assert sums["draft_tokens"] == totals["vllm:spec_decode_num_draft_tokens"]
    assert sums["generation_tokens"] == 7.0
    assert sums["per_position"] == per_position == {0: 27.0, 1: 5.0}


def test_a_live_line_read_after_the_load_is_not_set_beside_it():
    """A log read through the container engine is read after the probe, the load
    included: its last line may be the load's own."""
    from fleetcheck.facts import Served
    served = served_with_live_line("1.1", "1.03")
    (server,) = served.servers
    after = replace(served, servers=[replace(server, log=replace(server.log,
                                                                 engine_stream=True))])
    assert isinstance(after, Served)
    check, numbers = judge_smoke(load_facts(HEALTHY), SmokeSettings(), after)
    assert numbers["live"] is None and check.status == "pass", check.message
