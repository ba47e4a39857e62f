"""Calls, for one flow: each kind of call the interpreter knows, tried in order
(getattr, .get, functools.partial, dict(), pass-through builtins, map, operator.*, the
question's own, builtins that only observe, logging, collections filled in place,
lambdas), else into the function of the tree it reaches (and each override of a method)
with its arguments bound to the def's parameters, and its return value back out."""

import ast
from collections import namedtuple

from fleetcheck.probe.codebase import callee_name, dotted_name
from fleetcheck.probe.trace.nodes import const_str, is_log_call
from fleetcheck.probe.trace.state import MAX_CALL_DEPTH
from fleetcheck.probe.trace.values import (EMPTY, Items, Keyed, Kwargs, Lambda, Mapping,
                                           Param, Partial, as_collection, as_elements,
                                           carries_ids, iterated, keyed, sources_in,
                                           with_key)

OPERATOR_ARITHMETIC = {"add": ast.Add, "iadd": ast.Add, "sub": ast.Sub, "isub": ast.Sub}
PASS_THROUGH_CALLS = {"tuple", "list", "sorted", "set", "frozenset", "reversed"}
PASS_THROUGH_METHODS = {"array", "asarray", "tensor", "as_tensor", "copy", "tolist",
                        "clone", "astype"}
# builtins whose result says something about their arguments but carries no ids
OBSERVERS = {"len", "isinstance", "bool", "str", "repr", "print", "type", "id", "hash",
             "any", "all", "min", "max", "sum", "int", "float", "range", "issubclass",
             "callable", "hasattr", "format", "abs", "round"}
MUTATORS = {"append", "extend", "insert", "add", "update"}
PARTIAL = {"partial", "functools.partial"}
MAPPING_VIEWS = {"values", "keys", "items", "get"}


class Calls(object):
    """The call half of a Flow (flow.py)."""

    def eval_Call(self, node, env):
        args = []
        for argument in node.args:
            value = self.eval(argument, env)
            spread = unpacked_tuple(value) if isinstance(argument, ast.Starred) else None
            if spread is not None:
                args.extend(spread)  # f(*(ids, 1)): each item in its own position
            else:
                args.append(value)
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
        self.q.at_call(self, call)
        for kind in (self.getattr_call, self.mapping_view, self.get_call, self.partial_built,
                     self.dict_call, self.named_call, self.pass_through_call, self.map_call,
                     self.operator_call, self.numeric_call, self.observer_call, self.log_call,
                     self.dict_filled, self.kwargs_changed, self.collection_filled,
                     self.lambda_call, self.partial_call):
            value = kind(call)
            if value is not None:
                return value
        if not self.q.relevant(self, args + list(keywords.values()) + opaque):
            return self.q.ignored_call(self, node, node.func, env)
        return self.followed_call(call)

    def named_call(self, call):
        return self.q.named_call(self, call)

    def numeric_call(self, call):
        return self.q.numeric_call(self, call)

    def getattr_call(self, call):
        node, func = call.node, call.node.func
        if not (isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2) \
                or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        attribute = self.key_name(node.args[1])
        if attribute is not None:
            found = self.q.key_read(self, node, call.args[0], attribute)
            if found is not None:
                return found
            if len(node.args) == 3 and not node.keywords:
                found = self.own_attribute(node, attribute, call.args[2])
                if found is not None:
                    return found
        return self.q.unknown(self, node, "getattr(%s, %s) at %s:%d" % (
            dotted_name(node.args[0]) or "a value", attribute and repr(attribute) or "a name",
            self.fn.rel, self.line(node)))

    def own_attribute(self, node, name, default):
        """`getattr(self, "name", default)` resolved against the class `self` is: a
        class-level constant of the class or its bases, else the default when the class
        and its bases cannot have the name; either only when no other line of the finder's
        files (or the class's) names it outside a getattr/hasattr read (a subclass
        setting it, `runner.name = ...`, `setattr`): None when it may be set."""
        receiver = node.args[0]
        if not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls") and
                self.self_cls):
            return None
        rel, cls = self.self_cls
        codebase = self.state.codebase
        found = codebase.class_constant(rel, cls, name)
        skip = {(found[1], found[2])} if found is not None else set()
        files = sorted(set(self.state.files) | {rel} | {r for r, _ in skip})
        if any(codebase.names_outside_reads(other, name, skip) for other in files) or any(
                codebase.declares(r, c, name, inherited=False)  # setattr, __getattr__, ...
                for r, c in codebase.subclasses(rel, cls, files)):
            return None
        if found is not None:
            self.state.examined.add(found[1])
            return self.q.constant(self, node, found[0])
        if codebase.method(rel, cls, name) is None and not codebase.declares(rel, cls, name):
            return default
        return None

    def mapping_view(self, call):
        """`d.values()`, `d.keys()`, `d.items()`, `d.get(k)` of a dict keyed by layer
        (values.Mapping) held by a name or built in place; what else the name may hold
        is not followed."""
        node, func = call.node, call.node.func
        if not (isinstance(func, ast.Attribute) and func.attr in MAPPING_VIEWS):
            return None
        if isinstance(func.value, ast.Name) and func.value.id in call.env:
            receiver = call.env[func.value.id]
        elif isinstance(func.value, ast.DictComp):
            receiver = self.eval(func.value, call.env)
        else:
            return None
        mappings = [a for a in receiver if isinstance(a, Mapping)]
        if not mappings or (func.attr == "get") != bool(node.args):
            return None
        out = set()
        for atom in mappings:
            if func.attr == "values":
                out |= as_collection(atom.values)
            elif func.attr == "keys":
                out |= as_collection(atom.keys)
            elif func.attr == "items":
                out.add(Items((frozenset([Items((atom.keys, atom.values))]),)))
            else:
                out |= atom.values | (call.args[1] if len(call.args) > 1 else EMPTY)
        others = frozenset(a for a in receiver if not isinstance(a, Mapping))
        if carries_ids(others):
            out |= self.q.untraced(self, node, others, "ids in .%s() of a value that is not "
                                   "a dict keyed by layer at %s:%d" % (
                                       func.attr, self.fn.rel, self.line(node)),
                                   ".%s()" % func.attr)
        return frozenset(out)

    def get_call(self, call):
        """`x.get(key, default)`: a key the question reads, or a dict of known keys."""
        node, func, args = call.node, call.node.func, call.args
        if not (isinstance(func, ast.Attribute) and func.attr == "get" and node.args) or \
                any(isinstance(a, ast.Starred) for a in node.args):
            return None
        key = self.key_name(node.args[0])
        base = self.eval(func.value, call.env)
        if key is None:
            return None
        found = self.q.key_read(self, node, base, key)
        if found is not None:
            return self.q.read_with_default(self, found, args)
        dicts = [a for a in base if isinstance(a, Keyed)]
        if not dicts or len(dicts) != len(base):
            return None
        out = set()
        for atom in dicts:
            held = dict(atom.items)
            out |= held[key] if key in held else \
                (args[1] if len(args) > 1 else self.q.constant(self, node, None))
        return frozenset(out)

    def partial_built(self, call):
        node = call.node
        if not (dotted_name(node.func) in PARTIAL and node.args) or \
                any(isinstance(a, ast.Starred) for a in node.args):
            return None
        self.state.partials.append((self, node.args[0], tuple(call.args[1:]),
                                dict(call.keywords)))
        return frozenset([Partial(len(self.state.partials) - 1)])

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
            return as_collection(iterated(args[0]))
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
        return self.q.arithmetic(self, node, call.args[0], op(), call.args[1], node.args[1],
                               node.args[0])

    def stdlib_name(self, func, module):
        """The attribute of standard-library `module` that `func` names (`operator.add`
        with `import operator`, `op.add` with `import operator as op`, `add` from
        `from operator import add`), or None. A file's imports are parsed only when it
        imports the module in some form (their parse costs every host)."""
        if not (isinstance(func, ast.Name) or isinstance(func, ast.Attribute) and
                isinstance(func.value, ast.Name)):
            return None
        mentions = self.state.stdlib_mentions
        key = (self.fn.rel, module)
        if key not in mentions:
            source = self.state.codebase.source(self.fn.rel)
            mentions[key] = (source is not None and source.contains("import " + module),
                             source is not None and source.contains("from " + module))
        imported, named = mentions[key]
        if isinstance(func, ast.Attribute):
            if not imported:
                return None
            if func.value.id == module and not named:
                return func.attr  # `import operator` and operator.add: no parse needed
            target = self.state.codebase.imports(self.fn.rel).get(func.value.id)
            return func.attr if target == (module, None) else None
        if not named:
            return None  # no `from operator import ...` in the file
        target = self.state.codebase.imports(self.fn.rel).get(func.id)
        return target[1] if target is not None and target[0] == module else None

    def map_call(self, call):
        """map(f, xs) and map(f, xs, ys): f applied to the elements, gathered; f a
        lambda, a functools.partial, a function of the tree or operator.add/sub (with
        itertools.repeat(n) standing for n at every element). Another f is a call like
        any (its ids are lost there)."""
        func, args, node = call.node.func, call.args, call.node
        if not (isinstance(func, ast.Name) and func.id == "map" and len(args) in (2, 3)) or \
                "map" in call.env or call.keywords or \
                any(isinstance(a, ast.Starred) for a in node.args):
            return None
        elements = [self.elements_of(n, v, call.env) for n, v in zip(node.args[1:], args[1:])]
        lambdas = [a for a in args[0] if isinstance(a, Lambda)]
        if lambdas and len(elements) == 1:
            out = set()
            for atom in lambdas:
                out |= as_collection(self.apply_lambda(atom.index, elements[0], node))
            return frozenset(out)
        partials = [self.state.partials[a.index] for a in args[0] if isinstance(a, Partial)]
        if partials and len(partials) == len(args[0]):
            out = set()
            for flow, target, bound, bound_keywords in partials:
                value = flow.applied(target, list(bound) + elements, dict(bound_keywords), node)
                if value is None:
                    return None
                out |= as_collection(value)
            return frozenset(out)
        if args[0] and not isinstance(node.args[0], (ast.Name, ast.Attribute)) or \
                isinstance(node.args[0], ast.Name) and node.args[0].id in call.env:
            return None  # a computed function, or a local name bound to one
        value = self.applied(node.args[0], elements, {}, node)
        return as_collection(value) if value is not None else None

    def elements_of(self, node, value, env):
        """What iterating over an argument of map() yields; itertools.repeat(x) and
        [x] * n yield x."""
        if isinstance(node, ast.Call) and self.stdlib_name(node.func, "itertools") == "repeat" \
                and len(node.args) >= 1 and not node.keywords:
            return self.eval(node.args[0], env)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for display, count in ((node.left, node.right), (node.right, node.left)):
                if isinstance(display, (ast.List, ast.Tuple)) and len(display.elts) == 1 and \
                        not isinstance(display.elts[0], ast.Starred):
                    self.eval(count, env)
                    return self.eval(display.elts[0], env)
        return as_elements(value)

    def applied(self, target, args, keywords, node):
        """The value of the function expression `target` (of this flow) called with these
        argument values: operator.add/sub as + and -, a function of the tree followed;
        None when it is neither."""
        op = OPERATOR_ARITHMETIC.get(self.stdlib_name(target, "operator"))
        if op is not None:
            if len(args) != 2 or keywords:
                return None
            return self.q.arithmetic(self, node, args[0], op(), args[1], None, None)
        ref, _ = self.names.callee(target, local_only=self.q.local_callees_only)
        if ref is None:
            return None
        return self.follow(ref, node, args, keywords,
                           self.instance_class(target) if ref.cls is not None else None)

    def instance_class(self, func):
        """The class `self` is in a method that `self.m`, `cls.m` or `super().m` reaches:
        this flow's own (super() reaches a base's def, but `self` there is still this
        instance, so its `self.n()` calls dispatch on it); None for another receiver."""
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls") or \
                isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and \
                receiver.func.id == "super":
            return self.self_cls
        return None

    def observer_call(self, call):
        func = call.node.func
        if not (isinstance(func, ast.Name) and func.id in OBSERVERS):
            return None
        return sources_in(frozenset().union(*call.args)) or \
            self.q.constant(self, call.node, func.id + "()")

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
                    held[key] = args[1] if len(args) > 1 else self.q.constant(self, node, None)
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

    def kwargs_changed(self, call):
        """`kwargs.pop("x", d)` on a **kwargs parameter: "x" is no longer passed on, and
        the call's value is what the callers pass under it (or d); any other method that
        changes it (update, setdefault, clear, popitem) leaves its keys unknown."""
        func, env = call.node.func, call.env
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and
                func.attr in ("pop", "update", "setdefault", "clear", "popitem") and
                any(isinstance(a, Kwargs) for a in env.get(func.value.id, EMPTY))):
            return None
        node, name = call.node, func.value.id
        key = const_str(node.args[0]) if func.attr == "pop" and node.args else None
        if key is None:
            env[name] = self.q.unknown(self, node, "%s.%s() of keyword arguments"
                                       % (name, func.attr))
            return self.q.unknown(self, node, "%s.%s()" % (name, func.attr))
        default = call.args[1] if len(call.args) > 1 else EMPTY
        taken = set()
        for atom in env[name]:
            if isinstance(atom, Kwargs):
                known = dict(atom.known)
                taken |= known[key] if key in known else frozenset([Param(atom.ref, key, None)])
            elif isinstance(atom, Keyed):  # a dict bound on another path
                taken |= dict(atom.items).get(key, default)
            else:
                taken |= self.q.unknown(self, node, "%s.pop(%r)" % (name, key))
        env[name] = with_key(env[name], key, self.q.constant(self, node, "not passed"))
        return frozenset(taken) | default

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
        if not (partials and (self.q.relevant(self, args + list(keywords.values()) + opaque) or any(
                carries_ids(v) for p in partials for v in list(p[2]) + list(p[3].values())))):
            return None
        out = set()
        for flow, target, bound, bound_keywords in partials:
            ref, why = flow.names.callee(target)
            if ref is None:
                out |= self.q.unfollowed(self, node, "functools.partial of %s" % (
                    dotted_name(target) or "a computed function"), why,
                    list(bound) + args, dict(bound_keywords, **keywords), opaque)
                continue
            out |= self.follow(ref, node, list(bound) + args, dict(bound_keywords, **keywords))
        return frozenset(out)

    def followed_call(self, call):
        """A call of a function of the tree: into it (and into each override of a
        method), else the question's value of a call not followed."""
        node, func = call.node, call.node.func
        ref, why = self.names.callee(func, local_only=self.q.local_callees_only)
        if ref is not None:
            result = self.follow(ref, node, call.args, call.keywords)
            for override, cls in self.names.overrides(func, ref, self.state.files):
                result = result | self.follow(override, node, call.args, call.keywords, cls)
            return result
        return self.q.unfollowed(self, node, "%s()" % (dotted_name(func) or call.name or
                                               "a computed function"), why, call.args,
                               call.keywords, call.opaque, func)

    # -- keywords through dicts, partials -------------------------------------------
    def spread_keywords(self, node, spread, keywords):
        """`**kwargs` of dicts with known keys become keywords (a key some paths leave
        out is, on those paths, not passed); the values of other `**` spreads, which
        may hold any keyword, are returned."""
        opaque = []
        for expression, value in spread:
            kwargs = [a for a in value if isinstance(a, Kwargs)]
            if kwargs and len(kwargs) == len(value):
                # a **kwargs parameter passed on: the keys set here (on a path that did
                # not set one, what the callers pass under it), and the rest as the
                # callers pass them (the question reads which key it wants)
                for key in sorted(set(k for atom in kwargs for k, _ in atom.known)):
                    for atom in kwargs:
                        held = dict(atom.known).get(key)
                        keywords[key] = keywords.get(key, EMPTY) | (
                            held if held is not None else frozenset([Param(atom.ref, key, None)]))
                opaque.append(frozenset(kwargs))
                continue
            dicts = [a for a in value if isinstance(a, Keyed)]
            if len(dicts) != len(value) or not dicts:
                opaque.append(self.q.spread(self, node, expression, value))
                continue
            keys = set(k for d in dicts for k, _ in d.items)
            for key in sorted(keys):
                held = [dict(d.items).get(key) for d in dicts]
                value = frozenset().union(*[h for h in held if h is not None])
                if any(h is None for h in held):
                    value = value | self.q.constant(self, node, "not passed")
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
                    self.state.codebase.function(self.fn.rel, func.id) is None:
                found = self.state.codebase.module_assignment(self.fn.rel, func.id)
                if found is not None and isinstance(found[0], ast.Call) and \
                        dotted_name(found[0].func) in PARTIAL:
                    value = self.spawn(self.fn, {}, self.depth, self.stack).eval(found[0], {})
        else:
            return []
        return [self.state.partials[a.index] for a in value if isinstance(a, Partial)]


    def follow(self, ref, node, args, keywords, self_cls=None):
        """Into a helper with the argument values, and its return value back out.
        self_cls: the class `self` is in the helper (an override's own class)."""
        if self_cls is None and ref.cls is not None:
            self_cls = self.instance_class(node.func)
        if self.depth >= MAX_CALL_DEPTH or ref.key in self.stack:
            why = "depth limit" if self.depth >= MAX_CALL_DEPTH else "recursion"
            return self.q.not_followed(self, ref, node, args, keywords, why)
        step = self.step(node, "call")
        args = [self.q.passed(self, step, v) for v in args]
        keywords = dict((k, self.q.passed(self, step, v)) for k, v in keywords.items())
        params = ref.params()
        defaults = ref.defaults()
        env = {}
        definer = self.spawn(ref, {}, self.depth + 1, self.stack, self_cls)
        keyword_only = [a.arg for a in ref.node.args.kwonlyargs]  # after `*` or `*args`
        for index, name in enumerate(params + keyword_only):
            if index < len(params) and index < len(args):
                env[name] = args[index]
            elif name in keywords:
                env[name] = keywords[name]
            elif name in defaults:
                env[name] = self.q.default_value(definer, defaults[name])
            else:
                env[name] = EMPTY
        spare = self.spare_arguments(ref, params + keyword_only, args, keywords, env, node,
                                     len(params))
        key = (ref.key, self_cls, tuple(sorted(env.items(), key=lambda item: item[0])))
        if key not in self.state.memo:
            self.state.examined.add(ref.rel)
            self.state.memo[key] = EMPTY  # a cycle through the memo sees nothing
            flow = self.spawn(ref, env, self.depth + 1, self.stack + (ref.key,), self_cls)
            result = flow.run()
            if not result:
                result = self.q.constant(self, node, None)
            self.state.memo[key] = result
        return self.state.memo[key] | spare

    def spare_arguments(self, ref, params, args, keywords, env, node, positional):
        """Arguments no named parameter takes (beyond the `positional` first, by a
        keyword none of `params` names): into *args / **kwargs when the function has
        them, else the question's `spare` value."""
        extra = args[positional:]
        unmatched = dict((k, v) for k, v in keywords.items() if k not in params)
        signature = ref.node.args
        if signature.vararg is not None:
            env[signature.vararg.arg] = frozenset([Items(tuple(extra))])
            extra = []
        if signature.kwarg is not None:
            env[signature.kwarg.arg] = frozenset([keyed(tuple(unmatched.items()))])
            unmatched = {}
        return self.q.spare(self, node, ref, list(extra) + list(unmatched.values()))


def unpacked_tuple(value):
    """The items of a value that is, on every path, a tuple of one known length (as a
    `*spread` passes them), or None."""
    lengths = set(len(atom.items) if isinstance(atom, Items) else -1 for atom in value)
    if len(lengths) != 1 or -1 in lengths:
        return None
    count = lengths.pop()
    return [frozenset().union(*[atom.items[index] for atom in value])
            for index in range(count)]


# one call being evaluated: its node, callee name, argument values (`opaque`: those of
# `**` spreads that may hold any keyword) and the env it is evaluated in
CallSite = namedtuple("CallSite", ["node", "name", "args", "keywords", "opaque", "env"])
