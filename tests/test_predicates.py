"""Guards whose predicate is told from its whole body (probe/trace/predicates.py), on a
synthetic runner: the shifted branch is the only DFlash path when the predicate is true
for DFlash, the plain one when false, both when it cannot be told."""

from __future__ import annotations

import textwrap

import pytest

from fleetcheck.lab.synthetic import FIXED, write_install
from probe_helpers import static_probe_tree, findings

pytestmark = pytest.mark.unit

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
GUARDED = """\
class GPUModelRunner:
    def _get_eagle3_aux_layers_from_config(self):
        hf_config = self.speculative_config.draft_model_config.hf_config
        dflash_config = getattr(hf_config, 'dflash_config', None) or {}
        ids = dflash_config.get('target_layer_ids') or []
        if self._is_dflash_run():
            return tuple(i + 1 for i in ids)
        return tuple(ids)

    def _is_dflash_run(self):
"""
TRUE, FALSE, UNTOLD = ["layer_ids:1"], ["layer_ids:0"], ["layer_ids:0", "layer_ids:1"]


@pytest.mark.parametrize("body, paths", [
    # early return on a config that, for DFlash, exists
    ("spec = self.speculative_config\nif spec is None:\n    return False\n"
     "return spec.method == 'dflash'\n", TRUE),
    # a raise on the other methods' path is no return
    ("if self.speculative_config.method != 'dflash':\n    raise ValueError('no')\n"
     "return True\n", TRUE),
    ("a, b = self.speculative_config.method == 'dflash', False\nreturn a or b\n", TRUE),
    ("a, b = False, self.speculative_config.method == 'dflash'\nreturn a\n", FALSE),
    # a try whose body only reads attributes completes; its handler is no DFlash path
    ("try:\n    method = self.speculative_config.method\nexcept AttributeError:\n"
     "    return True\nelse:\n    return method == 'eagle3'\n", FALSE),
    # a call in the body may raise: the handler's False joins the else's True
    ("try:\n    method = self.lookup_method()\nexcept Exception:\n    return False\n"
     "else:\n    return method == 'dflash'\n", UNTOLD),
    # a name rebound on an untold branch, and a loop, are not told
    ("ok = True\nif self.flag:\n    ok = False\nreturn ok\n", UNTOLD),
    ("for m in ('dflash',):\n    if self.speculative_config.method == m:\n"
     "        return True\nreturn False\n", UNTOLD),
    # falling off the end returns None
    ("if self.speculative_config.method == 'eagle3':\n    return True\n", FALSE),
])
def test_a_guard_follows_what_its_predicate_returns_for_dflash(tmp_path, body, paths):
    contents = dict(FIXED)
    contents[RUNNER] = GUARDED + textwrap.indent(body, " " * 8)
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", contents)
    assert sorted(findings(static_probe_tree(venv), "dflash-layer-offset")) == paths
