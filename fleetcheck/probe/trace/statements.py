"""Python's statements over abstract values, for one flow: flow-sensitive (a later
assignment replaces an earlier one), branches told for DFlash where their test is
(paths.py) and merged where they join, loops run twice so a value built in one pass
reaches the next, `return` and `raise` ending their path."""

import ast

from fleetcheck.probe import conditions
from fleetcheck.probe.codebase import FunctionRef, dotted_name
from fleetcheck.probe.trace.nodes import const_str, is_log_call, subscript_index
from fleetcheck.probe.trace.paths import TRUTH, UNDECIDED
from fleetcheck.probe.trace.values import (EMPTY, Deferred, Elem, Ids, Items, Test,
                                           as_collection, as_elements, sources_in, with_key)


class Statements(object):
    """The statement half of a Flow (flow.py)."""

    def exec_block(self, statements, env):
        for statement in statements:
            if env is None:
                return None
            env = self.exec_statement(statement, env)
        return env

    def exec_statement(self, node, env):
        method = getattr(self, "exec_" + type(node).__name__, None)
        return method(node, env) if method is not None else env

    def exec_FunctionDef(self, node, env):
        self.local_defs[node.name] = FunctionRef(self.fn.rel, node.name, node,
                                                 self.fn.line_offset)
        return env

    exec_AsyncFunctionDef = exec_FunctionDef

    def exec_Return(self, node, env):
        value = self.eval(node.value, env) if node.value is not None else \
            self.q.constant(self, node, None)
        self.q.leaving(self, node, value)
        self.returns |= self.with_control(value)
        return None

    def exec_Raise(self, node, env):
        return None

    def exec_Assign(self, node, env):
        if node.value is None:
            return env
        value = self.eval(node.value, env)
        # a test bound to a name is told only if a test reads the name (lookups of
        # predicates read modules)
        bound = frozenset([Test(len(self.state.tests))]) \
            if conditions.maybe_test(node.value) else None
        if bound is not None:
            self.state.tests.append((self, node.value, dict(env)))
        for target in getattr(node, "targets", None) or [node.target]:
            self.assign(target, value, env, node)
            name = dotted_name(target)
            if name is not None and (bound is not None or TRUTH + name in env):
                env[TRUTH + name] = bound or UNDECIDED
        return env

    exec_AnnAssign = exec_Assign

    def exec_AugAssign(self, node, env):
        current = self.eval(node.target, env) if not isinstance(node.target, ast.Attribute) \
            or dotted_name(node.target) in env else EMPTY
        value = self.binop(node, current, node.op, node.value, env)
        self.assign(node.target, value, env, node)
        return env

    def exec_Expr(self, node, env):
        self.q.discarded(self, node, self.eval(node.value, env))
        return env

    def exec_If(self, node, env):
        test = self.eval(node.test, env)
        decided = self.truth(node.test, env) if branches_matter(node) else None
        self.control.append(sources_in(test))
        # a branch whose test is false for DFlash is not a DFlash path
        body_env, other_env = dict(env), dict(env)
        narrowed = none_test(node.test)
        if narrowed is not None and narrowed[0] in env:
            # `if x is None:` / `if x is not None:`: on the branch where x is None, it is
            # None (a value it held on that path is not what it holds there)
            name, none_when_true = narrowed
            (body_env if none_when_true else other_env)[name] = \
                self.q.constant(self, node.test, None)
        body = self.exec_block(node.body, body_env) if decided is not False else None
        other = self.exec_block(node.orelse, other_env) if decided is not True else None
        self.control.pop()
        return merge(body, other)

    def exec_Match(self, node, env):
        """`match` is an if/elif chain: on the method, a case that cannot match "dflash"
        is not a DFlash path, nor is any case after one that must; on anything else every
        case is a path. With no catch-all, no case matching is a path too."""
        subject = self.eval(node.subject, env)
        on_method = conditions.is_method(node.subject)
        self.control.append(sources_in(subject))
        outcomes = []
        caught = False
        for case in node.cases:
            inner = dict(env)
            for name in conditions.pattern_names(case.pattern):
                self.assign(ast.Name(id=name, ctx=ast.Store()), subject, inner, node)
            decided = None
            if caught:
                decided = False
            elif on_method:
                decided = conditions.case_truth(case.pattern, self.strings)
                if case.guard is not None:
                    decided = conditions.both([decided, self.truth(case.guard, inner)], True)
            if case.guard is not None:
                self.eval(case.guard, inner)
            if decided is not False:
                outcomes.append(self.exec_block(case.body, inner))
            caught = caught or decided is True
        if not caught and not any(conditions.irrefutable(c.pattern) and c.guard is None
                                  for c in node.cases):
            outcomes.append(env)
        self.control.pop()
        result = None
        for outcome in outcomes:
            result = merge(result, outcome)
        return result

    def exec_loop(self, node, env):
        """Twice through the body, so a value built in one pass reaches the next."""
        current = dict(env)
        for _ in range(2):
            inner = dict(current)
            if isinstance(node, ast.While):
                self.eval(node.test, inner)
            else:
                self.assign(node.target, as_elements(self.eval(node.iter, inner)), inner, node)
            out = self.exec_block(node.body, inner)
            current = merge(current, out)
        return merge(current, self.exec_block(node.orelse, dict(current)))

    exec_For = exec_AsyncFor = exec_While = exec_loop

    def exec_Delete(self, node, env):
        """`del kwargs["x"]`: the key is no longer passed (other `del`s change nothing the
        questions read)."""
        for target in node.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and \
                    target.value.id in env:
                key = const_str(subscript_index(target))
                updated = with_key(env[target.value.id], key, self.q.constant(
                    self, node, "not passed")) if key is not None else None
                if updated is not None:
                    env[target.value.id] = updated
        return env

    def exec_With(self, node, env):
        for item in node.items:
            value = self.eval(item.context_expr, env)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, env, node)
        return self.exec_block(node.body, env)

    exec_AsyncWith = exec_With

    def exec_Try(self, node, env):
        body = self.exec_block(node.body, dict(env))
        after = merge(body, env)
        branches = [self.exec_block(node.orelse, dict(body)) if body is not None else None]
        for handler in node.handlers:
            branches.append(self.exec_block(handler.body, dict(after)))
        result = None
        for branch in branches:
            result = merge(result, branch)
        if node.finalbody:
            result = self.exec_block(node.finalbody, result if result is not None
                                     else dict(after))
        return result

    exec_TryStar = exec_Try

    def assign(self, target, value, env, node):
        value = self.with_control(value)
        if isinstance(target, ast.Name):
            env[target.id] = self.q.bound(self, value)
            if TRUTH + target.id in env:
                env[TRUTH + target.id] = UNDECIDED
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element, part in zip(target.elts, unpacked(value, len(target.elts))):
                self.assign(element, part, env, node)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, as_collection(value), env, node)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            name = dotted_name(target) if isinstance(target, ast.Attribute) else None
            if name is not None:
                env[name] = value
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and \
                    target.value.id in env:
                key = const_str(subscript_index(target))
                current = env[target.value.id]
                updated = with_key(current, key, value) if key is not None else None
                if updated is not None:
                    env[target.value.id] = updated  # kwargs["x"] = value: the key holds it
                    return
                env[target.value.id] = current | as_collection(value)
            self.q.stored(self, node, value, name)


def unpacked(value, count):
    """The values of the `count` names a tuple unpacking binds."""
    parts = [set() for _ in range(count)]
    for atom in value:
        if isinstance(atom, Items) and len(atom.items) == count:
            for index in range(count):
                parts[index] |= atom.items[index]
        elif isinstance(atom, Ids):
            for part in parts:
                part.add(Elem(atom.offset, atom.trail))
        elif isinstance(atom, Deferred):
            for index, part in enumerate(parts):
                part.add(atom.element(index))
        else:
            for part in parts:
                part.add(atom)
    return [frozenset(part) for part in parts]




def none_test(node):
    """(name, whether the test is true when it is None) of `name is None`,
    `name is not None`, `name == None`, `name != None`; else None."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and
            isinstance(node.left, ast.Name) and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None):
        return None
    op = node.ops[0]
    if isinstance(op, (ast.Is, ast.Eq)):
        return node.left.id, True
    if isinstance(op, (ast.IsNot, ast.NotEq)):
        return node.left.id, False
    return None


def merge(first, second):
    """Where two paths join: a name holds what either path left in it (a test bound on
    one path only is undecided after the join)."""
    if first is None:
        return second
    if second is None:
        return first
    out = dict(first)
    for name, value in second.items():
        out[name] = out[name] | value if name in out else value
    for name in set(first) ^ set(second):
        if name.startswith(TRUTH):
            out[name] = out[name] | UNDECIDED
    return out



def branches_matter(node):
    """Can telling an `if` for DFlash change a flow? Not when both branches only log."""
    for statement in node.body + node.orelse:
        for inner in ast.walk(statement):
            if isinstance(inner, (ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign,
                                  ast.Raise, ast.Yield, ast.YieldFrom)) or \
                    type(inner).__name__ == "NamedExpr":
                return True
            if isinstance(inner, ast.Call) and not is_log_call(inner.func):
                return True
    return False
