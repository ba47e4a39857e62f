"""Path conditions (probe/conditions.py): which tests are decided for DFlash, from the
expression alone and through the callbacks a flow gives for names and predicates."""

from __future__ import annotations

import ast

import pytest

from fleetcheck.probe.conditions import NO_STRINGS, predicate_body, truth

pytestmark = pytest.mark.unit


def strings(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple):
        return {e.value for e in node.elts}
    if isinstance(node, ast.Name) and node.id == "DFLASH_METHODS":
        return {"dflash", "dspark"}
    return NO_STRINGS


def decided(text: str):
    names = {"is_dflash": True, "is_eagle": False}
    predicates = {"use_dflash": True, "use_eagle": True, "use_dspark": False}
    return truth(ast.parse(text, mode="eval").body, strings, names.get,
                 lambda call: predicates.get(call.func.attr))


@pytest.mark.parametrize("text, expected", [
    ('self.speculative_config.method == "dflash"', True),
    ('"dflash" == spec_config.method', True),
    ('self.method == "eagle3"', False),
    ('method != "dflash"', False),
    ('method != "eagle"', True),
    ('spec_method in ("eagle", "dflash")', True),
    ('method in ("eagle", "eagle3", "mtp")', False),
    ('method not in ("eagle", "eagle3")', True),
    ("method in DFLASH_METHODS", True),
    ("is_dflash", True),
    ("not is_eagle", True),
    ("config.use_dflash()", True),
    ("config.use_dspark()", False),
    ("config.use_eagle() and not config.use_dflash()", False),
    ("config.use_eagle() or x", True),
    ('x and method == "eagle"', False),
    ('x and method == "dflash"', None),
    ("isinstance(self.drafter, DFlashProposer)", True),
    ("isinstance(self.drafter, (EagleProposer, DFlashProposer))", True),
    ("not isinstance(self.drafter, DFlashProposer)", False),
    # an EAGLE class may be a DFlash class's base: undecided
    ("isinstance(self.drafter, EagleProposer)", None),
    # not the speculative method: another method's name says nothing
    ('request.method == "GET"', None),
    ('self.quant_method == "fp8"', None),
    ("config.get_window()", None),
    ("config.use_dflash(1)", True),
    ("config.use_other()", None),
])
def test_a_test_is_decided_for_dflash_only_where_it_can_be(text, expected):
    assert decided(text) is expected


def test_a_predicate_body_is_its_single_return():
    one = ast.parse('def use_dflash(self):\n    """Doc."""\n    return self.method == "dflash"\n')
    two = ast.parse("def f(self):\n    x = 1\n    return x\n")
    assert isinstance(predicate_body(one.body[0]), ast.Compare)
    assert predicate_body(two.body[0]) is None


@pytest.mark.parametrize("text, expected", [
    ("self.speculative_config is None", False),
    ("self.speculative_config is not None", True),
    ("not self.speculative_config", False),
    ("spec_config", True),
    ("self.draft_config is None", None),
    ('True if method == "dflash" else False', True),
    ('method == "eagle" if x else False', False),
    ("a if x else b", None),
])
def test_the_speculative_config_exists_for_dflash_and_conditional_expressions_are_decided(
        text, expected):
    assert decided(text) is expected


def test_a_method_of_self_is_asked_whatever_its_name():
    """`self._shifts_ids()` is a method of the class the test is in: asked, like the
    predicates named use_/is_/...; other calls are not."""
    asked = []

    def call_truth(call):
        asked.append(ast.unparse(call.func))
        return True
    for text in ("self._shifts_ids()", "other._shifts_ids()", "compute()"):
        truth(ast.parse(text, mode="eval").body, strings, lambda name: None, call_truth)
    assert asked == ["self._shifts_ids"]
