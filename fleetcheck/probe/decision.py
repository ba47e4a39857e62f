"""What a predicate of the install's code returns when the speculative method is DFlash,
evaluated as Python runs it over a small, exact semantics (never imported, never run).

Asked of the config's own decision (`needs_eagle_block_drop()`): its body is run with
`self.method == "dflash"` bound. What is evaluated: constants, names (locals, the
module's constants and those it imports from `vllm.*`), tuples, lists, sets and dicts of
them, comparisons (chained too), `in`/`not in`, `and`/`or` (their values, short-circuit),
`not`, unary minus, conditional expressions, lambdas, the config's own attributes
(`self.method`, class-level defaults and dataclass field defaults), its methods and
properties followed into their bodies (subclass first, then the bases), module functions
of the tree (imports followed into other modules), `getattr(obj, "name"[, default])`
resolved against the class, calls bound to the callee's own `def` (positional, keyword,
`*args`, `**kwargs`, defaults), `bool`, `len`, `any`, `all`, `operator.*` comparisons,
`functools.partial`, and the few methods of a known dict, tuple, frozenset or string
that only read it (`{...}.get(method, False)`, `.keys()`, `method.startswith(...)`); statements: assignments (tuple unpacking too), `if`/`elif`/
`else`, early `return`, `raise`, `try`/`else`/`finally` without a raise, `pass`. Anything
else is unknown, named with its line: never guessed true or false."""

import ast

from fleetcheck.probe.codebase import decorated, dotted_name

METHOD = "dflash"
MAX_DEPTH = 12


class Unknown(object):
    """A value the semantics does not decide; `why` names the construct and its line."""

    def __init__(self, why):
        self.why = why


class Instance(object):
    """The speculative config (`self`): its class in the tree."""

    def __init__(self, rel, cls):
        self.rel, self.cls = rel, cls


class Function(object):
    """A def of the tree (`ref`), bound to an instance for a method, with partial's
    arguments."""

    def __init__(self, ref, bound=None, args=(), kwargs=None):
        self.ref, self.bound, self.args, self.kwargs = ref, bound, tuple(args), kwargs or {}


class Lambda(object):
    def __init__(self, node, frame):
        self.node, self.frame = node, frame


class Builtin(object):
    def __init__(self, name):
        self.name = name


class BoundMethod(object):
    """A method of a known dict, tuple, frozenset or string (`{...}.get`): one of the few
    that read their value and change nothing (VALUE_METHODS)."""

    def __init__(self, value, name):
        self.value, self.name = value, name


VALUE_METHODS = {
    dict: ("get", "keys", "values", "items", "__contains__"),
    tuple: ("count", "index", "__contains__"),
    frozenset: ("__contains__", "issubset", "issuperset", "isdisjoint", "union",
                "intersection", "difference"),
    str: ("startswith", "endswith", "lower", "upper", "strip", "casefold", "__contains__"),
}


OPERATORS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
             "contains": lambda a, b: b in a, "not_": lambda a: not a,
             "truth": lambda a: bool(a), "is_": lambda a, b: a is b,
             "is_not": lambda a, b: a is not b, "and_": lambda a, b: a & b,
             "or_": lambda a, b: a | b}
BUILTINS = {"bool": bool, "len": len, "any": any, "all": all, "tuple": tuple,
            "frozenset": frozenset, "set": set, "list": list, "str": str}
COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
           ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
           ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
           ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


class Frame(object):
    def __init__(self, ref, env, depth):
        self.ref, self.env, self.depth = ref, env, depth

    def line(self, node):
        return getattr(node, "lineno", 0) + self.ref.line_offset

    def unknown(self, node, what):
        return Unknown("%s (%s:%d)" % (what, self.ref.rel, self.line(node)))


def known(value):
    return not isinstance(value, Unknown)


def construct(node):
    """A few words naming an expression: what an unknown says it could not evaluate."""
    try:
        text = ast.unparse(node)  # 3.9+
    except Exception:
        text = dotted_name(node.func if isinstance(node, ast.Call) else node)
        text = text + "(...)" if text and isinstance(node, ast.Call) else \
            text or type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


class Evaluator(object):
    """One question's evaluation over the install's tree (`codebase`); `examined`: the
    files it read, so they ship and are proved as the finders' files are."""

    def __init__(self, codebase):
        self.codebase = codebase
        self.examined = set()
        self.decided_line = None
        self.results = {}  # a method of the config called without arguments -> its value

    # -- entry -------------------------------------------------------------------------
    def method_for_dflash(self, ref):
        """(truth, line, why) of method `ref` called on a config whose method is DFlash:
        truth True/False, or None with `why` naming what was not evaluated."""
        self.examined.add(ref.rel)
        self_value = Instance(*ref.cls) if ref.cls else None
        value = self.call_function(Function(ref, self_value), [], {}, 0, top=True)
        if isinstance(value, Unknown):
            return None, self.decided_line, value.why
        truth = self.truth(value)
        return truth, self.decided_line, None

    def test_truth(self, node, frame):
        """(truth, why) of the test of an `if` or a conditional expression: truth True or
        False when it is known, else None with `why` the unknown naming the test (its own
        unknown, or the test itself when its value has no truth)."""
        test = self.expr(node, frame)
        truth = self.truth(test) if known(test) else None
        if truth is not None:
            return truth, None
        return None, test if not known(test) else frame.unknown(node, construct(node))

    def truth(self, value):
        try:
            return bool(value)
        except Exception:
            return None

    # -- calls -------------------------------------------------------------------------
    def call_function(self, function, args, kwargs, depth, top=False):
        """A call of a def of the tree; a method of the config called with no arguments
        is evaluated once (the wrapper asks the gate the gate's finder evaluated)."""
        ref = function.ref
        pure = isinstance(function.bound, Instance) and not args and not kwargs and \
            not function.args and not function.kwargs and not top
        key = (ref.key, function.bound.rel, function.bound.cls) if pure else None
        if key in self.results:
            return self.results[key]
        value = self.evaluate_call(function, args, kwargs, depth, top)
        if pure:
            self.results[key] = value
        return value

    def evaluate_call(self, function, args, kwargs, depth, top):
        ref = function.ref
        if depth > MAX_DEPTH:
            return Unknown("calls nested deeper than %d (%s)" % (MAX_DEPTH, ref.name))
        self.examined.add(ref.rel)
        args = list(function.args) + list(args)
        merged = dict(function.kwargs)
        merged.update(kwargs)
        env = self.bind(ref, function.bound, args, merged, depth)
        if isinstance(env, Unknown):
            return env
        frame = Frame(ref, env, depth)
        outcome = self.run(ref.node.body, frame)
        if isinstance(outcome, Unknown):
            return outcome
        kind, value, line = outcome if outcome else ("return", None, None)
        if kind == "raise":
            return frame.unknown(ref.node, "%s() raises on DFlash's path at line %d" % (
                ref.name, line))
        if top:
            self.decided_line = line
        return value

    def bind(self, ref, bound, args, kwargs, depth):
        """Parameter name -> value, as Python binds a call: positional onto the def's
        positional parameters in order, then keywords, `*args`/`**kwargs` collecting the
        rest, defaults (evaluated in the def's module) for the others."""
        node_args = ref.node.args
        positional = [a.arg for a in getattr(node_args, "posonlyargs", [])] + \
            [a.arg for a in node_args.args]
        env = {}
        if ref.cls is not None and not ref.static and positional:
            if bound is None:
                return Unknown("%s() called without its instance" % ref.name)
            env[positional[0]] = bound
            positional = positional[1:]
        if len(args) > len(positional):
            if node_args.vararg is None:
                return Unknown("%s() given too many arguments" % ref.name)
            env[node_args.vararg.arg] = tuple(args[len(positional):])
        elif node_args.vararg is not None:
            env[node_args.vararg.arg] = ()
        for name, value in zip(positional, args):
            env[name] = value
        extra = {}
        keyword_names = set(positional) | set(a.arg for a in node_args.kwonlyargs)
        for name, value in kwargs.items():
            if name in env:
                return Unknown("%s() given %s twice" % (ref.name, name))
            if name in keyword_names:
                env[name] = value
            elif node_args.kwarg is not None:
                extra[name] = value
            else:
                return Unknown("%s() given an unknown keyword %s" % (ref.name, name))
        if node_args.kwarg is not None:
            env[node_args.kwarg.arg] = extra
        defaults = ref.defaults()
        frame = Frame(ref, {}, depth)
        for name in positional + [a.arg for a in node_args.kwonlyargs]:
            if name not in env:
                if name not in defaults:
                    return Unknown("%s() misses its argument %s" % (ref.name, name))
                env[name] = self.expr(defaults[name], frame)
        return env

    def call(self, node, frame):
        func = node.func
        args = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                spread = self.expr(arg.value, frame)
                if not known(spread) or not isinstance(spread, (tuple, list)):
                    return frame.unknown(node, "*%s" % construct(arg.value))
                args.extend(spread)
            else:
                args.append(self.expr(arg, frame))
        kwargs = {}
        for keyword in node.keywords:
            value = self.expr(keyword.value, frame)
            if keyword.arg is None:
                if not known(value) or not isinstance(value, dict):
                    return frame.unknown(node, "**%s" % construct(keyword.value))
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        if isinstance(func, ast.Name) and func.id == "getattr" and func.id not in frame.env:
            return self.getattr_call(node, args, frame)
        callee = self.expr(func, frame)
        return self.apply(callee, args, kwargs, node, frame)

    def apply(self, callee, args, kwargs, node, frame):
        if isinstance(callee, Unknown):
            return callee
        if isinstance(callee, Function):
            return self.call_function(callee, args, kwargs, frame.depth + 1)
        if isinstance(callee, Lambda):
            return self.call_lambda(callee, args, kwargs, node, frame)
        if isinstance(callee, Builtin):
            return self.call_builtin(callee.name, args, kwargs, node, frame)
        if isinstance(callee, BoundMethod):
            return self.call_value_method(callee, args, kwargs, node, frame)
        return frame.unknown(node, "the call %s" % construct(node))

    def call_value_method(self, callee, args, kwargs, node, frame):
        """`{...}.get(method, False)`, `method.startswith("eagle")`: run on the known
        value; a dict's values or items holding an unknown are unknown."""
        if kwargs:
            return frame.unknown(node, "%s() with keywords" % construct(node.func))
        bad = [a for a in args if not known(a)]
        if bad:
            return bad[0]
        value, name = callee.value, callee.name
        if isinstance(value, dict) and name in ("values", "items"):
            bad = [v for v in value.values() if not known(v)]
            if bad:
                return bad[0]
        try:
            result = getattr(value, name)(*args)
        except Exception:
            return frame.unknown(node, "%s() of these values" % construct(node.func))
        if isinstance(value, dict) and name in ("keys", "values", "items"):
            return tuple(result)
        return result

    def call_lambda(self, callee, args, kwargs, node, frame):
        params = [a.arg for a in callee.node.args.args]
        if len(args) > len(params) or callee.node.args.vararg or callee.node.args.kwarg:
            return frame.unknown(node, "the lambda's arguments")
        env = dict(callee.frame.env)
        env.update(zip(params, args))
        for name, value in kwargs.items():
            if name not in params or name in env and name in params[:len(args)]:
                return frame.unknown(node, "the lambda's arguments")
            env[name] = value
        defaults = dict(zip(params[len(params) - len(callee.node.args.defaults):],
                            callee.node.args.defaults))
        for name in params:
            if name not in env or name not in params[:len(args)] and name not in kwargs:
                if name in defaults:
                    env[name] = self.expr(defaults[name], callee.frame)
                elif name not in env:
                    return frame.unknown(node, "the lambda's arguments")
        return self.expr(callee.node.body, Frame(callee.frame.ref, env, frame.depth + 1))

    def call_builtin(self, name, args, kwargs, node, frame):
        if any(not known(a) for a in args) or any(not known(v) for v in kwargs.values()):
            return next(a for a in list(args) + list(kwargs.values()) if not known(a))
        if name == "functools.partial":
            if not args or not isinstance(args[0], Function):
                return frame.unknown(node, "functools.partial of %s" % construct(node))
            inner = args[0]
            merged = dict(inner.kwargs)
            merged.update(kwargs)
            return Function(inner.ref, inner.bound, inner.args + tuple(args[1:]), merged)
        if kwargs:
            return frame.unknown(node, "%s() with keywords" % name)
        try:
            if name.startswith("operator."):
                return OPERATORS[name[len("operator."):]](*args)
            return BUILTINS[name](*args)
        except Exception:
            return frame.unknown(node, "%s() of these values" % name)

    def getattr_call(self, node, args, frame):
        if len(args) not in (2, 3) or not known(args[1]) or not isinstance(args[1], str):
            return frame.unknown(node, construct(node))
        obj = args[0]
        if isinstance(obj, Instance):
            value = self.instance_attribute(obj, args[1], node, frame, missing=len(args) == 3)
            if value is MISSING:
                return args[2]
            return value
        return frame.unknown(node, construct(node))

    def is_property(self, ref):
        source = self.codebase.source(ref.rel)
        line = ref.node.lineno + ref.line_offset
        return source is not None and any(
            decorated(source.lines, line, name) for name in
            ("property", "cached_property", "functools.cached_property"))

    # -- the config --------------------------------------------------------------------
    def instance_attribute(self, instance, name, node, frame, missing=False):
        """`self.name` for the config: the method bound, "dflash" for `method`, a
        property's value, a class-level default; MISSING (when `missing`) if the class and
        its bases in the tree define no such name; else unknown."""
        if name == "method":
            return METHOD
        codebase = self.codebase
        ref = codebase.method(instance.rel, instance.cls, name)
        if ref is not None:
            self.examined.add(ref.rel)
            if self.is_property(ref):
                return self.call_function(Function(ref, instance), [], {}, frame.depth + 1)
            return Function(ref, instance)
        found = codebase.class_constant(instance.rel, instance.cls, name)
        if found is not None:
            self.examined.add(found[1])
            return found[0]
        default = self.field_default(instance.rel, instance.cls, name, 0)
        if default is not NO_DEFAULT:
            return default
        if missing and not codebase.declares(instance.rel, instance.cls, name):
            return MISSING
        return frame.unknown(node, "self.%s" % name)

    def field_default(self, rel, cls, name, depth):
        """The literal default of a dataclass field `name: T = value` of the class or
        its bases; NO_DEFAULT when none is declared."""
        codebase = self.codebase
        block = codebase.class_block(rel, cls)
        if block is None:
            return NO_DEFAULT
        source = codebase.source(rel)
        self.examined.add(rel)
        prefix = block[2] + name
        for line in source.hit_lines(name, True):
            if block[0] < line <= block[1]:
                text = source.lines[line - 1]
                if not text.startswith(prefix) or ":" not in text[len(prefix):][:2]:
                    continue
                try:
                    statement = ast.parse(text.strip()).body[0]
                except SyntaxError:
                    continue
                if isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    try:
                        return ast.literal_eval(statement.value)
                    except ValueError:
                        if isinstance(statement.value, ast.Call):  # field(default=...)
                            for keyword in statement.value.keywords:
                                if keyword.arg == "default":
                                    try:
                                        return ast.literal_eval(keyword.value)
                                    except ValueError:
                                        pass
                        return NO_DEFAULT
        if depth < 4:
            for base_rel, base in codebase.class_bases(rel, cls):
                found = self.field_default(base_rel, base, name, depth + 1)
                if found is not NO_DEFAULT:
                    return found
        return NO_DEFAULT

    # -- statements --------------------------------------------------------------------
    def run(self, body, frame):
        """None when the block falls through, ("return", value, line) or ("raise", None,
        line), or Unknown."""
        for statement in body:
            outcome = self.statement(statement, frame)
            if outcome is not None:
                return outcome
        return None

    def statement(self, node, frame):
        if isinstance(node, ast.Return):
            value = self.expr(node.value, frame) if node.value is not None else None
            if isinstance(value, Unknown):
                return value
            return ("return", value, frame.line(node))
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant):
                return None
            if isinstance(node.value, ast.Call) and logging_call(node.value):
                return None
            return frame.unknown(node, "the statement %s" % construct(node.value))
        if isinstance(node, ast.Pass):
            return None
        if isinstance(node, ast.Raise):
            return ("raise", None, frame.line(node))
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None:
                return None
            value = self.expr(node.value, frame)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                failed = self.assign(target, value, frame)
                if failed is not None:
                    return failed
            return None
        if isinstance(node, ast.If):
            return self.branch(node, frame)
        if isinstance(node, ast.Try):
            outcome = self.run(node.body, frame)
            if outcome is not None and (isinstance(outcome, Unknown) or outcome[0] == "raise"):
                return frame.unknown(node, "a try whose body raises or is not evaluated")
            if outcome is None:
                outcome = self.run(node.orelse, frame)
            final = self.run(node.finalbody, frame)
            return final if final is not None else outcome
        return frame.unknown(node, "a %s statement" % type(node).__name__.lower())

    def assign(self, target, value, frame):
        if isinstance(target, ast.Name):
            frame.env[target.id] = value
            return None
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                return frame.unknown(target, "a starred assignment")
            if not known(value):
                for element in target.elts:
                    self.assign(element, value, frame)
                return None
            try:
                values = list(value)
            except TypeError:
                return frame.unknown(target, "unpacking %s" % construct(target))
            if len(values) != len(target.elts):
                return frame.unknown(target, "unpacking %s" % construct(target))
            for element, item in zip(target.elts, values):
                failed = self.assign(element, item, frame)
                if failed is not None:
                    return failed
            return None
        return frame.unknown(target, "an assignment to %s" % construct(target))

    def branch(self, node, frame):
        truth, why = self.test_truth(node.test, frame)
        if truth is True:
            return self.run(node.body, frame)
        if truth is False:
            return self.run(node.orelse, frame)
        # undecided: both ways must agree, or the outcome is unknown
        outcomes = []
        envs = []
        for body in (node.body, node.orelse):
            copy = Frame(frame.ref, dict(frame.env), frame.depth)
            outcomes.append(self.run(body, copy))
            envs.append(copy.env)
        first, second = outcomes
        if first is None and second is None:
            merged = {}
            for name in set(envs[0]) | set(envs[1]):
                a, b = envs[0].get(name, why), envs[1].get(name, why)
                merged[name] = a if known(a) and known(b) and same(a, b) else why
            frame.env.clear()
            frame.env.update(merged)
            return None
        if first is not None and second is not None and not isinstance(first, Unknown) and \
                not isinstance(second, Unknown) and first[0] == second[0] == "return" and \
                same(first[1], second[1]):
            return first
        return why

    # -- expressions -------------------------------------------------------------------
    def expr(self, node, frame):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node, frame)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = [self.expr(e, frame) for e in node.elts]
            bad = [v for v in values if not known(v)]
            if bad:
                return bad[0]
            try:
                return tuple(values) if not isinstance(node, ast.Set) else frozenset(values)
            except TypeError:
                return frame.unknown(node, construct(node))
        if isinstance(node, ast.Dict):
            out = {}
            for key, value in zip(node.keys, node.values):
                if key is None:
                    spread = self.expr(value, frame)
                    if not known(spread) or not isinstance(spread, dict):
                        return frame.unknown(node, construct(node))
                    out.update(spread)
                    continue
                k = self.expr(key, frame)
                if not known(k):
                    return k
                out[k] = self.expr(value, frame)
            return out
        if isinstance(node, ast.BoolOp):
            return self.boolop(node, frame)
        if isinstance(node, ast.UnaryOp):
            value = self.expr(node.operand, frame)
            if not known(value):
                return value
            try:
                if isinstance(node.op, ast.Not):
                    return not value
                if isinstance(node.op, ast.USub):
                    return -value
                if isinstance(node.op, ast.UAdd):
                    return +value
            except TypeError:
                pass
            return frame.unknown(node, construct(node))
        if isinstance(node, ast.Compare):
            return self.compare(node, frame)
        if isinstance(node, ast.IfExp):
            truth, why = self.test_truth(node.test, frame)
            if truth is True:
                return self.expr(node.body, frame)
            if truth is False:
                return self.expr(node.orelse, frame)
            a, b = self.expr(node.body, frame), self.expr(node.orelse, frame)
            if known(a) and known(b) and same(a, b):
                return a
            return why
        if isinstance(node, ast.Attribute):
            return self.attribute(node, frame)
        if isinstance(node, ast.Call):
            return self.call(node, frame)
        if isinstance(node, ast.Lambda):
            return Lambda(node, Frame(frame.ref, dict(frame.env), frame.depth))
        if isinstance(node, ast.Subscript):
            value = self.expr(node.value, frame)
            index = node.slice.value if type(node.slice).__name__ == "Index" else node.slice
            key = self.expr(index, frame)
            if known(value) and known(key):
                try:
                    return value[key]
                except Exception:
                    pass
            return frame.unknown(node, construct(node))
        return frame.unknown(node, construct(node))

    def boolop(self, node, frame):
        """Python's and/or on values; an unknown operand leaves the result unknown unless
        a later known operand decides it whatever the unknown was."""
        conjunction = isinstance(node.op, ast.And)
        pending = None
        value = None
        for operand in node.values:
            value = self.expr(operand, frame)
            if not known(value):
                pending = pending or value
                continue
            truth = self.truth(value)
            if truth is None:
                pending = pending or frame.unknown(operand, construct(operand))
                continue
            if truth is not conjunction:  # and: a falsy value decides; or: a truthy one
                return value if pending is None else (not conjunction)
        return pending if pending is not None else value

    def compare(self, node, frame):
        left = self.expr(node.left, frame)
        result = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node, frame)
            if not known(left):
                return left
            if not known(right):
                return right
            try:
                if not COMPARE[type(op)](left, right):
                    return False
            except Exception:
                return frame.unknown(node, construct(node))
            left = right
        return result

    def name(self, node, frame):
        name = node.id
        if name in frame.env:
            return frame.env[name]
        if name in BUILTINS:
            return Builtin(name)
        codebase = self.codebase
        rel = frame.ref.rel
        found = codebase.constant(rel, name)
        if found is not None:
            self.examined.add(found[1])
            return found[0]
        resolved = codebase.resolve(rel, name)
        if resolved is not None and resolved[0] == "function":
            self.examined.add(resolved[1].rel)
            return Function(resolved[1])
        assigned = codebase.module_assignment(rel, name) if frame.depth <= MAX_DEPTH else None
        if assigned is not None:
            value = self.expr(assigned[0], Frame(ModuleRef(rel, assigned[1]), {},
                                                 frame.depth + 1))
            if known(value):
                return value
        target = codebase.imports(rel).get(name)
        if target is not None and target[1] is None and target[0] in ("operator", "functools"):
            return ("module", target[0])
        if target is not None and target[0] == "functools" and target[1] == "partial":
            return Builtin("functools.partial")
        if target is not None and target[0] == "operator" and target[1] in OPERATORS:
            return Builtin("operator." + target[1])
        return frame.unknown(node, "the name %s" % name)

    def attribute(self, node, frame):
        value = self.expr(node.value, frame)
        if isinstance(value, Unknown):
            return value
        if isinstance(value, Instance):
            return self.instance_attribute(value, node.attr, node, frame)
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "module":
            # the marker of an imported stdlib module, never a tuple value of the code
            if value[1] == "functools" and node.attr == "partial":
                return Builtin("functools.partial")
            if value[1] == "operator" and node.attr in OPERATORS:
                return Builtin("operator." + node.attr)
            return frame.unknown(node, construct(node))
        if node.attr in VALUE_METHODS.get(type(value), ()):
            return BoundMethod(value, node.attr)
        if isinstance(node.value, ast.Name):
            resolved = self.codebase.resolve(frame.ref.rel, node.value.id)
            if resolved is not None and resolved[0] == "module":
                where = self.codebase.module_file(resolved[1])
                if where is not None:
                    ref = self.codebase.function(where, node.attr)
                    if ref is not None:
                        return Function(ref)
                    found = self.codebase.constant(where, node.attr)
                    if found is not None:
                        return found[0]
        return frame.unknown(node, construct(node))


MISSING = object()
NO_DEFAULT = object()


def same(a, b):
    try:
        return type(a) is type(b) and a == b
    except Exception:
        return False


class ModuleRef(object):
    """Where a module-level expression is evaluated (a `NAME = functools.partial(...)`):
    its file, and the line its snippet was parsed from."""

    def __init__(self, rel, line):
        self.rel, self.line_offset, self.name = rel, line - 1, "<module>"


def logging_call(node):
    """`logger.debug(...)`, `warnings.warn(...)`: a statement that decides nothing."""
    func = node.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
        func.value.id in ("logger", "log", "logging", "warnings", "_logger")


def find_methods(codebase, source, name):
    """The defs named `name` in `source` (methods with their class, functions), as
    FunctionRefs."""
    out = []
    for line in source.hit_lines(name, True):
        text = source.lines[line - 1].lstrip()
        if not (text.startswith("def " + name) or text.startswith("async def " + name)):
            continue
        cls = source.enclosing_class(line)
        ref = codebase.function(source.rel, name, cls)
        if ref is not None and ref not in out:
            out.append(ref)
    return out


def decide(codebase, sources, function, evaluator=None):
    """Findings of a `decision` finder: for each def of `function`, what it returns for
    DFlash ("true", "false" or "?"), with the line that decided it and, for "?", why.
    `evaluator`: one shared by the finders of a probe run (over the same codebase)."""
    evaluator = evaluator or Evaluator(codebase)
    evaluator.examined = set()
    hits = []
    for source in sources:
        for ref in find_methods(codebase, source, function):
            truth, line, why = evaluator.method_for_dflash(ref)
            where = line or ref.node.lineno + ref.line_offset
            label = "?" if truth is None else ("true" if truth else "false")
            hit = {"file": ref.rel, "line": where,
                   "text": source_line(codebase, ref.rel, where), "function": function,
                   "source": label, "step": "decides"}
            if why is not None:
                hit["why"] = "%s() for DFlash: cannot evaluate %s" % (function, why)
            hits.append(hit)
    return hits, evaluator.examined


def source_line(codebase, rel, line):
    source = codebase.source(rel)
    if source is None or not 0 < line <= len(source.lines):
        return ""
    return source.lines[line - 1].strip()[:200]

