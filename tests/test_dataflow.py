"""Fix verdicts follow the data (probe/trace/, probe/codebase.py), on trees made here:
DFlash's ids are told from DSpark's by their container, followed through helpers (same
module, another module, an alias, a method) with evidence at each step; a flow that
cannot be followed is a warn that names where; the SWA window and the block-drop decision
are traced back from the call they reach."""

from __future__ import annotations

import textwrap

import pytest

from fleetcheck.checks.fixes import judge_fix
from fleetcheck.playbook import load_playbook
from fleetcheck.lab.synthetic import FIXED
from probe_helpers import STATIC_PLAYBOOK, static_probe_tree, edited_copy, findings, judged_tree

pytestmark = pytest.mark.unit

CHECKS = {c.id: c for c in load_playbook(STATIC_PLAYBOOK).checks}
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
V2 = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
DRAFTER = "vllm/model_executor/models/qwen3_dflash.py"
SCHEDULER = "vllm/v1/core/sched/scheduler.py"


judged = judged_tree


def lines_of(result) -> list[tuple[str, int]]:
    return [(e.file, e.line) for e in result.evidence]


READ = ("        dflash_config = getattr(hf_config, 'dflash_config', None) or {}\n"
        "        ids = dflash_config.get('target_layer_ids') or []\n")


def runner(call: str, helpers: str = "", header: str = "") -> str:
    """A V1 runner reading DFlash's ids (line 5 of the method's file) and handing them to
    `call` (the statement on line 6)."""
    return (header + "class GPUModelRunner:\n"
            "    def _get_eagle3_aux_layers_from_config(self):\n"
            "        hf_config = self.speculative_config.draft_model_config.hf_config\n"
            + READ + "        layer_ids = %s\n" % call +
            "        return tuple(layer_ids)\n" + helpers)


SAME_MODULE = "\ndef shift(ids):\n    return [i + %d for i in ids]\n"
METHOD = ("\n    def _shifted(self, ids):\n"
          "        return [i + %d for i in ids]\n")


@pytest.mark.parametrize("added, status, label", [(1, "pass", "layer_ids:1"),
                                                  (0, "fail", "layer_ids:0"),
                                                  (2, "fail", "layer_ids:2+")])
def test_helper_in_the_same_module(tmp_path, added, status, label):
    facts, result = judged(tmp_path, {RUNNER: runner("shift(ids)", SAME_MODULE % added)},
                           "dflash-layer-offset")
    assert result.status == status, result.message
    assert list(findings(facts, "dflash-layer-offset")) == [label]
    # evidence: the read, the call, the +N inside the helper, the return
    steps = [(e.file, e.line) for e in result.evidence]
    assert (RUNNER, 5) in steps and (RUNNER, 6) in steps and (RUNNER, 7) in steps
    if added:
        assert (RUNNER, 10) in steps
        assert result.evidence[0].line == 10 and "i + %d" % added in result.evidence[0].text


@pytest.mark.parametrize("added, status", [(1, "pass"), (0, "fail"), (2, "fail")])
def test_helper_as_a_method(tmp_path, added, status):
    facts, result = judged(tmp_path, {RUNNER: runner("self._shifted(ids)", METHOD % added)},
                           "dflash-layer-offset")
    assert result.status == status, result.message
    assert (RUNNER, 10) in lines_of(result)


@pytest.mark.parametrize("header, call", [
    ("from vllm.v1.worker.dflash_ids import shift\n", "shift(ids)"),
    ("from vllm.v1.worker.dflash_ids import shift as aux_shift\n", "aux_shift(ids)"),
    ("import vllm.v1.worker.dflash_ids as helpers\n", "helpers.shift(ids)"),
    ("from vllm.v1.worker import dflash_ids\n", "dflash_ids.shift(ids)"),
    ("import vllm.v1.worker.dflash_ids\n", "vllm.v1.worker.dflash_ids.shift(ids)"),
    ("from vllm.v1.worker.pkg import shift\n", "shift(ids)"),  # re-exported by a package
    ("from .dflash_ids import shift\n", "shift(ids)"),
])
@pytest.mark.parametrize("added, status", [(1, "pass"), (0, "fail"), (2, "fail")])
def test_helper_in_another_module_by_any_import_form(tmp_path, header, call, added, status):
    files = {RUNNER: runner(call, header=header),
             "vllm/v1/worker/dflash_ids.py": "def shift(ids):\n    return [i + %d for i in ids]\n"
             % added,
             "vllm/v1/worker/pkg/__init__.py": "from vllm.v1.worker.dflash_ids import shift\n"}
    facts, result = judged(tmp_path, files, "dflash-layer-offset")
    assert result.status == status, (result.message, findings(facts, "dflash-layer-offset"))
    assert ("vllm/v1/worker/dflash_ids.py", 2) in lines_of(result)


@pytest.mark.parametrize("header, call, helpers, where", [
    ("from torch_helpers import shift\n", "shift(ids)", "", "shift()"),
    ("", "getattr(self, '_shift_name')(ids)", "", "a computed function"),
    ("", "self.shifters[0](ids)", SAME_MODULE % 1, "a computed function"),
    # a partial that binds the ids' parameter: the ids go where no parameter takes them
    ("import functools\n", "functools.partial(shift, 1)(ids)", SAME_MODULE % 1,
     "beyond its parameters"),
    ("", "self.lookup.shift(ids)", "", "self.lookup.shift()"),
])
def test_a_helper_that_cannot_be_followed_is_a_warn_naming_where(tmp_path, header, call,
                                                                helpers, where):
    facts, result = judged(tmp_path, {RUNNER: runner(call, helpers, header)},
                           "dflash-layer-offset")
    assert result.status == "warn", result.message
    assert "layer_ids:?" in findings(facts, "dflash-layer-offset")
    assert where in result.message and ("could not be followed" in result.message or
                                        "beyond its parameters" in result.message)
    assert "gpu_model_runner.py:%d" % (6 + header.count("\n")) in result.message


def test_ids_stored_on_self_and_read_elsewhere_are_a_warn(tmp_path):
    body = ("class GPUModelRunner:\n"
            "    def load(self, hf_config):\n"
            "        self.dflash_ids = hf_config.dflash_config['target_layer_ids']\n"
            "    def aux(self):\n"
            "        return [i + 1 for i in self.dflash_ids]\n")
    facts, result = judged(tmp_path, {RUNNER: body}, "dflash-layer-offset")
    assert result.status == "warn", result.message
    assert "self.dflash_ids" in result.message and (RUNNER, 3) in lines_of(result)


DSPARK_NEXT_TO_DFLASH = '''
def get_eagle3_aux_layers_from_config(spec_config):
    hf_config = spec_config.draft_model_config.hf_config
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        dflash_config = getattr(hf_config, "dflash_config", None)
        if dflash_config and isinstance(dflash_config, dict):
            layer_ids = %s
    if not layer_ids:
        target_layer_ids = getattr(hf_config, "target_layer_ids", None)
        if target_layer_ids:
            layer_ids = [i + 1 for i in target_layer_ids]
    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
'''


@pytest.mark.parametrize("dflash, status", [
    ('list(dflash_config.get("target_layer_ids") or [])', "fail"),
    ('[i + 1 for i in (dflash_config.get("target_layer_ids") or [])]', "pass"),
])
def test_dspark_plus_one_is_not_dflash_evidence(tmp_path, dflash, status):
    """DSpark's dense path reads target_layer_ids from hf_config itself and adds 1; only
    DFlash's read from dflash_config decides, and only its lines are the evidence."""
    facts, result = judged(tmp_path, {V2: DSPARK_NEXT_TO_DFLASH % dflash},
                           "dflash-layer-offset")
    assert result.status == status, result.message
    v2_lines = {e.line for e in result.evidence if e.file == V2}
    assert 7 in v2_lines and not v2_lines & {9, 11}, result.evidence


def test_every_dflash_path_needs_its_plus_one(tmp_path):
    """V1 fixed, V2 not: a fail, with evidence for each path."""
    facts, result = judged(tmp_path, {V2: DSPARK_NEXT_TO_DFLASH %
                                      'dflash_config["target_layer_ids"]'},
                           "dflash-layer-offset")
    assert result.status == "fail"
    assert {e.file for e in result.evidence} == {RUNNER, V2}


def test_a_subtracted_offset_is_a_fail(tmp_path):
    facts, result = judged(tmp_path, {RUNNER: runner("[i - 1 for i in ids]")},
                           "dflash-layer-offset")
    assert result.status == "fail" and "layer_ids:<0" in findings(facts, "dflash-layer-offset")


def drafter(layer_body: str, helpers: str = "") -> str:
    return ('from vllm.attention import Attention\n\n'
            'def _window_for(config, idx):\n'
            '    kinds = getattr(config, "layer_types", None) or []\n'
            '    if idx < len(kinds) and kinds[idx] == "sliding_attention":\n'
            '        return config.sliding_window\n'
            '    return None\n\n'
            'def _check_mixed(config, use_v2):\n'
            '    raise NotImplementedError("DFlash drafters with mixed sliding/full '
            'attention require the V2 model runner")\n\n'
            'class DFlashAttention:\n'
            '    def __init__(self, config, idx, sliding_window=None):\n'
            '        self.attn = Attention(config.num_heads, config.head_dim,\n'
            '                              per_layer_sliding_window=sliding_window)\n\n'
            'class DFlashDecoderLayer:\n'
            '    def __init__(self, config, idx):\n' + layer_body + helpers)


@pytest.mark.parametrize("layer_body, status, lines", [
    ("        window = _window_for(config, idx)\n"
     "        self.self_attn = DFlashAttention(config, idx, sliding_window=window)\n",
     "pass", [14, 15, 4]),
    ("        window, _ = _window_for(config, idx), None\n"
     "        self.self_attn = DFlashAttention(config, idx, window)\n", "pass", [14, 15, 4]),
    ("        self.self_attn = DFlashAttention(config, idx, sliding_window=None)\n",
     "fail", [14, 15, 19]),
    ("        self.self_attn = DFlashAttention(config, idx)\n", "fail", [14, 15, 13]),
    ("        window = _window_for(config, idx)\n"
     "        window = None\n"
     "        self.self_attn = DFlashAttention(config, idx, sliding_window=window)\n",
     "fail", [14, 15, 20]),
    ("        window = compute_window(config)\n"
     "        self.self_attn = DFlashAttention(config, idx, sliding_window=window)\n",
     "warn", [14, 15, 19]),
])
def test_swa_window_that_reaches_attention(tmp_path, layer_body, status, lines):
    facts, result = judged(tmp_path, {DRAFTER: drafter(layer_body)}, "dflash-swa")
    assert result.status == status, (result.message, findings(facts, "dflash-swa"))
    # the call, then the traced argument on its own line, then where its value came from
    assert [e.line for e in result.evidence if e.file == DRAFTER][:3] == lines, \
        result.evidence
    if status == "warn":
        assert "compute_window() could not be followed" in result.message


def test_the_traced_argument_is_evidence_of_its_own_line_in_a_long_call(tmp_path):
    """A call spread over many lines shows its first and last lines with '...' between:
    the keyword the verdict was traced from gets its own line of evidence."""
    long_call = BLOCK_DROP % "self.use_eagle_block_drop"
    long_call = long_call.replace("KVCacheManager(use_eagle=self.use_eagle_block_drop)",
                                  "KVCacheManager(\n" + "".join(
                                      "            option_%d=%d,\n" % (i, i) for i in range(8))
                                  + "            use_eagle=self.use_eagle_block_drop,\n"
                                  "            metrics_collector=None,\n        )")
    facts, result = judged(tmp_path, {SCHEDULER: long_call}, "dflash-cache-drop")
    at = [e for e in result.evidence if e.file == SCHEDULER]
    assert at[0].step == "call" and "..." in at[0].text and "use_eagle" not in at[0].text
    assert at[1].step == "argument" and at[1].text == "use_eagle=self.use_eagle_block_drop,"
    assert at[1].line == at[0].line + 9


def test_swa_window_passed_straight_as_none_is_a_fail(tmp_path):
    body = drafter("        self.self_attn = DFlashAttention(config, idx)\n").replace(
        "per_layer_sliding_window=sliding_window", "per_layer_sliding_window=None")
    facts, result = judged(tmp_path, {DRAFTER: body}, "dflash-swa")
    assert result.status == "fail" and "window:constant" in findings(facts, "dflash-swa")
    assert result.evidence[0].line == 14


# the synthetic fixed scheduler, with the value passed as the block-drop decision left open
BLOCK_DROP = textwrap.dedent(FIXED[SCHEDULER]).replace(
    "KVCacheManager(use_eagle=self.use_eagle_block_drop)", "KVCacheManager(use_eagle=%s)")


@pytest.mark.parametrize("decision, status", [
    ("self.use_eagle_block_drop", "pass"),
    ("self.use_eagle", "fail"),
    ("self.use_eagle or self.use_eagle_block_drop", "fail"),
    ("self.pick_drop()", "warn"),
])
def test_block_drop_decision_is_the_function_that_excludes_dflash(tmp_path, decision, status):
    facts, result = judged(tmp_path, {SCHEDULER: BLOCK_DROP % decision}, "dflash-cache-drop")
    assert result.status == status, (result.message, findings(facts, "dflash-cache-drop"))
    assert (SCHEDULER, 10) in lines_of(result)


# --- refactored copies of the real vllm 0.33.0 install, as forks and patched branches
# write them ----------------------------------------------------------------------------

V1_FIXED = ('                layer_ids = [\n'
            '                    i + 1 for i in (dflash_config.get("target_layer_ids") or [])\n'
            '                ]\n')
V2_FIXED = '            layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]\n'
V2_HELPERS = "vllm/v1/worker/gpu/spec_decode/utils.py"
DSPARK_DENSE = "            layer_ids = [i + 1 for i in target_layer_ids]"


def real_refactor(tmp_path, real_venvs, added: int) -> dict:
    """DFlash's +1 moved out of both runners: V1 into a method of the runner, V2 into a
    helper of another module imported under an alias; DSpark's dense +1 stays put."""
    edits = {
        RUNNER: [(V1_FIXED, '                layer_ids = self._dflash_aux_ids(\n'
                            '                    dflash_config.get("target_layer_ids") or [])\n'),
                 ("    def reload_weights(\n",
                  "    def _dflash_aux_ids(self, ids):\n"
                  "        return [i + %d for i in ids]\n\n"
                  "    def reload_weights(\n" % added)],
        V2: [("from vllm.config import SpeculativeConfig\n",
              "from vllm.config import SpeculativeConfig\n"
              "from vllm.v1.worker.gpu.spec_decode.utils import dflash_aux_ids as _aux_ids\n"),
             (V2_FIXED, '            layer_ids = _aux_ids(dflash_config.get("target_layer_ids"))\n')],
        V2_HELPERS: [("", "\n\ndef dflash_aux_ids(ids):\n    return [n + %d for n in ids or []]\n"
                      % added)],
    }
    venv = edited_copy(real_venvs["0.33.0"], str(tmp_path / "refactored"), edits)
    return static_probe_tree(venv)


def test_real_refactor_without_plus_one_fails_despite_dsparks(tmp_path, real_venvs):
    facts = real_refactor(tmp_path, real_venvs, 0)
    result = judge_fix(CHECKS["dflash-layer-offset"], facts, "0.33.0")
    assert result.status == "fail", result.message
    assert list(findings(facts, "dflash-layer-offset")) == ["layer_ids:0"]
    assert not any(DSPARK_DENSE.strip() in e.text for e in result.evidence)
    assert {e.file for e in result.evidence} == {RUNNER, V2, V2_HELPERS}
    assert "version 0.33.0 suggests fixed" in result.message


def test_real_refactor_with_plus_one_in_the_helpers_passes_on_their_lines(tmp_path, real_venvs):
    facts = real_refactor(tmp_path, real_venvs, 1)
    result = judge_fix(CHECKS["dflash-layer-offset"], facts, "0.33.0")
    assert result.status == "pass", result.message
    decisive = {(e.file, e.text) for e in result.evidence if e.step == "+1"}
    assert (RUNNER, "return [i + 1 for i in ids]") in decisive
    assert (V2_HELPERS, "return [n + 1 for n in ids or []]") in decisive
    assert not any(DSPARK_DENSE.strip() in e.text for e in result.evidence)


@pytest.mark.parametrize("rel, old, new, check_id, label", [
    (DRAFTER, "per_layer_sliding_window=sliding_window,", "per_layer_sliding_window=None,",
     "dflash-swa", "window:constant"),
    (DRAFTER, "        sliding_window, causal = _resolve_layer_attention(config, layer_idx)\n",
     "        sliding_window, causal = _resolve_layer_attention(config, layer_idx)\n"
     "        sliding_window = None\n", "dflash-swa", "window:constant"),
    (SCHEDULER, "use_eagle=self.use_eagle_block_drop,", "use_eagle=self.use_eagle,",
     "dflash-cache-drop", "decision:eagle"),
])
def test_real_install_whose_value_no_longer_reaches_the_call_fails(tmp_path, real_venvs, rel,
                                                                   old, new, check_id, label):
    venv = edited_copy(real_venvs["0.33.0"], str(tmp_path / "edited"), {rel: [(old, new)]})
    facts = static_probe_tree(venv)
    result = judge_fix(CHECKS[check_id], facts, "0.33.0")
    assert result.status == "fail", result.message
    assert label in findings(facts, check_id)
    assert result.evidence[0].file == rel


DFLASH_UTILS = ("def resolve(config, idx):\n"
                "    window = None\n"
                "    if config.layer_types[idx] == 'sliding_attention':\n"
                "        window = config.sliding_window\n"
                "    return window, True\n\n"
                "def resolve_none(config, idx):\n"
                "    return None, True\n")


@pytest.mark.parametrize("helper, status", [("resolve", "pass"), ("resolve_none", "fail")])
def test_swa_window_from_a_helper_of_another_module_unpacked_from_a_tuple(tmp_path, helper,
                                                                         status):
    """The other module is read only because the window reaches Attention."""
    body = ("from vllm.attention import Attention\n"
            "from vllm.model_executor.models.dflash_utils import %s as resolve_layer\n\n"
            "class DFlashDecoderLayer:\n"
            "    def __init__(self, config, idx):\n"
            "        window, causal = resolve_layer(config, idx)\n"
            "        self.attn = Attention(1, per_layer_sliding_window=window)\n" % helper)
    facts, result = judged(tmp_path, {DRAFTER: body,
                                      "vllm/model_executor/models/dflash_utils.py": DFLASH_UTILS},
                           "dflash-swa")
    assert result.status == status, result.message
    assert ("vllm/model_executor/models/dflash_utils.py", 4 if status == "pass" else 8) in \
        lines_of(result)


def test_swa_window_kept_on_self_in_the_same_function_is_followed(tmp_path):
    body = drafter("        self.self_attn = DFlashAttention(config, idx, "
                   "sliding_window=_window_for(config, idx))\n").replace(
        "        self.attn = Attention(config.num_heads, config.head_dim,\n"
        "                              per_layer_sliding_window=sliding_window)",
        "        self.sliding_window = sliding_window\n"
        "        self.attn = Attention(config.num_heads, config.head_dim,\n"
        "                              per_layer_sliding_window=self.sliding_window)")
    facts, result = judged(tmp_path, {DRAFTER: body}, "dflash-swa")
    assert result.status == "pass", result.message


# --- path conditions and named values: where they must not hide a DFlash path ----------

def guarded_runner(prelude: str, test: str) -> str:
    """The runner shifting on the branch `test` selects and not on the other."""
    return ("class GPUModelRunner:\n"
            "    def _get_eagle3_aux_layers_from_config(self, x):\n"
            "        hf_config = self.speculative_config.draft_model_config.hf_config\n"
            + READ + prelude +
            "        if %s:\n" % test +
            "            return tuple(i + 1 for i in ids)\n"
            "        return tuple(ids)\n")


@pytest.mark.parametrize("prelude, test, status", [
    ("", 'self.speculative_config.method == "dflash"', "pass"),
    ("", 'self.speculative_config.method == "eagle3"', "fail"),
    # a test that says nothing about the method leaves both paths in
    ("", 'x.method == "GET"', "fail"),
    ("", "isinstance(self.drafter, EagleProposer)", "fail"),
    # bound on one path only: undecided where the paths join
    ("        if x:\n            flag = self.speculative_config.method == 'dflash'\n"
     "        else:\n            flag = x.pick()\n", "flag", "fail"),
    ("        flag = self.speculative_config.method == 'dflash'\n"
     "        flag = x.pick()\n", "flag", "fail"),
    ("        flag = self.speculative_config.method == 'dflash'\n", "flag", "pass"),
])
def test_a_branch_is_left_out_only_where_its_test_is_false_for_dflash(tmp_path, prelude,
                                                                      test, status):
    facts, result = judged(tmp_path, {RUNNER: guarded_runner(prelude, test)},
                           "dflash-layer-offset")
    assert result.status == status, (result.message, findings(facts, "dflash-layer-offset"))


@pytest.mark.parametrize("offset, status", [
    ("1", "pass"),
    ("(1 if x else 0)", "fail"),  # undecided: one path +1, the other +0
    ("(1 if x else x.compute())", "warn"),  # not a constant on every path
    ("self.offset", "warn"),  # set elsewhere on the instance
])
def test_an_added_value_is_a_constant_only_on_every_path(tmp_path, offset, status):
    body = runner("[i + %s for i in ids]" % offset).replace(
        "def _get_eagle3_aux_layers_from_config(self)",
        "def _get_eagle3_aux_layers_from_config(self, x=None)")
    facts, result = judged(tmp_path, {RUNNER: body}, "dflash-layer-offset")
    assert result.status == status, (result.message, findings(facts, "dflash-layer-offset"))


def test_ids_kept_in_a_dict_without_string_keys_are_a_warn(tmp_path):
    body = runner("{0: ids}[0]")
    facts, result = judged(tmp_path, {RUNNER: body}, "dflash-layer-offset")
    assert result.status == "warn", result.message
    assert "dict" in result.message


def test_keywords_from_an_unknown_mapping_are_a_warn_naming_it(tmp_path):
    body = drafter("        self.self_attn = DFlashAttention(config, idx)\n").replace(
        "per_layer_sliding_window=sliding_window)", "**self.attn_options)").replace(
        "self.attn = Attention(", 'self.attn_options["per_layer_sliding_window"] = None\n'
        "        self.attn = Attention(")
    facts, result = judged(tmp_path, {DRAFTER: body}, "dflash-swa")
    assert result.status == "warn", (result.message, findings(facts, "dflash-swa"))
    assert "**self.attn_options" in result.message


@pytest.mark.parametrize("call", ["torch_helpers.keep((ids, 1))", "torch_helpers.keep({'a': ids})"])
def test_ids_inside_a_tuple_or_dict_handed_to_unknown_code_are_a_warn(tmp_path, call):
    facts, result = judged(tmp_path, {RUNNER: runner(call, header="import torch_helpers\n")},
                           "dflash-layer-offset")
    assert result.status == "warn", (result.message, findings(facts, "dflash-layer-offset"))
    assert "torch_helpers.keep()" in result.message
