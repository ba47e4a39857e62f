"""Path conditions and named values, for one flow: whether a test is true, false or
undecided for DFlash (conditions.py decides the forms; a name bound to a test and a
predicate of the tree are told here, once each per trace), the strings and constants
an expression names."""

import ast
import re

from fleetcheck.probe import conditions
from fleetcheck.probe.codebase import dotted_name
from fleetcheck.probe.trace.nodes import const_str, step_of
from fleetcheck.probe.trace.predicates import told_predicate
from fleetcheck.probe.trace.state import MAX_CALL_DEPTH

TRUTH = "\0truth:"  # env key prefix: what a name bound to a test says about DFlash
UNDECIDED = frozenset([None])  # a TRUTH entry: the name no longer holds its test
CONSTANT_NAME = re.compile(r"_*[A-Z][A-Z0-9_]*$")


class Paths(object):
    """The path-condition part of a Flow (flow.py)."""

    def truth(self, node, env):
        """Is the test true (True), false (False) or undecided (None) for DFlash?"""
        return conditions.truth(node, self.strings, lambda name: self.name_truth(name, env),
                                self.call_truth)

    def name_truth(self, node, env):
        name = dotted_name(node) if isinstance(node, ast.Attribute) else node
        held = env.get(TRUTH + name) if name else None
        if held is None or len(held) != 1:
            return None
        test = next(iter(held))
        if test is None:
            return None
        if test.index not in self.state.told:
            flow, expression, bound_env = self.state.tests[test.index]
            self.state.told[test.index] = None  # a test reading itself decides nothing
            self.state.told[test.index] = flow.truth(expression, bound_env)
        return self.state.told[test.index]

    def strings(self, node):
        """The strings an expression names: literals, tuples/lists/sets of them, or a
        named constant holding them; NO_STRINGS otherwise."""
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            out = set(const_str(e) for e in node.elts)
            return conditions.NO_STRINGS if None in out else out
        text = const_str(node)
        if text is not None:
            return {text}
        found = self.named_constant(node) if isinstance(node, (ast.Name, ast.Attribute)) \
            else None
        if found is not None:
            value = found[0]
            if isinstance(value, str):
                return {value}
            if isinstance(value, (tuple, list, set, frozenset)) and \
                    all(isinstance(v, str) for v in value):
                return set(value)
        return conditions.NO_STRINGS

    def call_truth(self, node):
        """What a predicate of the tree (`spec.use_dflash()`) returns for DFlash, from its
        body (one `return`, or a body told path by path: predicates.py); None when it
        cannot be told."""
        ref = self.predicate_ref(node.func)
        if ref is None:
            return None
        told = set([self.predicate_truth(ref)])
        # `self.m()` may be an override in a subclass (the code does not say which class
        # is built): every one of them must agree
        for override, _ in self.names.overrides(node.func, ref, self.state.files):
            told.add(self.predicate_truth(override))
        return told.pop() if len(told) == 1 else None

    def predicate_truth(self, ref):
        """What one def returns for DFlash (told once per trace)."""
        if ref.key not in self.state.predicates:
            self.state.predicates[ref.key] = None  # a predicate asking itself decides nothing
            if len(self.stack) < MAX_CALL_DEPTH + 2:
                flow = self.spawn(ref, {}, self.depth + 1, self.stack + (ref.key,))
                body = conditions.predicate_body(ref.node)
                self.state.predicates[ref.key] = flow.truth(body, {}) if body is not None \
                    else told_predicate(flow, ref.node)
        return self.state.predicates[ref.key]

    def predicate_ref(self, func):
        """The function a predicate call reaches (found once per call site)."""
        key = (self.fn.key, self.self_cls, func.lineno, func.col_offset)
        if key not in self.state.predicate_refs:
            self.state.predicate_refs[key] = self.names.predicate(func)
        return self.state.predicate_refs[key]

    def named_constant(self, node):
        """(value, step at its definition) of a named constant (codebase.Scope says
        which), or None."""
        found = self.names.named_constant(node)
        if found is None:
            return None
        value, rel, line = found
        return value, step_of(self.state.codebase, rel, line, line, "constant")

    def key_name(self, node):
        """A key or attribute name given as a string literal or an upper-case constant
        (`dflash_config.get(_IDS_KEY)`)."""
        text = const_str(node)
        if text is None and CONSTANT_NAME.match(getattr(node, "id", None) or
                                                getattr(node, "attr", "")):
            found = self.named_constant(node)
            if found is not None and isinstance(found[0], str):
                return found[0]
        return text
