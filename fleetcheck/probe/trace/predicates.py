"""What a predicate of the tree (`_is_dflash_run()`, `use_dflash()`) returns for DFlash,
told from its whole body as Python runs it on DFlash's paths: each `if` told for DFlash
(a branch DFlash never takes is no path), early `return`s and `raise`s ending their
path, names bound to tests (tuple assignments too), `try` (its handlers run unless its body
only binds names to constants and the speculative config's own reads), `with`; a body
binding a name inside an expression (`:=`) is not told. A config whose `.method` the predicate
reads is, on DFlash's path, a config: not None and truthy. True or False when every
return a DFlash path reaches says so; None when they differ, or when the body holds a
construct not told (a loop, a `match`, a `finally` that returns)."""

import ast

from fleetcheck.probe import conditions
from fleetcheck.probe.codebase import dotted_name

GIVE_UP = None  # a body that cannot be told
LITERALS = "\0strings:"  # key prefix in a body's names: the string literals a name holds


def told_predicate(flow, node):
    """True/False/None for the def `node`, run by `flow` (its strings, constants and the
    predicates it calls are the flow's)."""
    if any(isinstance(inner, getattr(ast, "NamedExpr", ())) for inner in ast.walk(node)):
        return None  # a name bound inside an expression: not told
    teller = Teller(flow, config_names(node))
    outcome = teller.block(node.body, {})
    if outcome is GIVE_UP:
        return None
    returned, falls = outcome
    if falls:
        returned = returned + [False]  # the implicit `return None`
    if returned and all(value is True for value in returned):
        return True
    if returned and all(value is False for value in returned):
        return False
    return None


def config_names(node):
    """The dotted names whose `.method` the function reads (`spec`, `self.speculative_config`,
    `self` in the config's own methods)."""
    out = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and conditions.is_method(inner):
            name = dotted_name(inner.value)
            if name is not None:
                out.add(name)
    return out


class Teller(object):
    def __init__(self, flow, configs):
        self.flow = flow
        self.configs = configs

    def strings(self, node, names):
        """The strings an expression names, a local bound to string literals included
        (`shifted = "dflash"`)."""
        if isinstance(node, ast.Name) and names.get(LITERALS + node.id):
            return names[LITERALS + node.id]
        return self.flow.strings(node)

    def block(self, statements, names):
        """([truth of each return reached], whether the block falls through), or GIVE_UP.
        `names` (name -> truth of the test it holds) is updated in place."""
        returned = []
        for statement in statements:
            outcome = self.statement(statement, names)
            if outcome is GIVE_UP:
                return GIVE_UP
            more, falls = outcome
            returned += more
            if not falls:
                return returned, False
        return returned, True

    def statement(self, node, names):
        if isinstance(node, (ast.Pass, ast.Expr)):
            return [], True  # a docstring, a log call: decides nothing
        if isinstance(node, ast.Return):
            return [self.test(node.value, names) if node.value is not None else False], False
        if isinstance(node, ast.Raise):
            return [], False  # a path that raises returns nothing
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is not None:
                for target in getattr(node, "targets", None) or [node.target]:
                    self.bind(target, node.value, names)
            return [], True
        if isinstance(node, ast.AugAssign):
            self.unbind(node.target, names)
            return [], True
        if isinstance(node, ast.If):
            return self.branch(node, names)
        if isinstance(node, ast.Try) and not any(
                isinstance(inner, ast.Return) for s in node.finalbody for inner in ast.walk(s)):
            return self.attempt(node, names)
        if isinstance(node, ast.With):
            for item in node.items:
                if item.optional_vars is not None:
                    self.unbind(item.optional_vars, names)
            return self.block(node.body, names)
        return GIVE_UP

    def branch(self, node, names):
        decided = self.test(node.test, names)
        taken = ([node.body] if decided is not False else []) + \
            ([node.orelse] if decided is not True else [])
        returned, falling = [], []
        for body in taken:
            inner = dict(names)
            outcome = self.block(body, inner)
            if outcome is GIVE_UP:
                return GIVE_UP
            returned += outcome[0]
            if outcome[1]:
                falling.append(inner)
        if falling:
            names.clear()
            names.update(joined(falling))
        return returned, bool(falling)

    def attempt(self, node, names):
        """try: the body runs; its handlers only when it can raise (anything but names,
        constants and reads of the speculative config and its method), and its `else`
        when it falls through. `finally` is run for what it binds."""
        raises = not all(cannot_raise(s) for s in node.body)
        before = dict(names)
        outcome = self.block(node.body, names)
        if outcome is GIVE_UP:
            return GIVE_UP
        returned, falls = outcome
        falling = []
        if falls:
            outcome = self.block(node.orelse, names)
            if outcome is GIVE_UP:
                return GIVE_UP
            returned += outcome[0]
            if outcome[1]:
                falling.append(dict(names))
        if raises:
            for handler in node.handlers:
                inner = dict(before)
                if handler.name:
                    inner[handler.name] = None
                outcome = self.block(handler.body, inner)
                if outcome is GIVE_UP:
                    return GIVE_UP
                returned += outcome[0]
                if outcome[1]:
                    falling.append(inner)
        names.clear()
        names.update(joined(falling) if falling else before)
        if node.finalbody:
            outcome = self.block(node.finalbody, names)
            if outcome is GIVE_UP:
                return GIVE_UP
        return returned, bool(falling)

    def bind(self, target, value, names):
        if isinstance(target, ast.Name):
            names[target.id] = self.test(value, names)
            self.hold(target.id, value, names)
        elif isinstance(target, (ast.Tuple, ast.List)) and \
                isinstance(value, (ast.Tuple, ast.List)) and \
                len(target.elts) == len(value.elts) and \
                not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
            told = [self.test(v, names) for v in value.elts]  # all read before any is bound
            for element, truth, item in zip(target.elts, told, value.elts):
                if isinstance(element, ast.Name):
                    names[element.id] = truth
                    self.hold(element.id, item, names)
                else:
                    self.unbind(element, names)
        else:
            self.unbind(target, names)

    def unbind(self, target, names):
        for inner in ast.walk(target):
            if isinstance(inner, ast.Name):
                names[inner.id] = None
                names[LITERALS + inner.id] = None

    def hold(self, name, value, names):
        """Record the string literals a name is bound to (a later binding replaces
        them; a binding to anything else forgets them)."""
        strings = self.flow.strings(value) if isinstance(value, (ast.Constant, ast.Tuple,
                                                                 ast.List, ast.Set)) else None
        names[LITERALS + name] = None if strings is None or \
            strings is conditions.NO_STRINGS else frozenset(strings)

    def test(self, node, names):
        """True/False/None of an expression's truth for DFlash."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return conditions.negate(self.test(node.operand, names))
        if isinstance(node, ast.BoolOp):
            return conditions.both([self.test(v, names) for v in node.values],
                                   isinstance(node.op, ast.And))
        if isinstance(node, ast.Constant):
            return bool(node.value)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                isinstance(node.comparators[0], ast.Constant) and \
                node.comparators[0].value is None and dotted_name(node.left) in self.configs:
            return isinstance(node.ops[0], (ast.IsNot, ast.NotEq))
        name = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is not None and name in self.configs:
            return True
        if isinstance(node, ast.Name):
            return names.get(node.id)
        flow = self.flow
        return conditions.truth(node, lambda inner: self.strings(inner, names),
                                lambda name: names.get(name), flow.call_truth)


def cannot_raise(statement):
    """`name = <constant or the speculative config's own read>` (or `pass`): on DFlash's
    path it completes. Anything else may raise (a name not bound, an unpacking, a key)."""
    if isinstance(statement, ast.Pass):
        return True
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and
            isinstance(statement.targets[0], ast.Name)):
        return False
    value = statement.value
    if isinstance(value, ast.Constant):
        return True
    while isinstance(value, ast.Attribute) and (conditions.is_method(value) or
                                                conditions.is_speculative_config(value)):
        value = value.value
    return isinstance(value, ast.Name) and value.id == "self" and value is not statement.value


def joined(envs):
    """Names after paths join: a name keeps its truth only where every path agrees."""
    out = {}
    for name in set().union(*envs):
        values = set(env.get(name) for env in envs)
        out[name] = values.pop() if len(values) == 1 else None
    return out
