"""Drafter configs in the shapes real DFlash checkpoints use, and a Hugging Face hub
cache laid out as huggingface_hub writes it (blobs, snapshots of symlinks, refs), for
the served/drafter tests. The configs are modelled on public ones: z-lab's
(`dflash_config.target_layer_ids`, `layer_types`, a top-level `sliding_window`) and the
MiMo / ModelOpt style (`dflash_config.use_swa`, `swa_window_size`)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from typing import Any

# z-lab/Qwen3.6-27B-DFlash's shape: 4 sliding + 1 full layer, window 2048, 52-layer target
ZLAB: dict[str, Any] = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": 128,
    "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "num_hidden_layers": 5, "vocab_size": 1024,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
    "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
    "use_sliding_window": True, "sliding_window": 2048, "max_window_layers": 5,
    "num_target_layers": 52, "target_hidden_size": 128, "block_size": 16,
    "dflash_config": {"target_layer_ids": [1, 13, 25, 37, 49], "mask_token_id": 3,
                      "block_size": 16},
}
# DFlash2: the DFlash shape plus the grouped convolution and candidate selector keys its
# module reads by subscript
DFLASH2: dict[str, Any] = dict(copy.deepcopy(ZLAB), architectures=["DFlash2DraftModel"])
DFLASH2["dflash_config"].update(conv_kernel_size=3, conv_group_size=4, selector_rank=8,
                                selector_top_k=4)
# vllm-project/speculators format: the layers in transformer_layer_config, the target's
# taps as aux hidden-state ids (one above the DFlash target layer ids), mask_token_id on top
SPECULATORS: dict[str, Any] = {
    "architectures": ["DFlashSpeculator"], "speculators_model_type": "dflash",
    "speculators_version": "0.3.0", "aux_hidden_state_layer_ids": [2, 14, 26, 38, 50],
    "mask_token_id": 3, "target_hidden_size": 128, "draft_vocab_size": 1024,
    # as a transformers 5 Qwen3Config.to_dict() writes it: SpeculatorsConfig has no class
    # defaults, so what the model code reads must be there
    "transformer_layer_config": dict({
        k: v for k, v in ZLAB.items()
        if k not in ("architectures", "dflash_config", "target_hidden_size", "block_size")},
        hidden_act="silu", rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
    "speculators_config": {"algorithm": "dflash",
                           "proposal_methods": [{"proposal_type": "greedy",
                                                 "speculative_tokens": 3}],
                           "default_proposal_method": "greedy",
                           "verifier": {"name_or_path": "org/tiny-target",
                                        "architectures": ["Qwen3ForCausalLM"]}},
}
# MiMo / ModelOpt style: the window inside dflash_config, every layer sliding
USE_SWA: dict[str, Any] = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": 128,
    "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "num_hidden_layers": 2, "vocab_size": 1024, "num_target_layers": 40,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "target_hidden_size": 128,
    "dflash_config": {"target_layer_ids": [1, 6, 11, 16, 22, 27, 32, 37], "mask_token_id": 3,
                      "use_swa": True, "swa_window_size": 1024},
}


def as_speculators(dflash_dir: str, out: str, verifier: str) -> str:
    """A DFlash drafter made by scripts/tiny_models.py (z-lab's format) rewritten in the
    vllm-project/speculators format, weights unchanged: its layers' config as
    `transformer_layer_config`, each target layer id + 1 as `aux_hidden_state_layer_ids`,
    `mask_token_id` on top, a `speculators_config` naming the verifier."""
    import shutil

    with open(os.path.join(dflash_dir, "config.json"), encoding="utf-8") as handle:
        dflash = json.load(handle)
    inner = dflash.pop("dflash_config")
    layers = {k: v for k, v in dflash.items() if k not in ("architectures", "target_hidden_size")}
    config = {"architectures": ["DFlashSpeculator"], "speculators_model_type": "dflash",
              "speculators_version": "0.3.0",
              "aux_hidden_state_layer_ids": [i + 1 for i in inner["target_layer_ids"]],
              "mask_token_id": inner["mask_token_id"],
              "target_hidden_size": dflash.get("target_hidden_size"),
              "transformer_layer_config": layers,
              "speculators_config": {"algorithm": "dflash",
                                     "proposal_methods": [{"proposal_type": "greedy",
                                                           "speculative_tokens": 3}],
                                     "default_proposal_method": "greedy",
                                     "verifier": {"name_or_path": verifier}}}
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(dflash_dir):
        if name != "config.json":
            shutil.copy(os.path.join(dflash_dir, name), os.path.join(out, name))
    return write_model_dir(out, config)


def variant(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `base` with changes; a dotted key reaches into dflash_config, a value of
    None removes the key."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        parts = key.split("__")
        target = out
        for part in parts[:-1]:
            target = target[part]
        if value is None:
            target.pop(parts[-1], None)
        else:
            target[parts[-1]] = value
    return out


def write_model_dir(directory: str, config: dict[str, Any] | bytes) -> str:
    os.makedirs(directory, exist_ok=True)
    data = config if isinstance(config, bytes) else json.dumps(config, indent=2).encode()
    with open(os.path.join(directory, "config.json"), "wb") as handle:
        handle.write(data)
    return directory


def add_to_hub_cache(cache: str, repo: str, files: dict[str, bytes],
                     commit: str | None = None, ref: str = "main") -> str:
    """`repo` in the hub cache as huggingface_hub lays it out: each file a blob named by
    its sha256 (git's sha1 for small files; the name is opaque to readers), symlinked
    from snapshots/<commit>/, and refs/<ref> holding the commit. Returns the commit."""
    repo_dir = os.path.join(cache, "models--" + repo.replace("/", "--"))
    commit = commit or hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    os.makedirs(os.path.join(repo_dir, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        with open(os.path.join(repo_dir, "blobs", blob), "wb") as handle:
            handle.write(data)
        link = os.path.join(snapshot, name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.relpath(os.path.join(repo_dir, "blobs", blob),
                                   os.path.dirname(link)), link)
    with open(os.path.join(repo_dir, "refs", ref), "w") as handle:
        handle.write(commit)
    return commit


def model_files(directory: str) -> dict[str, bytes]:
    """Every file of a model directory, by relative name."""
    out = {}
    for base, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, directory)] = handle.read()
    return out


SCAN_CACHE = """
import json, sys
from huggingface_hub import scan_cache_dir
info = scan_cache_dir(sys.argv[1])
print(json.dumps({"warnings": [str(w) for w in info.warnings],
                  "repos": {r.repo_id: {"refs": {ref: rev.commit_hash for rev in r.revisions
                                                 for ref in rev.refs},
                                        "snapshots": {rev.commit_hash: str(rev.snapshot_path)
                                                      for rev in r.revisions}}
                            for r in info.repos}}))
"""

SERVER_SHAPED = '''#!/usr/bin/python3
"""A process shaped like `vllm serve MODEL --port N --speculative-config JSON ...` that
answers /v1/models and /version as vLLM does (no model loaded; the version it claims
from SHAPED_VERSION)."""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
argv = sys.argv[1:]
model = argv[1]
port = int(argv[argv.index("--port") + 1])
names = [argv[argv.index("--served-model-name") + 1]] if "--served-model-name" in argv \\
    else [model]
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/version": {"version": os.environ.get("SHAPED_VERSION", "0.32.0")},
                "/v1/models": {"object": "list", "data": [
                    {"id": n, "object": "model", "root": model} for n in names]}}.get(self.path)
        data = json.dumps(body).encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def server_shaped_script(directory: str) -> str:
    """The script above as an executable named `vllm` (so its command line reads as
    `vllm serve ...`)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "vllm")
    with open(path, "w") as handle:
        handle.write(SERVER_SHAPED)
    os.chmod(path, 0o755)
    return path
