"""Small synthetic vLLM install trees, written from scratch (no vLLM code is copied).

They hold just the shapes fleetcheck's default playbook looks at, in a venv layout
(`lib/pythonX.Y/site-packages`), with a valid dist-info (METADATA, INSTALLER, RECORD with
real hashes). The demo serves them from its sshd hosts; unit tests restyle them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import textwrap

PY_DIR = "python%d.%d" % sys.version_info[:2]

FIXED = {
    "vllm/v1/worker/gpu_model_runner.py": '''
        class GPUModelRunner:
            def _aux_layers_from_draft(self, hf_config):
                ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
                if not ids:
                    dflash_config = getattr(hf_config, "dflash_config", None) or {}
                    # DFlash names the layer whose output is read; aux index k is after k layers
                    ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]
                return tuple(ids) if ids else None
        ''',
    "vllm/model_executor/models/registry.py": '''
        _SPECULATIVE_DECODING_MODELS = {
            "EagleLlamaForCausalLM": ("llama_eagle", "EagleLlamaForCausalLM"),
            "DFlashDraftModel": ("qwen3_dflash", "DFlashQwen3ForCausalLM"),
            "DFlashLagunaForCausalLM": ("laguna_dflash", "DFlashLagunaForCausalLM"),
        }
        ''',
    "vllm/model_executor/models/qwen3_dflash.py": '''
        from vllm.attention import Attention
        from vllm.config import get_current_vllm_config

        def _window_for(config, idx):
            kinds = getattr(config, "layer_types", None) or []
            if idx < len(kinds) and kinds[idx] == "sliding_attention":
                return config.sliding_window
            return None

        def _check_mixed(config, use_v2):
            kinds = getattr(config, "layer_types", None) or []
            if 0 < kinds.count("sliding_attention") < len(kinds) and not use_v2:
                raise NotImplementedError(
                    "DFlash drafters with mixed sliding/full attention require "
                    "the V2 model runner; relaunch with VLLM_USE_V2_MODEL_RUNNER=1."
                )

        class DFlashAttention:
            def __init__(self, config, idx):
                self.attn = Attention(
                    config.num_attention_heads,
                    config.head_dim,
                    per_layer_sliding_window=_window_for(config, idx),
                    prefix="model.layers.%d.self_attn.attn" % idx,
                )

        class DFlashQwen3ForCausalLM:
            def __init__(self, *, vllm_config, prefix=""):
                config = vllm_config.speculative_config.draft_model_config.hf_config
                _check_mixed(config, get_current_vllm_config().use_v2_model_runner)
                self.layers = [DFlashAttention(config, i)
                               for i in range(config.num_hidden_layers)]
        ''',
    "vllm/model_executor/models/laguna_dflash.py": '''
        def _get_dflash_layer_types(config):
            return getattr(config, "layer_types", None)

        _DFLASH_VALID_LAYER_TYPES = {"full_attention", "sliding_attention"}
        ''',
    "vllm/transformers_utils/configs/speculators/algos.py": '''
        def update_dflash(config_dict, pre_trained_config):
            config_dict["dflash_config"] = {"target_layer_ids": pre_trained_config["aux"]}
        ''',
    "vllm/config/speculative.py": '''
        class SpeculativeConfig:
            method: str = ""
            disable_eagle_block_drop: bool = False

            def use_eagle(self) -> bool:
                return self.method in ("eagle", "eagle3", "mtp", "dflash")

            def use_dflash(self) -> bool:
                return self.method == "dflash"

            def needs_eagle_block_drop(self) -> bool:
                """DFlash drafts from target hidden states only: no trailing-block drop."""
                return self.use_eagle() and not self.use_dflash()

            def use_eagle_block_drop(self) -> bool:
                return self.needs_eagle_block_drop() and not self.disable_eagle_block_drop
        ''',
    "vllm/v1/core/sched/scheduler.py": '''
        from vllm.v1.core.kv_cache_manager import KVCacheManager

        class Scheduler:
            def __init__(self, speculative_config):
                self.use_eagle = False
                self.use_eagle_block_drop = False
                if speculative_config:
                    self.use_eagle = speculative_config.use_eagle()
                    self.use_eagle_block_drop = speculative_config.use_eagle_block_drop()
                self.kv_cache_manager = KVCacheManager(use_eagle=self.use_eagle_block_drop)
        ''',
}

UNFIXED = dict(FIXED)
UNFIXED.update({
    "vllm/v1/worker/gpu_model_runner.py": '''
        class GPUModelRunner:
            def _aux_layers_from_draft(self, hf_config):
                ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
                if not ids:
                    dflash_config = getattr(hf_config, "dflash_config", None) or {}
                    ids = dflash_config.get("target_layer_ids")
                return tuple(ids) if ids else None
        ''',
    "vllm/model_executor/models/qwen3_dflash.py": '''
        from vllm.attention import Attention

        class DFlashAttention:
            def __init__(self, config, idx):
                self.attn = Attention(config.num_attention_heads, config.head_dim,
                                      prefix="model.layers.%d.self_attn.attn" % idx)

        class DFlashQwen3ForCausalLM:
            def __init__(self, *, vllm_config, prefix=""):
                config = vllm_config.speculative_config.draft_model_config.hf_config
                self.layers = [DFlashAttention(config, i)
                               for i in range(config.num_hidden_layers)]
        ''',
    "vllm/config/speculative.py": '''
        class SpeculativeConfig:
            method: str = ""

            def use_eagle(self) -> bool:
                return self.method in ("eagle", "eagle3", "mtp", "dflash")
        ''',
    "vllm/v1/core/sched/scheduler.py": '''
        from vllm.v1.core.kv_cache_manager import KVCacheManager

        class Scheduler:
            def __init__(self, speculative_config):
                self.use_eagle = False
                if speculative_config:
                    if speculative_config.use_eagle():
                        self.use_eagle = True
                self.kv_cache_manager = KVCacheManager(use_eagle=self.use_eagle)
        ''',
})


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def stand_in_extension() -> tuple[str, bytes] | None:
    """A real compiled module for the import check to load: CPython's own _json extension
    (its init function is PyInit__json, so it loads as vllm._json)."""
    import _json
    path = getattr(_json, "__file__", None)
    if not path:
        return None
    with open(path, "rb") as handle:
        return "vllm/_json" + path[path.index("."):], handle.read()


# a synthetic install's bin/python: the base interpreter, not a venv's copy of it (a copy
# in a private directory is one the unprivileged user that runs install code cannot start)
BASE_PYTHON = getattr(sys, "_base_executable", None) or sys.executable


def write_install(venv: str, version: str, files: dict[str, str], commit: str = "g0a1b2c3d4",
                  python: str | None = BASE_PYTHON, compiled: bool = True) -> str:
    """Write a venv-shaped tree holding a synthetic vllm; returns its site-packages."""
    site = os.path.join(venv, "lib", PY_DIR, "site-packages")
    contents: dict[str, str | bytes] = dict(files)
    extension = stand_in_extension() if compiled else None
    if extension:
        contents[extension[0]] = extension[1]
    contents["vllm/__init__.py"] = '"""synthetic vllm for fleetcheck"""\n'
    contents["vllm/_version.py"] = (
        "__version__ = version = %r\n__version_tuple__ = version_tuple = %r\n"
        "__commit_id__ = commit_id = %r\n" % (version, tuple(
            int(p) if p.isdigit() else p for p in version.split(".")), commit))
    record = []
    for rel, text in sorted(contents.items()):
        data = text if isinstance(text, bytes) else \
            textwrap.dedent(text).lstrip("\n").encode("utf-8")
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        record.append("%s,%s,%d" % (rel, record_hash(data), len(data)))
    dist = os.path.join(site, "vllm-%s.dist-info" % version)
    os.makedirs(dist, exist_ok=True)
    meta = {"METADATA": "Metadata-Version: 2.1\nName: vllm\nVersion: %s\n\n" % version,
            "INSTALLER": "pip\n", "WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"}
    for name, text in meta.items():
        with open(os.path.join(dist, name), "w", encoding="utf-8") as handle:
            handle.write(text)
        record.append("%s/%s,%s,%d" % (os.path.basename(dist), name,
                                       record_hash(text.encode()), len(text.encode())))
    record.append("%s/RECORD,," % os.path.basename(dist))
    with open(os.path.join(dist, "RECORD"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(record) + "\n")
    if python:
        bindir = os.path.join(venv, "bin")
        os.makedirs(bindir, exist_ok=True)
        link = os.path.join(bindir, "python")
        if not os.path.lexists(link):
            os.symlink(python, link)
    return site
