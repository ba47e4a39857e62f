"""Smoke load over real SSH against a stand-in vLLM server, for what a real server cannot
show on demand (test_real_vllm.py runs the real one): scripted acceptance levels across a
fleet, a collapsing curve, a dead engine's 503, counters that never move. The numbers must
equal the server's own counter deltas exactly, and every failure mode must say what went
wrong."""

from __future__ import annotations

import json
import os
import re
import socket
import sys

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.smoke_settings import prompt_set
from probe_helpers import ENV, STANDIN, wait_listening

pytestmark = pytest.mark.unit

LOAD = {"requests": 8, "max_tokens": 64, "time_budget_s": 30}
ATTACH_SCENARIOS = ["healthy", "healthy", "healthy", "low", "collapse", "nodrafts", "nospec",
                    "nostats", "dead", "failing", "slow", "trickle", "trickle-all", "busy",
                    "busy-some"]
# hosts whose server answers one byte a second: a deadline of 3 + 2 (budget) + 10 (attach)
TRICKLE = {"timeout": 3, "smoke": dict(LOAD, time_budget_s=2)}
TRICKLE_DEADLINE = 3 + 2 + 10


@pytest.fixture(scope="module")
def attach_run(tmp_path_factory, fleet_factory):
    tmp = tmp_path_factory.mktemp("smoke")
    venv = str(tmp / "env")
    write_install(venv, "0.33.0", FIXED)
    fleet = fleet_factory(str(tmp / "fleet"))
    for i, scenario in enumerate(ATTACH_SCENARIOS):
        fleet.add("%s-%d" % (scenario, i), mounts={ENV: venv})
    fleet.add("refused", mounts={ENV: venv})  # no server behind its vllm_url
    fleet.start()
    servers = []
    states = {}
    for host, scenario in zip(fleet.hosts, ATTACH_SCENARIOS):
        states[host.name] = str(tmp / ("%s.state.json" % host.name))
        servers.append(fleet.spawn_on(host, "exec %s %s --bind %s --port 8000 --scenario %s "
                                      "--state %s" % (sys.executable, STANDIN, host.address,
                                                      scenario, states[host.name])))
    for host in fleet.hosts[:len(ATTACH_SCENARIOS)]:
        wait_listening(host.address, 8000)
    hosts = ssh_hosts(fleet, fleet.hosts, venv=ENV)
    for host in fleet.hosts:
        hosts[host.name]["vllm_url"] = "http://%s:8000" % host.address
        hosts[host.name]["smoke"] = dict(LOAD, time_budget_s=4) if host.name.startswith(
            "slow") else dict(LOAD)
        if host.name.startswith("trickle"):
            hosts[host.name].update(TRICKLE)
    try:
        run = run_fleetcheck(tmp, {"all": {"hosts": hosts}}, "--known-hosts", fleet.known_hosts,
                             "--smoke", "--no-import-check", "-j", "14")
        yield run, {name: json.load(open(path)) for name, path in states.items()}
    finally:
        for server in servers:
            server.kill()
        fleet.stop()


def test_numbers_equal_the_servers_own_counter_deltas(attach_run):
    run, states = attach_run
    for name in ("healthy-0", "healthy-1", "low-3", "collapse-4"):
        smoke, own = run.host(name)["smoke"], states[name]
        assert own["requests"] == LOAD["requests"]
        assert smoke["drafts"] == own["drafts"] > 0
        assert smoke["draft_tokens"] == own["draft_tokens"]
        assert smoke["accepted_tokens"] == own["accepted_tokens"]
        assert smoke["acceptance_rate"] == own["accepted_tokens"] / own["draft_tokens"]
        assert smoke["mean_acceptance_length"] == 1 + own["accepted_tokens"] / own["drafts"]
        assert smoke["per_position"] == [n / own["drafts"] for n in own["per_position"]]
        assert smoke["requests"] == {"ok": 8, "failed": 0, "planned": 8, "measured": 8}
        # each request's own deltas, sent one at a time: they add up to the load's
        requests = smoke["per_request"]
        assert [r["prompt"] for r in requests] == [p["id"] for p in prompt_set()["prompts"][:8]]
        assert sum(r["drafts"] for r in requests) == own["drafts"]
        assert sum(r["accepted_tokens"] for r in requests) == own["accepted_tokens"]
        assert all(r["acceptance_length"] == 1 + r["accepted_tokens"] / r["drafts"]
                   for r in requests)
        assert smoke["model"] == "Qwen/Qwen3.6-27B"
        assert smoke["latency_p50_s"] > 0 and smoke["tokens_per_s"] > 0


def test_healthy_passes_and_incident_level_acceptance_fails(attach_run):
    run, states = attach_run
    healthy = run.check("healthy-0", "smoke-acceptance")
    own = states["healthy-0"]
    assert healthy["status"] == "pass"
    smoke = run.host("healthy-0")["smoke"]
    rate, length = smoke["intervals"]["acceptance_rate"], smoke["intervals"]["mean_acceptance_length"]
    assert "acceptance rate %.1f%% (95%% CI %.1f%%-%.1f%%), mean acceptance length %.2f (95%% CI " \
        "%.2f-%.2f)" % (100 * own["accepted_tokens"] / own["draft_tokens"], 100 * rate["low"],
                        100 * rate["high"], 1 + own["accepted_tokens"] / own["drafts"],
                        length["low"], length["high"]) in healthy["message"]
    assert rate["n"] == length["n"] == 8 and rate["method"] == "t"
    assert 0.28 < own["accepted_tokens"] / own["draft_tokens"] < 0.32  # the scripted 30%
    low = run.check("low-3", "smoke-acceptance")
    assert low["status"] == "fail"
    assert "acceptance rate 1.1% (95% CI" in low["message"] and "broken:" in low["message"]
    assert run.host("low-3")["smoke"]["intervals"]["acceptance_rate"]["high"] < 0.05
    assert run.host("low-3")["status"] == "fail"


def test_fleet_flags_outlier_and_collapsing_curve(attach_run):
    run, _ = attach_run
    outlier = run.check("low-3", "smoke-fleet")
    assert outlier["status"] == "fail" and outlier["message"].startswith("regressed:")
    assert "95%% of the fleet median %.2f" % outlier["details"]["fleet_median"] in outlier["message"]
    assert outlier["details"]["paired_prompts"] == LOAD["requests"]
    collapse = run.check("collapse-4", "smoke-fleet")
    assert collapse["status"] == "fail"
    assert "collapses to ~0 after position 4" in collapse["message"]
    assert run.check("healthy-0", "smoke-fleet")["status"] == "pass"


@pytest.mark.parametrize("host, status, words", [
    ("nodrafts-5", "error", "speculation is off"),
    ("nospec-6", "fail", "speculative decoding is not configured"),
    ("nostats-7", "error", "--disable-log-stats"),
    ("dead-8", "error", "503"),
    ("failing-9", "error", "every request failed"),
    ("slow-10", "warn", "time budget of 4s ran out"),
    ("refused", "error", "no vLLM server answers"),
])
def test_failure_modes_say_what_went_wrong(attach_run, host, status, words):
    run, _ = attach_run
    check = run.check(host, "smoke-acceptance")
    assert check["status"] == status, check
    assert words in check["message"], check["message"]
    # the static checks of that host still ran
    assert run.check(host, "dflash-layer-offset")["status"] == "pass"


def test_a_busy_servers_deltas_are_not_judged_and_a_failed_request_keeps_its_answer(
        attach_run):
    """Other clients decode on the server while the load runs: a request whose
    generation_tokens delta differs from its own completion_tokens counted their traffic.
    When every request did, nothing is judged and the check says why; when some did, the
    numbers are the clean requests' own deltas. A request the server refused keeps its
    HTTP status and the server's own message."""
    run, states = attach_run
    busy = run.check("busy-13", "smoke-acceptance")
    assert busy["status"] == "error" and "other traffic was counted" in busy["message"], busy
    assert all(r["other_traffic"] for r in run.host("busy-13")["smoke"]["per_request"])
    some = run.host("busy-some-14")["smoke"]
    clean = [r for r in some["per_request"] if not r.get("other_traffic")]
    assert some["other_traffic"] == 4 and some["judged_requests"] == len(clean) == 4, some
    assert some["drafts"] == sum(r["drafts"] for r in clean), some
    assert some["accepted_tokens"] == sum(r["accepted_tokens"] for r in clean), some
    check = run.check("busy-some-14", "smoke-acceptance")
    assert any("other traffic was counted: 4 requests" in e["text"]
               for e in check["evidence"]), check
    failed = run.host("failing-9")["smoke"]["per_request"]
    assert failed and all(r["status"] == 500 and r["error"] ==
                          "HTTP 500: EngineCore encountered an issue" for r in failed), failed
    assert "HTTP 500: EngineCore encountered an issue" in \
        run.check("failing-9", "smoke-acceptance")["message"]


@pytest.mark.parametrize("host, words", [
    ("trickle-11", re.escape("every request failed (1): POST http://")),  # one at a time
    # at most 10 s for /health, less when the host's deadline leaves less (a loaded machine)
    ("trickle-all-12", r"/health: no complete answer within (10\.0|[0-9]\.[0-9])s"),
])
def test_a_trickling_server_never_takes_the_host_past_its_deadline(attach_run, host, words):
    """One byte a second defeats a per-read timeout; each stage (here /health, and each
    request of the load) is bounded as a whole, so the host answers inside its deadline
    with its static checks, and the smoke check says which stage stalled."""
    run, _ = attach_run
    result = run.host(host)
    assert result["error"] is None, result  # not `timeout`: the probe answered in time
    assert result["duration_s"] < TRICKLE_DEADLINE
    check = run.check(host, "smoke-acceptance")
    assert check["status"] == "error" and re.search(words, check["message"]), check["message"]
    assert "no complete answer" in check["message"]
    assert run.check(host, "dflash-layer-offset")["status"] == "pass"


def test_html_shows_acceptance_bars_and_position_curves(attach_run):
    run, _ = attach_run
    html = run.html
    assert 'id="acceptance-chart"' in html and "fleet median" in html
    with_drafts = [h for h in run.results["hosts"] if h["smoke"] and h["smoke"]["drafts"]]
    # healthy x3, low, collapse, slow, trickle (its server counted drafts for answers
    # that never arrived), and busy-some (its clean requests' own drafts)
    assert len(with_drafts) == 8
    assert html.count('class="position-curve"') == len(with_drafts)
    assert "%.2f" % run.host("healthy-0")["smoke"]["mean_acceptance_length"] in html
    # every bar and every position carries its 95% interval; the bars are sorted, lowest first
    chart = html[html.index('id="acceptance-chart"'):html.index("</svg>", html.index(
        'id="acceptance-chart"'))]
    shown = [float(v) for v in re.findall(r"<title>[^<:]+: ([0-9.]+)", chart)]
    assert len(shown) == len(with_drafts) and shown == sorted(shown)
    # trickle's drafts came with no answered request: no request measured, no interval
    with_intervals = [h for h in with_drafts if h["smoke"]["intervals"]["mean_acceptance_length"]]
    assert len(with_intervals) == 7
    assert chart.count('class="ci"') == chart.count("(95% CI") == len(with_intervals)
    healthy = run.host("healthy-0")["smoke"]
    ci = healthy["intervals"]["mean_acceptance_length"]
    assert "%.2f (%.2f-%.2f)" % (healthy["mean_acceptance_length"], ci["low"], ci["high"]) in chart
    positions = len(healthy["per_position"])
    assert html.count("95% Wilson CI") >= positions * len(with_drafts) - positions
    # the terminal gives every host's figures with their intervals, passing ones too
    rate = healthy["intervals"]["acceptance_rate"]
    assert "healthy-0: acceptance rate %.1f%% (95%% CI %.1f%%-%.1f%%), mean acceptance length " \
        "%.2f (95%% CI %.2f-%.2f)" % (100 * healthy["acceptance_rate"], 100 * rate["low"],
                                      100 * rate["high"], healthy["mean_acceptance_length"],
                                      ci["low"], ci["high"]) in run.stdout


def write_vllm_command(venv: str) -> None:
    path = os.path.join(venv, "bin", "vllm")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, STANDIN))
    os.chmod(path, 0o755)


def test_launch_mode_starts_measures_and_stops_the_server(tmp_path, fleet):
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED)
    write_vllm_command(venv)
    good = fleet.add("launch-ok", mounts={ENV: venv})
    bad = fleet.add("launch-broken", mounts={ENV: venv})
    fleet.start()
    state = str(tmp_path / "launch.state.json")
    ports = {good.name: 18100 + os.getpid() % 500, bad.name: 18700 + os.getpid() % 500}
    hosts = ssh_hosts(fleet, [good, bad], venv=ENV)
    for host, scenario in ((good, "healthy"), (bad, "startup-error")):
        hosts[host.name]["smoke"] = dict(LOAD, mode="launch", port=ports[host.name],
                                         startup_timeout_s=30, env={
                                             "FLEETCHECK_STANDIN_SCENARIO": scenario,
                                             "FLEETCHECK_STANDIN_STATE": state})
    run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts", fleet.known_hosts,
                         "--smoke", "--no-import-check")
    ok = run.check("launch-ok", "smoke-acceptance")
    assert ok["status"] == "pass", ok
    own = json.load(open(state))
    assert run.host("launch-ok")["smoke"]["accepted_tokens"] == own["accepted_tokens"]
    assert any("stand-in vllm serving" in e["text"] for e in ok["evidence"])  # log tail
    broken = run.check("launch-broken", "smoke-acceptance")
    assert broken["status"] == "fail"
    assert "require the V2 model runner" in broken["message"]
    # the server was stopped and its temp log removed
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", ports[good.name]), timeout=1).close()
    log_file = ok["evidence"][-1]["file"]
    assert log_file.startswith("/tmp/fleetcheck-smoke-") and not os.path.exists(log_file)


def test_no_smoke_wins_over_inventory(tmp_path, fleet):
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED)
    host = fleet.add("quiet", mounts={ENV: venv})
    fleet.start()
    hosts = ssh_hosts(fleet, [host], venv=ENV)
    hosts["quiet"]["smoke"] = {"enabled": True}
    run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts", fleet.known_hosts,
                         "--no-smoke")
    assert run.code == 0
    assert all(not c["id"].startswith("smoke") for c in run.host("quiet")["checks"])
