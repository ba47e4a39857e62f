"""The abstract interpreter behind the fix verdicts, for what a grep cannot prove.

One core runs Python's statements and expressions over abstract values
(dataflow_values.py): flow-sensitive (a later assignment replaces an earlier one,
branches merge), through tuple unpacking, comprehensions, lambdas, functools.partial,
`**kwargs` dicts of known keys, and into the helpers a call reaches (found by
codebase.Scope) and back. Each question the checks ask is a subclass pair overriding a
few hooks: an Analysis (where its flows start, what it files as findings) and a Flow
(what an expression means for it):

- key_offset.py: the constant added to ids read under a key on their way out;
- value_source.py: what reaches one argument of a call.

Path conditions are told for DFlash (conditions.py), so a branch DFlash never takes is
no DFlash path. Steps of evidence are (file, line, step, text).
"""

import ast
import re
from collections import namedtuple

from fleetcheck.probe import conditions
from fleetcheck.probe.codebase import FunctionRef, Scope, callee_name, dotted_name
from fleetcheck.probe.dataflow_values import (EMPTY, Deferred, Elem, Ids, Items, Keyed,
                                              Lambda, Lost, Param, Partial, Source, Test,
                                              Unknown, as_collection, as_elements,
                                              carries_ids, join, keyed, sources_in)
from fleetcheck.probe.patterns import evidence_text

MAX_CALL_DEPTH = 4
MAX_FINDINGS = 40
OPERATOR_ARITHMETIC = {"add": ast.Add, "iadd": ast.Add, "sub": ast.Sub, "isub": ast.Sub}
PASS_THROUGH_CALLS = {"tuple", "list", "sorted", "set", "frozenset", "reversed"}
PASS_THROUGH_METHODS = {"array", "asarray", "tensor", "as_tensor", "copy", "tolist",
                        "clone", "astype"}
# builtins whose result says something about their arguments but carries no ids
OBSERVERS = {"len", "isinstance", "bool", "str", "repr", "print", "type", "id", "hash",
             "any", "all", "min", "max", "sum", "int", "float", "range", "issubclass",
             "callable", "hasattr", "format", "abs", "round"}
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
               "info_once", "debug_once", "warning_once"}
MUTATORS = {"append", "extend", "insert", "add", "update"}
PARTIAL = {"partial", "functools.partial"}
TRUTH = "\0truth:"  # env key prefix: what a name bound to a test says about DFlash
UNDECIDED = frozenset([None])  # a TRUTH entry: the name no longer holds its test
CONSTANT_NAME = re.compile(r"_*[A-Z][A-Z0-9_]*$")


def step_of(codebase, rel, line, end, kind):
    source = codebase.source(rel)
    text = evidence_text(source.lines, line, end) if source is not None else ""
    return (rel, line, kind, text)


def const_int(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and \
            not isinstance(node.value, bool):
        return node.value
    return None


def const_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def subscript_index(node):
    index = node.slice
    if isinstance(index, getattr(ast, "Index", ())):  # Python 3.8 wraps it
        index = index.value
    return index


class Analysis(object):
    """One finder's question over the tree: the state its flows share (partials, tests
    and predicates told for DFlash, the memo of helpers followed) and its findings.
    Subclasses say where flows start (`examine`) and what a parameter holds there."""

    flow_class = None  # the question's Flow subclass

    def __init__(self, codebase, files=()):
        self.codebase = codebase
        self.files = files  # the finder's files: where subclasses are looked for
        self.partials = []  # (flow, function expression, bound args, bound keywords)
        self.predicates = {}  # function key -> what it returns for DFlash
        self.predicate_refs = {}  # call site -> the predicate it calls
        self.tests = []  # (flow, expression, env) of each test bound to a name
        self.told = {}  # index in tests -> what the test is for DFlash
        self.findings = []
        self.memo = {}
        self.examined = set()

    def flow(self, fn, env, depth, stack, self_cls=None):
        return self.flow_class(self, fn, env, depth, stack, self_cls)

    def examine(self, source):
        """Run the question's flows over one file holding the finder's needle."""
        raise NotImplementedError

    def entry_env(self, ref):
        """What a root flow's parameters hold at its start."""
        raise NotImplementedError

    def finish(self):
        """The findings, once every file has been examined."""
        return self.findings

    def functions_around(self, source, lines):
        """(text, FunctionRef) of each function holding one of the lines, once each."""
        seen = set()
        for line in lines:
            block = source.enclosing_function(line)
            if block is None or block[0] in seen:
                continue
            seen.add(block[0])
            first, node = source.parsed_function(block[0])
            if node is None:
                raise ValueError("cannot parse the function at line %d" % block[0])
            cls = source.enclosing_class(block[0])
            yield block[1], FunctionRef(source.rel, node.name, node, first - 1,
                                        (source.rel, cls) if cls else None)


class Flow(object):
    """Abstract execution of one function: names (and self.attributes) to values. The
    hooks a question overrides are grouped at the top; everything below them is the
    same for every question."""

    # only the module's own functions are followed into (value-source reads no module
    # for a call whose value may never reach the argument; see Deferred)
    LOCAL_CALLEES_ONLY = False

    def __init__(self, analysis, fn, env, depth, stack, self_cls=None):
        self.a = analysis
        self.fn = fn
        # the class `self` is known to be (or derive from): where self.m() is looked up
        self.self_cls = self_cls or fn.cls
        self.entry = env
        self.depth = depth
        self.stack = stack
        self.returns = set()
        self.local_defs = {}
        self.control = []
        self.lambdas = []
        self.source = analysis.codebase.source(fn.rel)
        self.names = Scope(analysis.codebase, fn, self.self_cls, self.local_defs)

    # -- hooks: what the question makes of a construct -----------------------------------
    def unknown(self, node, why):
        """A value that cannot be traced."""
        raise NotImplementedError

    def constant(self, node, value):
        """A constant that is not an int the question counts with."""
        raise NotImplementedError

    def key_read(self, node, base, name):
        """A read of a named key/attribute/method the question looks for, or None."""
        raise NotImplementedError

    def named_call(self, call):
        """A call the question reads by its name alone (`spec.use_eagle()`), or None."""
        return None

    def untraced(self, node, value, lost_why, unknown_why):
        """An expression the interpreter does not follow, `value` what flows into it."""
        raise NotImplementedError

    def unbound_attribute(self, node, name, base):
        """`x.attr` with no value bound here."""
        raise NotImplementedError

    def free_name(self, node):
        """A name with no value bound in the function."""
        return self.unknown(node, "%s is not assigned in %s()" % (node.id, self.fn.name))

    def arithmetic(self, node, left, op, right, right_node, left_node):
        """`left op right`: by default what either side holds."""
        return left | right

    def unary(self, node, value):
        """`-x`, `not x`: by default what x holds."""
        return value

    def tuple_of(self, node, items):
        """A tuple display, item by item."""
        return frozenset([Items(items)])

    def read_with_default(self, found, args):
        """`.get(key, default)` of a key the question reads."""
        return found

    def numeric_call(self, call):
        """A builtin of numbers (`int(i)`, `max(ids)`), or None."""
        return None

    def relevant(self, values):
        """Does a call with these values need following?"""
        return True

    def ignored_call(self, node, func, env):
        """The value of a call that is not relevant."""
        return EMPTY

    def spread(self, node, expression, value):
        """The value of a `**` spread that may hold any keyword."""
        raise NotImplementedError

    def unfollowed(self, node, what, why, args, keywords, opaque, func=None):
        """The value of a call whose callee is not followed."""
        raise NotImplementedError

    def not_followed(self, ref, node, args, keywords, why):
        """The value of a call of `ref` cut off (depth limit, recursion)."""
        raise NotImplementedError

    def passed(self, step, value):
        """A value as a helper's parameter receives it at the call `step`."""
        return value

    def spare(self, node, ref, values):
        """Arguments no parameter of `ref` takes."""
        return EMPTY

    def bound(self, value):
        """A value as a plain name holds it."""
        return value

    def stored(self, node, value, name):
        """A value stored on an attribute or in a subscript (`name`: which, if known)."""

    def discarded(self, node, value):
        """The value of an expression statement."""

    def leaving(self, node, value):
        """A value returned (or yielded) by the function."""

    def at_call(self, call):
        """Every call evaluated, before its value is known."""

    def default_value(self, node):
        """A parameter's default, evaluated where the function is defined."""
        return self.eval(node, {})

    # -- helpers ------------------------------------------------------------------
    def spawn(self, fn, env, depth, stack, self_cls=None):
        return self.a.flow(fn, env, depth, stack, self_cls)

    def line(self, node):
        return node.lineno + self.fn.line_offset

    def step(self, node, kind):
        first = self.line(node)
        last = getattr(node, "end_lineno", node.lineno) + self.fn.line_offset
        text = evidence_text(self.source.lines, first, last) if self.source else ""
        return (self.fn.rel, first, kind, text)

    def with_control(self, value):
        """A value also depends on the config reads of the tests it is computed under."""
        if self.control and value:
            return value | frozenset().union(*self.control)
        return value

    def run(self):
        self.exec_block(self.fn.node.body, dict(self.entry))
        return frozenset(self.returns)

    # -- statements ---------------------------------------------------------------
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
            self.constant(node, None)
        self.leaving(node, value)
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
        bound = frozenset([Test(len(self.a.tests))]) \
            if conditions.maybe_test(node.value) else None
        if bound is not None:
            self.a.tests.append((self, node.value, dict(env)))
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
        self.discarded(node, self.eval(node.value, env))
        return env

    def exec_If(self, node, env):
        test = self.eval(node.test, env)
        decided = self.truth(node.test, env) if branches_matter(node) else None
        self.control.append(sources_in(test))
        # a branch whose test is false for DFlash is not a DFlash path
        body = self.exec_block(node.body, dict(env)) if decided is not False else None
        other = self.exec_block(node.orelse, dict(env)) if decided is not True else None
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
            env[target.id] = self.bound(value)
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
                dicts = [a for a in current if isinstance(a, Keyed)]
                if dicts and key is not None:
                    # kwargs["x"] = value: the key now holds the value
                    env[target.value.id] = \
                        frozenset(a for a in current if not isinstance(a, Keyed)) | \
                        frozenset(keyed(a.items + ((key, value),)) for a in dicts)
                    return
                env[target.value.id] = current | as_collection(value)
            self.stored(node, value, name)

    # -- expressions --------------------------------------------------------------
    def eval(self, node, env):
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            inner = EMPTY
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    inner = inner | self.eval(child, env)
            return self.untraced(node, inner, "ids in a %s expression at %s:%d, which is "
                                 "not followed" % (type(node).__name__, self.fn.rel,
                                                   self.line(node)),
                                 "%s expression" % type(node).__name__)
        return method(node, env)

    def eval_Yield(self, node, env):
        """A generator's elements are what it returns."""
        value = as_collection(self.eval(node.value, env)) if node.value is not None else EMPTY
        self.leaving(node, value)
        self.returns |= value
        return EMPTY

    def eval_YieldFrom(self, node, env):
        value = self.eval(node.value, env)
        self.leaving(node, value)
        self.returns |= value
        return EMPTY

    def eval_Constant(self, node, env):
        return self.constant(node, node.value)

    def eval_JoinedStr(self, node, env):
        for value in node.values:
            self.eval(value, env)
        return self.constant(node, "f-string")

    def eval_FormattedValue(self, node, env):
        self.eval(node.value, env)
        return EMPTY

    def eval_Name(self, node, env):
        if node.id in env:
            return env[node.id]
        return self.free_name(node)

    def eval_Attribute(self, node, env):
        name = dotted_name(node)
        if name is not None and name in env:
            return env[name]
        base = self.eval(node.value, env)
        found = self.key_read(node, base, node.attr)
        if found is not None:
            return found
        return self.unbound_attribute(node, name, base)

    def eval_Subscript(self, node, env):
        base = self.eval(node.value, env)
        index = subscript_index(node)
        key = self.key_name(index)
        if key is not None:
            found = self.key_read(node, base, key)
            if found is not None:
                return found
        else:
            self.eval(index, env)
        out = subscripted(base, const_int(index), key, isinstance(index, ast.Slice))
        return out or self.unknown(node, "a subscript")

    def eval_BoolOp(self, node, env):
        return join([self.eval(value, env) for value in node.values])

    def eval_IfExp(self, node, env):
        test = self.eval(node.test, env)
        decided = self.truth(node.test, env)
        body = join(([self.eval(node.body, env)] if decided is not False else []) +
                    ([self.eval(node.orelse, env)] if decided is not True else []))
        return body | sources_in(test) if body else body

    def eval_Compare(self, node, env):
        values = [self.eval(node.left, env)] + [self.eval(c, env) for c in node.comparators]
        return sources_in(frozenset().union(*values)) or self.constant(node, "comparison")

    def eval_UnaryOp(self, node, env):
        return self.unary(node, self.eval(node.operand, env))

    def eval_BinOp(self, node, env):
        return self.binop(node, self.eval(node.left, env), node.op, node.right, env,
                          left_node=node.left)

    def binop(self, node, left, op, right_node, env, left_node=None):
        right = self.eval(right_node, env)
        return self.arithmetic(node, left, op, right, right_node, left_node)

    def eval_Tuple(self, node, env):
        return self.tuple_of(node, tuple(self.eval(e, env) for e in node.elts))

    def eval_List(self, node, env):
        out = set()
        for element in node.elts:
            out |= as_collection(self.eval(element, env))
        return frozenset(out) or self.constant(node, [])

    eval_Set = eval_List

    def eval_Dict(self, node, env):
        """A dict of string keys is followed key by key (keywords passed as **kwargs);
        `**other` merges another such dict."""
        paths = [()]
        followed = True
        carried = EMPTY
        for key, value_node in zip(node.keys, node.values):
            value = self.eval(value_node, env)
            carried = carried | value
            if key is None:
                dicts = [a for a in value if isinstance(a, Keyed)]
                if not dicts or len(dicts) != len(value) or len(paths) * len(dicts) > 8:
                    followed = False
                paths = [p + d.items for p in paths for d in dicts]
                continue
            name = const_str(key)
            if name is None:
                self.eval(key, env)
                followed = False
            paths = [p + ((name, value),) for p in paths]
        if followed:
            return frozenset(keyed(p) for p in paths)
        return self.untraced(node, carried, "ids kept in a dict at %s:%d whose keys are "
                             "not all strings" % (self.fn.rel, self.line(node)), "a dict")

    def eval_Starred(self, node, env):
        return self.eval(node.value, env)

    def eval_NamedExpr(self, node, env):
        value = self.eval(node.value, env)
        self.assign(node.target, value, env, node)
        return value

    def eval_Lambda(self, node, env):
        self.lambdas.append((node, dict(env)))
        return frozenset([Lambda(len(self.lambdas) - 1)])

    def comprehension(self, node, env, element):
        if len(node.generators) != 1:
            iterated = frozenset().union(*[self.eval(g.iter, env) for g in node.generators])
            return self.untraced(node, iterated, "ids in a nested comprehension at %s:%d, "
                                 "which is not followed" % (self.fn.rel, self.line(node)),
                                 "a nested comprehension")
        generator = node.generators[0]
        inner = dict(env)
        self.assign(generator.target, as_elements(self.eval(generator.iter, env)), inner, node)
        for condition in generator.ifs:
            self.eval(condition, inner)
        value = self.eval(element, inner)
        return as_collection(value)

    def eval_ListComp(self, node, env):
        return self.comprehension(node, env, node.elt)

    eval_SetComp = eval_ListComp
    eval_GeneratorExp = eval_ListComp

    def eval_DictComp(self, node, env):
        value = self.comprehension(node, env, node.value)
        return self.untraced(node, value, "ids kept in a dict comprehension at %s:%d"
                             % (self.fn.rel, self.line(node)), "a dict comprehension")

    def apply_lambda(self, index, argument, node):
        lam, env = self.lambdas[index]
        params = [a.arg for a in lam.args.args]
        inner = dict(env)
        if params:
            inner[params[0]] = argument
        return self.eval(lam.body, inner)

    # -- calls: each kind of call the interpreter knows, tried in order ---------------
    def eval_Call(self, node, env):
        args = [self.eval(a, env) for a in node.args]
        keywords = {}
        spread = []
        for keyword in node.keywords:
            value = self.eval(keyword.value, env)
            if keyword.arg is not None:
                keywords[keyword.arg] = value
            else:
                spread.append((keyword.value, value))
        opaque = self.spread_keywords(node, spread, keywords)
        call = CallSite(node, callee_name(node.func), args, keywords, opaque, env)
        self.at_call(call)
        for kind in (self.getattr_call, self.get_call, self.partial_built, self.dict_call,
                     self.named_call, self.pass_through_call, self.map_call,
                     self.operator_call,
                     self.numeric_call, self.observer_call, self.log_call,
                     self.dict_filled, self.collection_filled, self.lambda_call,
                     self.partial_call):
            value = kind(call)
            if value is not None:
                return value
        if not self.relevant(args + list(keywords.values()) + opaque):
            return self.ignored_call(node, node.func, env)
        return self.followed_call(call)

    def getattr_call(self, call):
        node, func = call.node, call.node.func
        if not (isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2):
            return None
        attribute = self.key_name(node.args[1])
        if attribute is not None:
            found = self.key_read(node, call.args[0], attribute)
            if found is not None:
                return found
        return self.unknown(node, "getattr()")

    def get_call(self, call):
        """`x.get(key, default)`: a key the question reads, or a dict of known keys."""
        node, func, args = call.node, call.node.func, call.args
        if not (isinstance(func, ast.Attribute) and func.attr == "get" and node.args):
            return None
        key = self.key_name(node.args[0])
        base = self.eval(func.value, call.env)
        if key is None:
            return None
        found = self.key_read(node, base, key)
        if found is not None:
            return self.read_with_default(found, args)
        dicts = [a for a in base if isinstance(a, Keyed)]
        if not dicts or len(dicts) != len(base):
            return None
        out = set()
        for atom in dicts:
            held = dict(atom.items)
            out |= held[key] if key in held else \
                (args[1] if len(args) > 1 else self.constant(node, None))
        return frozenset(out)

    def partial_built(self, call):
        node = call.node
        if not (dotted_name(node.func) in PARTIAL and node.args):
            return None
        self.a.partials.append((self, node.args[0], tuple(call.args[1:]),
                                dict(call.keywords)))
        return frozenset([Partial(len(self.a.partials) - 1)])

    def dict_call(self, call):
        func, args = call.node.func, call.args
        if not (isinstance(func, ast.Name) and func.id == "dict" and len(args) <= 1):
            return None
        bases = [a for a in args[0] if isinstance(a, Keyed)] if args else [Keyed(())]
        if bases and (not args or len(bases) == len(args[0])):
            return frozenset(keyed(b.items + tuple(call.keywords.items())) for b in bases)
        return None

    def pass_through_call(self, call):
        """tuple(x), list(x), x.copy(), np.asarray(x): the value, unchanged;
        filter(f, x): some of x's elements, each unchanged; itertools.chain(a, b): the
        elements of each."""
        func, args = call.node.func, call.args
        if isinstance(func, ast.Name) and func.id in PASS_THROUGH_CALLS and args:
            return as_collection(args[0])
        if isinstance(func, ast.Name) and func.id == "filter" and len(args) == 2 and \
                func.id not in call.env and not call.keywords:
            return as_collection(args[1])
        if self.stdlib_name(func, "itertools") == "chain" and args and not call.keywords and \
                not any(isinstance(a, ast.Starred) for a in call.node.args):
            return frozenset().union(*[as_collection(a) for a in args])
        if isinstance(func, ast.Attribute) and func.attr in PASS_THROUGH_METHODS:
            if args and not isinstance(func.value, ast.Name) or \
                    (args and func.attr in ("array", "asarray", "tensor", "as_tensor")):
                return as_collection(args[0])
            return self.eval(func.value, call.env)
        return None

    def operator_call(self, call):
        """operator.add(a, b) and operator.sub(a, b) of the standard library (imported
        as the module or by name) are a + b and a - b; a module of the tree named so, or
        a name never imported, stays a call like any."""
        node = call.node
        if len(node.args) != 2 or node.keywords or \
                any(isinstance(a, ast.Starred) for a in node.args):
            return None
        op = OPERATOR_ARITHMETIC.get(self.stdlib_name(node.func, "operator"))
        if op is None:
            return None
        return self.arithmetic(node, call.args[0], op(), call.args[1], node.args[1],
                               node.args[0])

    def stdlib_name(self, func, module):
        """The attribute of standard-library `module` that `func` names (`operator.add`
        with `import operator`, `add` from `from operator import add`), or None. A file's
        imports are parsed only when it has a `from module` import (their parse costs
        every host); an alias of the module (`import operator as op`) is not read."""
        if not (isinstance(func, ast.Name) or isinstance(func, ast.Attribute) and
                isinstance(func.value, ast.Name)):
            return None
        mentions = self.a.__dict__.setdefault("stdlib_mentions", {})
        key = (self.fn.rel, module)
        if key not in mentions:
            source = self.a.codebase.source(self.fn.rel)
            mentions[key] = (source is not None and source.contains("import " + module),
                             source is not None and source.contains("from " + module))
        imported, named = mentions[key]
        if isinstance(func, ast.Attribute) and func.value.id == module:
            # `import operator` and operator.add: no parse of the file's imports needed
            return func.attr if imported and not named or \
                self.a.codebase.imports(self.fn.rel).get(module) == (module, None) else None
        if isinstance(func, ast.Attribute) or not named:  # another module's, or no
            return None  # `from operator import ...` in the file
        target = self.a.codebase.imports(self.fn.rel).get(func.id)
        return target[1] if target is not None and target[0] == module else None

    def map_call(self, call):
        func, args = call.node.func, call.args
        if not (isinstance(func, ast.Name) and func.id == "map" and len(args) == 2):
            return None
        lambdas = [a for a in args[0] if isinstance(a, Lambda)]
        if not lambdas:
            return None
        elements = as_elements(args[1])
        out = set()
        for atom in lambdas:
            out |= as_collection(self.apply_lambda(atom.index, elements, call.node))
        return frozenset(out)

    def observer_call(self, call):
        func = call.node.func
        if not (isinstance(func, ast.Name) and func.id in OBSERVERS):
            return None
        return sources_in(frozenset().union(*call.args)) or \
            self.constant(call.node, func.id + "()")

    def log_call(self, call):
        return EMPTY if is_log_call(call.node.func) else None

    def dict_filled(self, call):
        """kwargs.update(...) / kwargs.setdefault(k, v) on a dict of known keys."""
        func, env = call.node.func, call.env
        if not (isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault") and
                isinstance(func.value, ast.Name) and
                any(isinstance(a, Keyed) for a in env.get(func.value.id, EMPTY))):
            return None
        node, args = call.node, call.args
        current = env[func.value.id]
        updated = set(a for a in current if not isinstance(a, Keyed))
        for atom in (a for a in current if isinstance(a, Keyed)):
            if func.attr == "setdefault":
                key = const_str(node.args[0]) if node.args else None
                if key is None:
                    updated.add(atom)
                    continue
                held = dict(atom.items)
                if key not in held:
                    held[key] = args[1] if len(args) > 1 else self.constant(node, None)
                updated.add(keyed(tuple(held.items())))
                continue
            others = [a for a in args[0] if isinstance(a, Keyed)] if args else [Keyed(())]
            if args and len(others) != len(args[0]):
                updated.add(Keyed(()))  # keys of an unknown dict: nothing known
                continue
            for other in others:
                updated.add(keyed(atom.items + other.items + tuple(call.keywords.items())))
        env[func.value.id] = frozenset(updated)
        return EMPTY

    def collection_filled(self, call):
        """A local collection filled in place (`ids.append(i + 1)`); `operator.add(i, 0)`
        or `np.add(ids, 0)` name a module's function, which is a call like any."""
        func, env = call.node.func, call.env
        if not (isinstance(func, ast.Attribute) and func.attr in MUTATORS and
                isinstance(func.value, ast.Name) and func.value.id in env):
            return None
        added = set()
        for value in call.args:
            added |= (value if func.attr == "extend" else as_collection(value))
        env[func.value.id] = env.get(func.value.id, EMPTY) | frozenset(added)
        return EMPTY

    def lambda_call(self, call):
        func = call.node.func
        lambdas = [a for a in call.env.get(call.name, EMPTY) if isinstance(a, Lambda)] \
            if isinstance(func, ast.Name) else []
        if not (lambdas and call.args):
            return None
        out = set()
        for atom in lambdas:
            out |= self.apply_lambda(atom.index, call.args[0], call.node)
        return frozenset(out)

    def partial_call(self, call):
        """A call of functools.partial objects: into each one's function."""
        node, args, keywords, opaque = call.node, call.args, call.keywords, call.opaque
        partials = self.partials_called(node.func, call.env)
        if not (partials and (self.relevant(args + list(keywords.values()) + opaque) or any(
                carries_ids(v) for p in partials for v in list(p[2]) + list(p[3].values())))):
            return None
        out = set()
        for flow, target, bound, bound_keywords in partials:
            ref, why = flow.names.callee(target)
            if ref is None:
                out |= self.unfollowed(node, "functools.partial of %s" % (
                    dotted_name(target) or "a computed function"), why,
                    list(bound) + args, dict(bound_keywords, **keywords), opaque)
                continue
            out |= self.follow(ref, node, list(bound) + args, dict(bound_keywords, **keywords))
        return frozenset(out)

    def followed_call(self, call):
        """A call of a function of the tree: into it (and into each override of a
        method), else the question's value of a call not followed."""
        node, func = call.node, call.node.func
        ref, why = self.names.callee(func, local_only=self.LOCAL_CALLEES_ONLY)
        if ref is not None:
            result = self.follow(ref, node, call.args, call.keywords)
            for override, cls in self.names.overrides(func, ref, self.a.files):
                result = result | self.follow(override, node, call.args, call.keywords, cls)
            return result
        return self.unfollowed(node, "%s()" % (dotted_name(func) or call.name or
                                               "a computed function"), why, call.args,
                               call.keywords, call.opaque, func)

    # -- keywords through dicts, partials -------------------------------------------
    def spread_keywords(self, node, spread, keywords):
        """`**kwargs` of dicts with known keys become keywords (a key some paths leave
        out is, on those paths, not passed); the values of other `**` spreads, which
        may hold any keyword, are returned."""
        opaque = []
        for expression, value in spread:
            dicts = [a for a in value if isinstance(a, Keyed)]
            if len(dicts) != len(value) or not dicts:
                opaque.append(self.spread(node, expression, value))
                continue
            keys = set(k for d in dicts for k, _ in d.items)
            for key in sorted(keys):
                held = [dict(d.items).get(key) for d in dicts]
                value = frozenset().union(*[h for h in held if h is not None])
                if any(h is None for h in held):
                    value = value | self.constant(node, "not passed")
                keywords[key] = keywords.get(key, EMPTY) | value
        return opaque

    def partials_called(self, func, env):
        """The functools.partial objects a call expression calls: bound to a name here,
        built in place (`partial(f, 1)(ids)`), or bound at module level."""
        if isinstance(func, ast.Call):
            value = self.eval(func, env)
        elif isinstance(func, ast.Name):
            value = env.get(func.id, EMPTY)
            if not value and func.id not in self.local_defs and self.source is not None and \
                    self.source.contains("partial") and \
                    self.a.codebase.function(self.fn.rel, func.id) is None:
                found = self.a.codebase.module_assignment(self.fn.rel, func.id)
                if found is not None and isinstance(found[0], ast.Call) and \
                        dotted_name(found[0].func) in PARTIAL:
                    value = self.spawn(self.fn, {}, self.depth, self.stack).eval(found[0], {})
        else:
            return []
        return [self.a.partials[a.index] for a in value if isinstance(a, Partial)]

    # -- path conditions and named values ---------------------------------------------
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
        if test.index not in self.a.told:
            flow, expression, bound_env = self.a.tests[test.index]
            self.a.told[test.index] = None  # a test reading itself decides nothing
            self.a.told[test.index] = flow.truth(expression, bound_env)
        return self.a.told[test.index]

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
        body; None when it cannot be told."""
        ref = self.predicate_ref(node.func)
        if ref is None:
            return None
        if ref.key not in self.a.predicates:
            self.a.predicates[ref.key] = None  # a predicate asking itself decides nothing
            body = conditions.predicate_body(ref.node)
            if body is not None and len(self.stack) < MAX_CALL_DEPTH + 2:
                flow = self.spawn(ref, {}, self.depth + 1, self.stack + (ref.key,))
                self.a.predicates[ref.key] = flow.truth(body, {})
        return self.a.predicates[ref.key]

    def predicate_ref(self, func):
        """The function a predicate call reaches (found once per call site)."""
        key = (self.fn.key, self.self_cls, func.lineno, func.col_offset)
        if key not in self.a.predicate_refs:
            self.a.predicate_refs[key] = self.names.predicate(func)
        return self.a.predicate_refs[key]

    def named_constant(self, node):
        """(value, step at its definition) of a named constant (codebase.Scope says
        which), or None."""
        found = self.names.named_constant(node)
        if found is None:
            return None
        value, rel, line = found
        return value, step_of(self.a.codebase, rel, line, line, "constant")

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

    def follow(self, ref, node, args, keywords, self_cls=None):
        """Into a helper with the argument values, and its return value back out.
        self_cls: the class `self` is in the helper (an override's own class)."""
        if self_cls is None and ref.cls is not None and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and \
                node.func.value.id in ("self", "cls"):
            self_cls = self.self_cls
        if self.depth >= MAX_CALL_DEPTH or ref.key in self.stack:
            why = "depth limit" if self.depth >= MAX_CALL_DEPTH else "recursion"
            return self.not_followed(ref, node, args, keywords, why)
        step = self.step(node, "call")
        args = [self.passed(step, v) for v in args]
        keywords = dict((k, self.passed(step, v)) for k, v in keywords.items())
        params = ref.params()
        defaults = ref.defaults()
        env = {}
        definer = self.spawn(ref, {}, self.depth + 1, self.stack, self_cls)
        for index, name in enumerate(params):
            if index < len(args):
                env[name] = args[index]
            elif name in keywords:
                env[name] = keywords[name]
            elif name in defaults:
                env[name] = definer.default_value(defaults[name])
            else:
                env[name] = EMPTY
        spare = self.spare_arguments(ref, params, args, keywords, env, node)
        key = (ref.key, self_cls, tuple(sorted(env.items(), key=lambda item: item[0])))
        if key not in self.a.memo:
            self.a.examined.add(ref.rel)
            self.a.memo[key] = EMPTY  # a cycle through the memo sees nothing
            flow = self.spawn(ref, env, self.depth + 1, self.stack + (ref.key,), self_cls)
            result = flow.run()
            if not result:
                result = self.constant(node, None)
            self.a.memo[key] = result
        return self.a.memo[key] | spare

    def spare_arguments(self, ref, params, args, keywords, env, node):
        """Arguments no named parameter takes: into *args / **kwargs when the function
        has them, else the question's `spare` value."""
        extra = args[len(params):]
        unmatched = dict((k, v) for k, v in keywords.items() if k not in params)
        signature = ref.node.args
        if signature.vararg is not None:
            env[signature.vararg.arg] = frozenset([Items(tuple(extra))])
            extra = []
        if signature.kwarg is not None:
            env[signature.kwarg.arg] = frozenset([keyed(tuple(unmatched.items()))])
            unmatched = {}
        return self.spare(node, ref, list(extra) + list(unmatched.values()))


# one call being evaluated: its node, callee name, argument values (`opaque`: those of
# `**` spreads that may hold any keyword) and the env it is evaluated in
CallSite = namedtuple("CallSite", ["node", "name", "args", "keywords", "opaque", "env"])


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


def subscripted(base, position, key, is_slice):
    """What `base[index]` holds: a slice of ids is ids, an element of ids an element, an
    item of a tuple or a dict that item; what cannot be told is dropped."""
    out = set()
    for atom in base:
        if isinstance(atom, Ids):
            out.add(atom if is_slice else Elem(atom.offset, atom.trail))
        elif isinstance(atom, Items) and position is not None and \
                -len(atom.items) <= position < len(atom.items):
            out |= atom.items[position]
        elif isinstance(atom, Deferred) and position is not None:
            out.add(atom.element(position))
        elif isinstance(atom, Keyed) and key is not None:
            out |= dict(atom.items).get(key, EMPTY)
        elif isinstance(atom, Lost):
            out.add(atom)  # ids lost stay lost, whatever is read from them
        elif isinstance(atom, (Source, Unknown, Deferred, Param)):
            out.add(atom)
    return frozenset(out)


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


def is_log_call(func):
    return isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and \
        "log" in (dotted_name(func.value) or "").lower()


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
