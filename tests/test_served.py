"""What the servers serve, end to end over real sshd hosts (each with its own /proc):
processes shaped like `vllm serve` (their command line and environment are what the
probe reads; they answer /v1/models and /version), models in real hub-cache layouts.
Two servers with different drafters on one box, a host of the group on another drafter
revision, a mixed drafter without the V2 runner, a broken --speculative-config, the
expected drafter; every output shows what is served."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

import drafter_trees
import real_vllm
from drafter_trees import ZLAB, variant
from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
import waits

pytestmark = pytest.mark.unit

DRAFTER = "z-lab/Qwen3.6-27B-DFlash"
TARGET = "org/tiny-target"
TARGET_CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                 "num_hidden_layers": 52, "hidden_size": 128}
MIXED = "z-lab/mixed-DFlash"


def spec(drafter: str, tokens: int = 15) -> str:
    return json.dumps({"method": "dflash", "model": drafter, "num_speculative_tokens": tokens})


def hub(root, name: str, drafter_config: dict) -> tuple[str, str]:
    """A hub cache holding the target, the drafter and the mixed drafter; (cache, the
    drafter's commit)."""
    cache = str(root / name)
    drafter_trees.add_to_hub_cache(cache, TARGET, {"config.json": json.dumps(
        TARGET_CONFIG).encode()})
    commit = drafter_trees.add_to_hub_cache(cache, DRAFTER, {"config.json": json.dumps(
        drafter_config).encode()})
    drafter_trees.add_to_hub_cache(cache, MIXED, {"config.json": json.dumps(ZLAB).encode()})
    return cache, commit


def serve(fleet, host, python: str, script: str, cache: str, port: int, spec_config: str,
          env: str = "") -> None:
    """A server-shaped process under `python`: the checked venv's, so it reads as a server
    of the checked install, or another interpreter's (another install)."""
    fleet.spawn_on(host, "exec env HF_HUB_CACHE=%s %s %s %s serve %s --port %d "
                   "--served-model-name tiny --speculative-config %s" % (
                       shlex.quote(cache), env, python, script, TARGET, port,
                       shlex.quote(spec_config)))


def wait_answering(port: int, timeout: float = 30.0) -> None:
    waits.wait_answering("http://127.0.0.1:%d/version" % port, timeout)


def test_what_each_server_serves_across_a_group(tmp_path, fleet):
    venv, _ = real_vllm.install()
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    hosts = [fleet.add("gpu%d" % i) for i in (1, 2, 3)]
    fleet.start()
    caches = {}
    for index, host in enumerate(hosts):
        # gpu3: a new revision of the drafter, made for another target
        config = ZLAB if host.name != "gpu3" else variant(ZLAB, block_size=8,
                                                          num_target_layers=40)
        caches[host.name] = hub(tmp_path, "hub-" + host.name, config)
    ports = {}
    python = os.path.join(venv, "bin", "python")
    for host in hosts:
        ports[host.name] = free_loopback_port()
        serve(fleet, host, python, script, caches[host.name][0], ports[host.name], spec(DRAFTER))
    second = free_loopback_port()  # gpu1: a second server, another (mixed) drafter, V1 runner
    serve(fleet, hosts[0], python, script, caches["gpu1"][0], second, spec(MIXED, 7),
          "VLLM_USE_V2_MODEL_RUNNER=0 SHAPED_VERSION=0.31.0")  # and says it is another vLLM
    broken = free_loopback_port()  # gpu2: a command line whose JSON is cut
    serve(fleet, hosts[1], python, script, caches["gpu2"][0], broken, spec(DRAFTER)[:30])
    foreign = free_loopback_port()  # gpu3: another install's server, on another port
    serve(fleet, hosts[2], "/usr/bin/python3", script, caches["gpu3"][0], foreign,
          spec(MIXED, 3), "VLLM_USE_V2_MODEL_RUNNER=0")
    for port in list(ports.values()) + [second, broken, foreign]:
        wait_answering(port)
    inventory = {"all": {"hosts": {
        name: dict(entry, venv=venv, vllm_url="http://127.0.0.1:%d" % ports[name])
        for name, entry in ssh_hosts(fleet, hosts).items()}}}
    expected = "%s@%s" % (DRAFTER, caches["gpu1"][1][:10])
    junit = tmp_path / "junit.xml"
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check", "--expect-drafter", expected,
                         "--junit", str(junit), "--no-config-load")
    assert run.results is not None, run.stderr
    # --no-config-load: the loader child is not run (tests/test_served_real_vllm.py runs it)
    for host in hosts:
        loaded = run.check(host.name, "drafter-loaded")
        assert loaded["status"] == "skip" and "config loading is off" in loaded["message"]

    # gpu1: both servers, each with its drafter and revision, read from /proc
    served = {s["port"]: s for s in run.host("gpu1")["served"] if "pid" in s}
    main, other = served[ports["gpu1"]], served[second]
    assert main["serving"] and not other["serving"]
    assert main["target"]["spec"] == TARGET and main["served_names"] == ["tiny"]
    assert main["drafter"]["spec"] == DRAFTER
    assert main["drafter"]["revision"] == caches["gpu1"][1]
    assert main["drafter"]["cache"] == caches["gpu1"][0]
    assert main["drafter"]["cache_from"] == "HF_HUB_CACHE"
    assert main["num_speculative_tokens"] == 15 and main["method"] == "dflash"
    assert main["http"]["models"] == ["tiny"] and main["http"]["version"] == "0.32.0"
    assert other["drafter"]["spec"] == MIXED and other["num_speculative_tokens"] == 7
    assert other["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    check = run.check("gpu1", "drafter-config")
    assert check["status"] == "fail", check
    assert "mixed layers (4 of 5 sliding) require the V2 model runner" in check["message"]
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in check["message"]
    assert any(e["file"] == "vllm/model_executor/models/qwen3_dflash.py"
               for e in check["evidence"])
    # the target's 52 layers bound the ids
    assert any("within the 52 layers of org/tiny-target" in a["text"]
               for a in check["details"]["aspects"])

    # the group: gpu3 holds another drafter revision
    # gpu1 serves as the group does; its second server's /version disagrees with the disk
    witness = run.check("gpu1", "served-config")
    assert witness["status"] == "warn", witness
    assert "pid %d: the server's /version says 0.31.0; the checked install on disk is " \
        "0.32.0" % other["pid"] in witness["message"]
    assert any(a["status"] == "pass" and "same as the majority" in a["text"]
               for a in witness["details"]["aspects"])
    off = run.check("gpu3", "served-config")
    assert off["status"] == "fail"
    assert "differs in drafter revision" in off["message"] and "gpu3" in off["message"]
    assert "at revision %s, expected %s" % (caches["gpu3"][1][:12], caches["gpu1"][1][:10]) \
        in off["message"]
    assert off["details"]["differing"] == ["gpu3"]
    # another install's server on another port is named, not judged (install-running's rule)
    (named,) = [s for s in run.host("gpu3")["served"] if s.get("port") == foreign]
    assert named["judged"] is False and named["drafter"]["spec"] == MIXED
    assert "another install's server: named, not judged" in run.stdout
    other_target = run.check("gpu3", "drafter-config")
    assert "mixed" not in other_target["message"]
    assert other_target["status"] == "fail"
    assert "num_target_layers 40, but target org/tiny-target has 52 layers" in \
        other_target["message"]
    assert run.check("gpu1", "served-config")["details"]["expected"]["repo"] == DRAFTER

    # gpu2: the cut --speculative-config is a finding naming it; nothing else lost
    gpu2 = run.check("gpu2", "served-config")
    assert gpu2["status"] == "warn"
    assert "--speculative-config is not JSON" in gpu2["message"]
    assert run.check("gpu2", "dflash-layer-offset")["status"] == "pass"
    # its mixed drafter runs where this install picks the runner itself (0.32: no default)
    unset = run.check("gpu2", "drafter-config")
    assert unset["status"] == "warn", unset
    assert "leaves VLLM_USE_V2_MODEL_RUNNER unset" in unset["message"]

    # every output shows what is served
    assert caches["gpu3"][1][:12] in run.html and "Served" in run.html
    assert "served: pid" in junit.read_text() and caches["gpu3"][1][:12] in junit.read_text()
    assert "gpu3" in run.stdout and "z-lab/Qwen3.6-27B-DFlash@" in run.stdout
    assert run.code == 1


def test_diff_names_a_host_whose_served_drafter_changed():
    """`fleetcheck diff`: another drafter revision on a host is a change it names."""
    from dataclasses import replace

    from fleetcheck.report.diff import diff_runs, diff_text
    from results_factory import make_run

    def served(revision: str) -> list:
        return [{"pid": 5, "port": 8000, "serving": True, "target": {"spec": TARGET},
                 "drafter": {"spec": DRAFTER, "revision": revision}}]

    old, new = make_run(2, hostile=False), make_run(2, hostile=False)
    old = replace(old, hosts=[replace(h, served=served("a" * 40)) for h in old.hosts])
    new = replace(new, hosts=[replace(h, served=served("a" * 40 if i == 0 else "b" * 40))
                              for i, h in enumerate(new.hosts)])
    text = "\n".join(diff_text(diff_runs(old, new)))
    assert "served drafters: %s@%s -> %s@%s" % (DRAFTER, "a" * 12, DRAFTER, "b" * 12) in text
    assert text.count("served drafters") == 1


def test_an_expected_drafter_binds_every_server_when_none_is_on_vllm_url():
    """Two DFlash servers per host, neither on the host's vllm_url: each must serve the
    expected drafter; agreeing with the majority on the wrong one is no pass."""
    from fleetcheck.checks.served_config import apply_served
    from fleetcheck.drafter_expectations import DrafterExpectation
    from fleetcheck.results import CheckResult, HostResult

    def server(pid: int, port: int, drafter: str) -> dict:
        return {"pid": pid, "port": port, "serving": False, "judged": True,
                "target": {"spec": "t"}, "drafter": {"spec": drafter, "revision": "abc"},
                "method": "dflash", "num_speculative_tokens": 15, "notes": []}

    hosts = [HostResult(name=n, address=n, groups=[], status="pass",
                        checks=[CheckResult(id="f", title="f", status="pass", message="")],
                        served=[server(1, 8001, "z-lab/expected"),
                                server(2, 8002, "wrong/drafter")]) for n in ("a", "b")]
    expected = {n: DrafterExpectation("z-lab/expected", None, "--expect-drafter")
                for n in ("a", "b")}
    for host in apply_served(hosts, expected):
        check = next(c for c in host.checks if c.id == "served-config")
        assert check.status == "fail" and host.status == "fail", check
        assert "pid 2 serves drafter wrong/drafter, expected z-lab/expected" in check.message
        assert "pid 1 serves drafter" not in check.message


def test_a_host_whose_only_server_serves_no_drafter_says_which_one_was_expected():
    from fleetcheck.checks.served_config import apply_served
    from fleetcheck.drafter_expectations import DrafterExpectation
    from fleetcheck.results import CheckResult, HostResult

    plain = {"pid": 1, "port": 8000, "serving": True, "judged": True, "target": {"spec": "t"},
             "drafter": {}, "method": None, "num_speculative_tokens": None, "notes": []}
    host = HostResult(name="a", address="a", groups=[], status="pass",
                      checks=[CheckResult(id="f", title="f", status="pass", message="")],
                      served=[plain])
    (judged,) = apply_served([host], {"a": DrafterExpectation("z-lab/d", None, "cli")})
    skipped = next(c for c in judged.checks if c.id == "drafter-config")
    assert skipped.message == "no DFlash drafter served on this host (expected: z-lab/d)"


def test_path_drafters_with_no_revision_are_told_apart_by_their_config():
    """`./drafter` on three hosts, one resolving (from its server's cwd) to another config:
    the same string is not the same drafter."""
    from fleetcheck.checks.served_config import apply_served
    from fleetcheck.results import CheckResult, HostResult

    def host(name: str, digest: str) -> HostResult:
        server = {"pid": 1, "port": 8000, "serving": True, "judged": True,
                  "target": {"spec": "t"}, "method": "dflash", "num_speculative_tokens": 15,
                  "notes": [], "drafter": {"spec": "./drafter", "revision": None,
                                           "config_sha256": digest}}
        return HostResult(name=name, address=name, groups=[], status="pass",
                          checks=[CheckResult(id="f", title="f", status="pass", message="")],
                          served=[server])

    hosts = apply_served([host("h1", "a" * 64), host("h2", "a" * 64), host("h3", "b" * 64)])
    verdicts = {h.name: next(c for c in h.checks if c.id == "served-config") for h in hosts}
    assert [verdicts[n].status for n in ("h1", "h2", "h3")] == ["pass", "pass", "fail"]
    assert "differs in drafter revision" in verdicts["h3"].message
    assert "config bbbbbbbbbbbb" in verdicts["h3"].message


def test_three_hosts_with_five_servers_each_are_all_judged(tmp_path, fleet):
    """Five judged DFlash servers per host, none on vllm_url's port: each host's key is the
    set of the five configs, the same set on every host, so the group passes; no host gets
    an error and every host has every check row."""
    venv, _ = real_vllm.install()
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    hosts = [fleet.add("box%d" % i) for i in (1, 2, 3)]
    fleet.start()
    python = os.path.join(venv, "bin", "python")
    ports = []
    for host in hosts:
        cache, _ = hub(tmp_path, "hub-" + host.name, ZLAB)
        for tokens in range(1, 6):  # five servers, each its own num_speculative_tokens
            ports.append(free_loopback_port())
            serve(fleet, host, python, script, cache, ports[-1], spec(DRAFTER, tokens),
                  "VLLM_USE_V2_MODEL_RUNNER=1")
    for port in ports:
        wait_answering(port)
    unused = free_loopback_port()  # vllm_url names a port no server listens on
    inventory = {"all": {"hosts": {
        name: dict(entry, venv=venv, vllm_url="http://127.0.0.1:%d" % unused)
        for name, entry in ssh_hosts(fleet, hosts).items()}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check", "--no-config-load")
    assert run.results is not None, run.stderr
    rows = {h["name"]: [c["id"] for c in h["checks"]] for h in run.results["hosts"]}
    assert len(rows) == 3 and len({tuple(r) for r in rows.values()}) == 1, rows
    for name, ids in rows.items():
        assert {"drafter-config", "drafter-loaded", "served-config"} <= set(ids), ids
        errors = [c for c in run.host(name)["checks"] if c["status"] == "error"]
        assert errors == [], errors
        assert len([s for s in run.host(name)["served"] if s.get("judged")]) == 5
        group = run.check(name, "served-config")
        assert group["status"] == "pass", group
        assert "serves the same as the majority of the fleet" in group["message"]
        for tokens in range(1, 6):
            assert "num_speculative_tokens %d" % tokens in group["message"]
        assert run.check(name, "drafter-config")["status"] == "pass"


def test_an_expected_drafter_is_enforced_on_what_the_box_serves(tmp_path, fleet):
    """--expect-drafter: a box whose only server (another venv's, on a port other than
    vllm_url's) serves another drafter fails served-config, naming what it serves; a box
    with no server at all skips it, its drafter-config judged on the expected drafter."""
    venv, _ = real_vllm.install()
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    expected = drafter_trees.write_model_dir(str(tmp_path / "models" / "expected-DFlash"),
                                             ZLAB)
    other = drafter_trees.write_model_dir(str(tmp_path / "models" / "other-DFlash"),
                                          variant(ZLAB, block_size=8))
    busy, idle = fleet.add("busy"), fleet.add("idle")
    fleet.start()
    cache, _ = hub(tmp_path, "hub", ZLAB)
    port = free_loopback_port()
    serve(fleet, busy, "/usr/bin/python3", script, cache, port, spec(other))
    wait_answering(port)
    vllm_url = "http://127.0.0.1:%d" % free_loopback_port()
    inventory = {"all": {"hosts": {
        name: dict(entry, venv=venv, vllm_url=vllm_url)
        for name, entry in ssh_hosts(fleet, [busy, idle]).items()}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check", "--expect-drafter", expected)
    assert run.results is not None, run.stderr
    (server,) = [s for s in run.host("busy")["served"] if s.get("pid")]
    assert server["judged"] is False and server["drafter"]["spec"] == other
    check = run.check("busy", "served-config")
    assert check["status"] == "fail", check
    assert "pid %d (another install's server) serves drafter %s, expected %s" % (
        server["pid"], other, expected) in check["message"]
    assert any("servers on this host: pid %d (port %d) serves drafter %s" % (
        server["pid"], port, other) in e["text"] for e in check["evidence"])
    skipped = run.check("idle", "served-config")
    assert skipped["status"] == "skip", skipped
    assert skipped["message"] == "no vLLM server runs on this host"
    judged = run.check("idle", "drafter-config")
    assert judged["status"] == "pass", judged
    assert "drafter %s" % expected in judged["message"]
    assert run.code == 1

    # the same hosts through an engine: a bundle written for the expected drafter, run on
    # each host over plain ssh, judged with the same expectation: run's verdicts
    bundle = subprocess.run([sys.executable, "-m", "fleetcheck", "probe-bundle", "--venv", venv,
                             "--no-import-check", "--expect-drafter", expected],
                            capture_output=True, text=True, check=True).stdout
    facts = []
    for host in (busy, idle):
        answer = subprocess.run(
            ["ssh", "-i", fleet.client_key, "-o", "UserKnownHostsFile=%s" % fleet.known_hosts,
             "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", str(host.port),
             "root@%s" % host.address, "python3 - --host %s" % host.name],
            input=bundle, capture_output=True, text=True, timeout=120)
        assert answer.returncode == 0, answer.stderr
        facts.append(tmp_path / ("%s.json" % host.name))
        facts[-1].write_text(answer.stdout)
    out = tmp_path / "judged.json"
    judged_run = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "judge", *map(str, facts), "--no-import-check",
         "--expect-drafter", expected, "--json", str(out), "--html", str(tmp_path / "j.html")],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
    assert judged_run.returncode == run.code, judged_run.stderr
    by_judge = {h["name"]: {c["id"]: (c["status"], c["message"]) for c in h["checks"]}
                for h in json.loads(out.read_text())["hosts"]}
    for name in ("busy", "idle"):
        by_run = {c["id"]: (c["status"], c["message"]) for c in run.host(name)["checks"]}
        assert {k: v[0] for k, v in by_judge[name].items()} == \
            {k: v[0] for k, v in by_run.items()}, name
        for check_id in ("drafter-config", "drafter-loaded", "served-config"):
            assert by_judge[name][check_id] == by_run[check_id], (name, check_id)
