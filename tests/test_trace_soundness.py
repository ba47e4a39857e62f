"""Rewrites that must never pass (probe/trace): each one a way the interpreter could
take a value or a path for known when Python may do otherwise, on synthetic trees.
A verdict here may be a warn or a fail, never a pass."""

from __future__ import annotations

import textwrap

import pytest

from fleetcheck.lab.synthetic import FIXED
from probe_helpers import judged_tree

pytestmark = pytest.mark.unit

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
DRAFTER = "vllm/model_executor/models/qwen3_dflash.py"


def verdict(tmp_path, files: dict, check_id: str):
    facts, result = judged_tree(tmp_path, files, check_id)
    return result, facts.signatures[check_id]


# getattr(self, "_aux_shift", 1): a subclass (however its header is written) may set it
SHIFTED_BY_GETATTR = textwrap.dedent(FIXED[RUNNER]).replace(
    "i + 1", 'i + getattr(self, "_aux_shift", 1)')


@pytest.mark.parametrize("subclass", [
    "class _U(GPUModelRunner):\n    _aux_shift = 0\n",
    "class _U(\n        GPUModelRunner):\n    _aux_shift = 0\n",
    "import vllm.v1.worker.gpu_model_runner as gmr\nclass _U(gmr.GPUModelRunner):\n"
    "    _aux_shift = 0\n",
    "class _U(GPUModelRunner):\n    _aux_shift, _x = 0, 1\n",
    "class _U(GPUModelRunner):\n    pass\n\n\nclass _V(_U):\n    pass\n\n\nclass _W(_V):\n"
    "    pass\n\n\nclass _X(_W):\n    _aux_shift = 0\n",
    "def _unshift(runner):\n    setattr(runner, '_aux_shift', 0)\n",
])
def test_a_getattr_default_is_not_taken_where_the_name_may_be_set(tmp_path, subclass):
    assert "getattr(self" in SHIFTED_BY_GETATTR
    result, _ = verdict(tmp_path, {RUNNER: SHIFTED_BY_GETATTR + "\n\n" + subclass},
                        "dflash-layer-offset")
    assert result.status == "warn", result.message


def test_a_getattr_default_no_one_sets_is_the_default(tmp_path):
    result, _ = verdict(tmp_path, {RUNNER: SHIFTED_BY_GETATTR}, "dflash-layer-offset")
    assert result.status == "pass", result.message


ATTENTION = {"vllm/attention/__init__.py": """
class Attention:
    def __init__(self, num_heads, head_size, scale=None, per_layer_sliding_window=None,
                 prefix=""):
        self.w = per_layer_sliding_window
"""}
DRAFTER_HEAD = """from vllm.attention import Attention

def _check_mixed(config, use_v2):
    raise NotImplementedError("DFlash drafters with mixed sliding/full attention require the V2 model runner")
"""


@pytest.mark.parametrize("body", [
    # the key set on one path only: the callers' untraced value on the other
    """
class _Attn(Attention):
    def __init__(self, *args, config=None, **kwargs):
        if config.flag:
            kwargs["per_layer_sliding_window"] = config.sliding_window
        super().__init__(*args, **kwargs)


class DFlashAttention:
    def __init__(self, config):
        self.attn = _Attn(1, 2, config=config, per_layer_sliding_window=compute_it(config))
""",
    # kwargs rebound to a dict on one path, then popped
    """
class _Attn(Attention):
    def __init__(self, config, **kwargs):
        if config.flag:
            kwargs = {"w": compute_it(config)}
        w = kwargs.pop("w", None)
        super().__init__(1, 2, per_layer_sliding_window=w)


class DFlashAttention:
    def __init__(self, config):
        self.attn = _Attn(config, w=config.sliding_window)
""",
    # a keyword-only default some callers leave in place
    """
class _Attn(Attention):
    def __init__(self, config, *, window=compute_default()):
        super().__init__(1, 2, per_layer_sliding_window=window)


class DFlashAttention:
    def __init__(self, config, other):
        self.attn = _Attn(config, window=config.sliding_window)
        self.other = _Attn(other)
""",
])
def test_a_window_some_path_leaves_untraced_is_not_a_pass(tmp_path, body):
    files = dict(ATTENTION)
    files[DRAFTER] = DRAFTER_HEAD + body
    result, _ = verdict(tmp_path, files, "dflash-swa")
    assert result.status != "pass", result.message


GUARDED = """class GPUModelRunner:
    def _aux_layers_from_draft(self, hf_config):
        dflash_config = getattr(hf_config, "dflash_config", None) or {}
        ids = dflash_config.get("target_layer_ids") or []
        if self._unshifted():
            return tuple(ids)
        return tuple(i + 1 for i in ids)
"""


@pytest.mark.parametrize("predicate", [
    # a subscript may raise: the handler's True is a path
    """
    def _unshifted(self):
        try:
            flag = self.flags["unshifted"]
        except KeyError:
            return True
        return False
""",
    # a subclass overrides the predicate: which class is built is not known
    """
    def _unshifted(self):
        return False


class _LegacyRunner(GPUModelRunner):
    def _unshifted(self):
        return True
""",
    # a name bound inside an expression
    """
    def _unshifted(self):
        legacy = False
        (legacy := self.flags.legacy)
        return legacy
""",
])
def test_a_guard_whose_predicate_may_be_true_keeps_the_unshifted_path(tmp_path, predicate):
    result, signature = verdict(tmp_path, {RUNNER: GUARDED + predicate}, "dflash-layer-offset")
    assert result.status == "fail", result.message
    assert sorted(signature.findings) == ["layer_ids:0", "layer_ids:1"]


@pytest.mark.parametrize("subclass", [
    "class _U(GPUModelRunner):\n    def __init__(self, **kw):\n        for k, v in kw.items():\n"
    "            setattr(self, k, v)\n",
    "class _U(GPUModelRunner):\n    def __getattr__(self, n):\n        return 0\n",
    "class _U(  # a comment on the wrapped header\n        GPUModelRunner):\n"
    "    _aux_shift = 0\n",
])
def test_a_getattr_default_is_not_taken_where_a_subclass_sets_names_it_computes(tmp_path,
                                                                               subclass):
    result, _ = verdict(tmp_path, {RUNNER: SHIFTED_BY_GETATTR + "\n\n" + subclass},
                        "dflash-layer-offset")
    assert result.status == "warn", result.message


@pytest.mark.parametrize("body", [
    # the subclass forgets to pass the window on: the base gets its default
    """
class _Attn(Attention):
    def __init__(self, n, h, s, window=None):
        super().__init__(n, h, s)


class DFlashAttention:
    def __init__(self, config):
        self.attn = _Attn(1, 2, None, window=config.sliding_window)
        self.other = Attention(1, 2, per_layer_sliding_window=config.sliding_window)
""",
    # a *spread may or may not reach the window's position
    """
class _Attn(Attention):
    def __init__(self, *args):
        super().__init__(*args)


class DFlashAttention:
    def __init__(self, config):
        self.attn = _Attn(1, 2, None, compute_it(config))
        self.other = Attention(1, 2, per_layer_sliding_window=config.sliding_window)
""",
])
def test_a_subclass_that_may_not_pass_the_window_on_is_not_a_pass(tmp_path, body):
    files = dict(ATTENTION)
    files[DRAFTER] = DRAFTER_HEAD + body
    result, _ = verdict(tmp_path, files, "dflash-swa")
    assert result.status != "pass", result.message
    assert "error" not in result.status


@pytest.mark.parametrize("predicate", [
    """
    def _unshifted(self):
        try:
            flag = _LEGACY_FLAG
        except NameError:
            return True
        return False
""",
    """
    def _unshifted(self):
        try:
            kind, variant = self.speculative_config.method
        except ValueError:
            return True
        return False
""",
])
def test_a_try_whose_body_may_raise_keeps_its_handler(tmp_path, predicate):
    result, signature = verdict(tmp_path, {RUNNER: GUARDED + predicate}, "dflash-layer-offset")
    assert sorted(signature.findings) == ["layer_ids:0", "layer_ids:1"]
