"""The decision evaluator (probe/decision.py) on small config classes: what a predicate
returns when the method is DFlash, as Python would run it; what it cannot evaluate is
unknown, named with its line, never guessed."""

from __future__ import annotations

import textwrap

import pytest

from fleetcheck.probe.codebase import Codebase
from fleetcheck.probe.decision import decide
from fleetcheck.probe.files import MissingFile
from fleetcheck.probe.source import SourceFile

pytestmark = pytest.mark.unit

CONFIG = "vllm/config/speculative.py"
HEAD = '''
import functools
import operator

from vllm.config.methods import OWN_KV, own_kv


class SpeculativeConfig:
    method: str = "eagle"
    disable_eagle_block_drop: bool = False

    def use_eagle(self) -> bool:
        return self.method in ("eagle", "eagle3", "mtp", "dflash", "dspark")

    def use_dflash(self) -> bool:
        return self.method == "dflash"

    def use_dspark(self) -> bool:
        return self.method == "dspark"

    @property
    def owns_kv(self) -> bool:
        return self.method in OWN_KV

    def needs_eagle_block_drop(self) -> bool:
%s
'''
METHODS = 'OWN_KV = ("dflash", "dspark")\n\n\ndef own_kv(method, kinds=OWN_KV):\n    return method in kinds\n'


def decided(body: str, extra: str = "") -> tuple:
    files = {CONFIG: HEAD % textwrap.indent(textwrap.dedent(body), " " * 8) + extra,
             "vllm/config/methods.py": METHODS}

    def load(rel: str):
        return SourceFile(rel, files[rel].encode()) if rel in files else MissingFile(rel)

    codebase = Codebase(load)
    hits, examined = decide(codebase, [load(CONFIG)], "needs_eagle_block_drop")
    assert len(hits) == 1, hits
    return hits[0], examined


@pytest.mark.parametrize("body, label", [
    ("return self.use_eagle() and not (self.use_dflash() or self.use_dspark())", "false"),
    ("return self.use_eagle() and not (self.use_dflash() and self.use_dspark())", "true"),
    ('return self.method in ("eagle", "eagle3", "mtp")', "false"),
    ('return self.method in {"eagle", "dflash"}', "true"),
    ('return "eagle" <= self.method < "eagle4"', "false"),
    ("return self.use_eagle() and not self.owns_kv", "false"),
    ("return self.use_eagle() and not own_kv(self.method)", "false"),
    ("return self.use_eagle() and not own_kv(self.method, kinds=())", "true"),
    ('return self.use_eagle() and not own_kv(*(self.method, ("dspark",)))', "true"),
    ('return self.use_eagle() and not own_kv(**{"method": self.method})', "false"),
    ('return not getattr(self, "_keeps_kv", self.use_dflash())', "false"),
    ('return not getattr(self, "disable_eagle_block_drop", True)', "true"),
    ("return False if self.use_dflash() else self.use_eagle()", "false"),
    ("if self.use_dflash():\n    return False\nreturn True", "false"),
    ("eagle, mine = self.use_eagle(), self.owns_kv\nreturn eagle and not mine", "false"),
    ("try:\n    drop = self.use_eagle()\nexcept ValueError:\n    drop = False\n"
     "else:\n    drop = drop and not self.use_dflash()\nreturn drop", "false"),
    ('return (lambda m, own=OWN_KV: m not in own)(self.method)', "false"),
    ('return operator.contains(("eagle", "mtp"), self.method)', "false"),
    ("return _drops(self.method)", "false"),
    ("return self.use_eagle() and not self.disable_eagle_block_drop", "true"),
])
def test_a_predicate_is_evaluated_for_dflash(body, label):
    extra = ('\n\ndef _drops_for(method, own):\n    return method not in own\n\n\n'
             '_drops = functools.partial(_drops_for, own=OWN_KV)\n')
    hit, examined = decided(body, extra)
    assert hit["source"] == label, hit
    assert "why" not in hit
    assert hit["text"].startswith("return") or hit["text"].startswith("if"), hit


def test_a_helper_in_another_module_is_read_and_named_as_examined():
    hit, examined = decided("return self.use_eagle() and not own_kv(self.method)")
    assert hit["source"] == "false"
    assert "vllm/config/methods.py" in examined  # it ships and is proved as the finders' files


@pytest.mark.parametrize("body, why", [
    ("return self.use_eagle() and not self.draft_model_config.owns_kv",
     "cannot evaluate self.draft_model_config"),
    ("if self.use_dflash():\n    raise ValueError('no')\nreturn self.use_eagle()",
     "needs_eagle_block_drop() raises on DFlash's path at line"),
    ("for m in ('dflash',):\n    return False\nreturn True", "a for statement"),
    ("return unknown_helper(self.method)", "the name unknown_helper"),
])
def test_what_cannot_be_evaluated_is_unknown_and_named(body, why):
    hit, _ = decided(body)
    assert hit["source"] == "?", hit
    assert why in hit["why"] and CONFIG + ":" in hit["why"], hit["why"]


def test_an_unknown_operand_that_cannot_change_the_result_does_not_matter():
    """`x and False` is false whatever x is; `x or True` is true."""
    hit, _ = decided("return self.draft_model_config.owns_kv and self.use_dspark()")
    assert hit["source"] == "false", hit
    hit, _ = decided("return self.draft_model_config.owns_kv or self.use_dflash()")
    assert hit["source"] == "true", hit


@pytest.mark.parametrize("body", [
    "if self.draft_model_config.owns_kv:\n    return False\nreturn self.use_eagle()",
    "if self.draft_model_config.owns_kv:\n    drop = False\nelse:\n    drop = True\nreturn drop",
    "return False if self.draft_model_config.owns_kv else self.use_eagle()",
])
def test_an_undecided_test_whose_branches_disagree_is_unknown_naming_the_test(body):
    """The test is not evaluated and its two ways give different answers: unknown,
    naming the test and its line (not an error of the evaluator)."""
    hit, _ = decided(body)
    assert hit["source"] == "?", hit
    assert "cannot evaluate self.draft_model_config" in hit["why"], hit["why"]
    assert CONFIG + ":" in hit["why"], hit["why"]


@pytest.mark.parametrize("body", [
    "if self.draft_model_config.owns_kv:\n    return False\nelse:\n    return False",
    "if self.draft_model_config.owns_kv:\n    own = True\nelse:\n    own = True\n"
    "return self.use_eagle() and not own",
    "return False if self.draft_model_config.owns_kv else not self.use_eagle()",
])
def test_an_undecided_test_whose_branches_agree_decides(body):
    hit, _ = decided(body)
    assert hit["source"] == "false", hit


@pytest.mark.parametrize("body, label", [
    ('return {"eagle": True, "eagle3": True, "mtp": True}.get(self.method, False)', "false"),
    ('return {"eagle": True, "dflash": True}.get(self.method, False)', "true"),
    ('return bool({"eagle": 1}.get(self.method))', "false"),
    ('return self.method.startswith("eagle")', "false"),
    ('return self.method.startswith(("eagle", "dfl"))', "true"),
    ('return ("eagle", "dflash").count(self.method) > 0', "true"),
    ('return self.use_eagle() and self.method not in {"dflash": 0, "dspark": 0}.keys()', "false"),
])
def test_a_method_of_a_known_dict_tuple_or_string_is_evaluated(body, label):
    hit, _ = decided(body)
    assert hit["source"] == label, hit
    assert "why" not in hit


def test_a_method_of_a_known_value_outside_the_few_read_is_unknown_and_named():
    hit, _ = decided('return {"eagle": True}.setdefault(self.method, False)')
    assert hit["source"] == "?", hit
    assert "setdefault" in hit["why"] and CONFIG + ":" in hit["why"], hit["why"]
