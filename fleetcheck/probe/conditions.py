"""Path conditions: whether a test in vLLM's code can be true when the speculative method
is DFlash. A branch whose test is false for DFlash is not a DFlash path, so an EAGLE-only
branch without the +1 does not fail a build that shifts on its DFlash branch. Tests are
told True, False or None (undecided: both branches stay in, as any unknown test does).

What is decided: `method == "dflash"`, `!=`, `in (...)`, `not in` (the strings may be
named constants), the cases of `match method:` (in order: none after one that must catch
DFlash), `isinstance(x, DFlash...)`, the speculative config's own existence
(`self.speculative_config is None` is false for DFlash), `not`, `and`, `or`,
conditional expressions, and, through the callbacks a flow passes in, names bound to
such tests and predicates of the tree (`use_dflash()`, `_is_dflash(config)`: functions
and methods named `use_`, `uses_`, `is_`, `needs_`, `has_`, and any method of `self`)
whose bodies return one (whatever their arguments: a body that tests them is
undecided; a body of several statements is told by trace/predicates.py)."""

import ast
import re

METHOD = "dflash"
NO_STRINGS = object()
# what a predicate of the speculative config is called (use_dflash, use_eagle, is_xpress,
# needs_eagle_block_drop): other calls in a test are not looked up, their modules not read
PREDICATE = re.compile(r"_*(?:use|uses|is|needs|has)_\w+$")
# vLLM's speculative methods: a comparison with other strings (an HTTP method, a
# quantization method) says nothing about DFlash
METHODS = {"dflash", "dspark", "eagle", "eagle3", "mtp", "ngram", "ngram_gpu", "medusa",
           "mlp_speculator", "draft_model", "suffix", "deepseek_mtp", "xpress", "pard"}
# the speculative config itself: it exists whenever the method is DFlash
SPECULATIVE_CONFIG = {"speculative_config", "spec_config", "spec_decode_config"}


def is_method(node):
    """Does the expression read the speculative method (`x.method`, `method`,
    `spec_method`)?"""
    if isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Name):
        name = node.id
    else:
        return False
    return name == "method" or name.endswith("_method")


def names_dflash(node):
    """Does a class expression name a DFlash class (`DFlashProposer`, `m.DFlashX`)?"""
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(names_dflash(e) for e in node.elts)
    name = node.attr if isinstance(node, ast.Attribute) else \
        node.id if isinstance(node, ast.Name) else ""
    return METHOD in name.lower()


def both(values, conjunction):
    """Three-valued and/or."""
    if conjunction:
        if False in values:
            return False
        return True if all(v is True for v in values) else None
    if True in values:
        return True
    return False if all(v is False for v in values) else None


def negate(value):
    return None if value is None else not value


def compare(node, strings):
    """Truth of a one-operator comparison of the method with strings, for DFlash;
    `strings(node)` gives the set of strings an expression names, or NO_STRINGS."""
    if len(node.ops) != 1:
        return None
    left, right, op = node.left, node.comparators[0], node.ops[0]
    if is_method(right) and not is_method(left) and isinstance(op, (ast.Eq, ast.NotEq)):
        left, right = right, left
    if not is_method(left):
        return None
    named = strings(right)
    if named is NO_STRINGS or not named & METHODS:
        return None
    if isinstance(op, (ast.Eq, ast.Is)):
        return named == {METHOD} if len(named) == 1 else None
    if isinstance(op, (ast.NotEq, ast.IsNot)):
        return named != {METHOD} if len(named) == 1 else None
    if isinstance(op, ast.In):
        return METHOD in named
    if isinstance(op, ast.NotIn):
        return METHOD not in named
    return None


def truth(node, strings, name_truth, call_truth):
    """True/False when the test `node` is decided for DFlash, None when it is not.
    name_truth(name) and call_truth(call node) decide names and predicate calls."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return negate(truth(node.operand, strings, name_truth, call_truth))
    if isinstance(node, ast.BoolOp):
        return both([truth(v, strings, name_truth, call_truth) for v in node.values],
                    isinstance(node.op, ast.And))
    if is_speculative_config(node):
        return True
    if isinstance(node, ast.IfExp):
        test = truth(node.test, strings, name_truth, call_truth)
        if test is not None:
            return truth(node.body if test else node.orelse, strings, name_truth, call_truth)
        ways = [truth(n, strings, name_truth, call_truth) for n in (node.body, node.orelse)]
        return ways[0] if ways[0] is ways[1] else None
    if isinstance(node, ast.Compare):
        told = config_is_none(node)
        return told if told is not None else \
            compare(node, strings)
    if isinstance(node, ast.Name):
        return name_truth(node.id)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "isinstance" and len(node.args) == 2:
            return True if names_dflash(node.args[1]) else None
        if asked(func):
            return call_truth(node)
    return None


def asked(func):
    """Is a call's function a predicate to look up: named as one (`spec.use_dflash`), or
    a method of the class the test is in (`self._shifts_ids`, whatever its name)?"""
    name = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else ""
    if PREDICATE.match(name):
        return True
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
        func.value.id in ("self", "cls")


def is_speculative_config(node):
    """Does the expression read the speculative config itself (`self.speculative_config`,
    `spec_config`)? With the method DFlash there is one: it is not None, and true."""
    name = node.attr if isinstance(node, ast.Attribute) else \
        node.id if isinstance(node, ast.Name) else ""
    return name in SPECULATIVE_CONFIG


def config_is_none(node):
    """`speculative_config is None` (False for DFlash), `is not None` (True); None for
    any other comparison."""
    if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        return None
    left, right = node.left, node.comparators[0]
    if is_none(left):
        left, right = right, left
    if not (is_speculative_config(left) and is_none(right)):
        return None
    return isinstance(node.ops[0], ast.IsNot)


def is_none(node):
    return isinstance(node, ast.Constant) and node.value is None


def maybe_test(node):
    """Could `truth` decide this expression (so a name bound to it is worth telling)?"""
    if isinstance(node, (ast.Compare, ast.BoolOp)):
        return True
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.Not)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.Call):
        func = node.func
        return isinstance(func, ast.Name) and func.id == "isinstance" or asked(func)
    if isinstance(node, ast.IfExp):
        return True
    return is_speculative_config(node)


def predicate_body(node):
    """The expression a predicate's body returns, when its body is (a docstring and)
    one `return`; None otherwise (trace/predicates.py tells a body of several
    statements path by path)."""
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and
                                         isinstance(s.value, ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return body[0].value
    return None


def case_truth(pattern, strings):
    """Can a `case` pattern of `match method:` match "dflash"? True/False when its
    values say, None when it is not told (a class, mapping or sequence pattern). A
    capture or `_` matches anything: True."""
    kind = type(pattern).__name__
    if kind == "MatchValue":
        named = strings(pattern.value)
        if named is NO_STRINGS or len(named) != 1 or not named & METHODS:
            return None
        return named == {METHOD}
    if kind == "MatchOr":
        return both([case_truth(p, strings) for p in pattern.patterns], False)
    if kind == "MatchAs":
        return True if pattern.pattern is None else case_truth(pattern.pattern, strings)
    return None


def irrefutable(pattern):
    """`case _:` or `case name:` (or an or-pattern holding one): every value matches."""
    kind = type(pattern).__name__
    if kind == "MatchAs":
        return pattern.pattern is None or irrefutable(pattern.pattern)
    if kind == "MatchOr":
        return any(irrefutable(p) for p in pattern.patterns)
    return False


def pattern_names(pattern):
    """The names a pattern binds (captures, `*rest`, `**rest`)."""
    names = []
    for node in ast.walk(pattern):
        kind = type(node).__name__
        if kind in ("MatchAs", "MatchStar") and node.name:
            names.append(node.name)
        elif kind == "MatchMapping" and node.rest:
            names.append(node.rest)
    return names
