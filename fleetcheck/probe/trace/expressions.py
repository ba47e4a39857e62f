"""Python's expressions over abstract values, for one flow: names, attributes and keys
(what the question reads, `key_read`), subscripts, displays and dicts of string keys
(keywords passed as `**kwargs`), comprehensions and lambdas; an expression it does not
follow is the question's `untraced`."""

import ast

from fleetcheck.probe.codebase import dotted_name
from fleetcheck.probe.trace.nodes import const_int, const_str, subscript_index
from fleetcheck.probe.trace.values import (EMPTY, Deferred, Elem, Ids, Items, Keyed, Lambda,
                                           Lost, Mapping, Param, Source, Unknown,
                                           as_collection, as_elements, carries_ids, join,
                                           keyed, sources_in)


class Expressions(object):
    """The expression half of a Flow (flow.py)."""

    def eval(self, node, env):
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            inner = EMPTY
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    inner = inner | self.eval(child, env)
            return self.q.untraced(self, node, inner, "ids in a %s expression at %s:%d, which is "
                                 "not followed" % (type(node).__name__, self.fn.rel,
                                                   self.line(node)),
                                 "%s expression" % type(node).__name__)
        return method(node, env)

    def eval_Yield(self, node, env):
        """A generator's elements are what it returns."""
        value = as_collection(self.eval(node.value, env)) if node.value is not None else EMPTY
        self.q.leaving(self, node, value)
        self.returns |= value
        return EMPTY

    def eval_YieldFrom(self, node, env):
        value = self.eval(node.value, env)
        self.q.leaving(self, node, value)
        self.returns |= value
        return EMPTY

    def eval_Constant(self, node, env):
        return self.q.constant(self, node, node.value)

    def eval_JoinedStr(self, node, env):
        for value in node.values:
            self.eval(value, env)
        return self.q.constant(self, node, "f-string")

    def eval_FormattedValue(self, node, env):
        self.eval(node.value, env)
        return EMPTY

    def eval_Name(self, node, env):
        if node.id in env:
            return env[node.id]
        return self.q.free_name(self, node)

    def eval_Attribute(self, node, env):
        name = dotted_name(node)
        if name is not None and name in env:
            return env[name]
        base = self.eval(node.value, env)
        found = self.q.key_read(self, node, base, node.attr)
        if found is not None:
            return found
        return self.q.unbound_attribute(self, node, name, base)

    def eval_Subscript(self, node, env):
        base = self.eval(node.value, env)
        index = subscript_index(node)
        key = self.key_name(index)
        if key is not None:
            found = self.q.key_read(self, node, base, key)
            if found is not None:
                return found
        else:
            self.eval(index, env)
        out = subscripted(base, const_int(index), key, isinstance(index, ast.Slice))
        return out or self.q.unknown(self, node, "a subscript")

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
        return sources_in(frozenset().union(*values)) or self.q.constant(self, node, "comparison")

    def eval_UnaryOp(self, node, env):
        return self.q.unary(self, node, self.eval(node.operand, env))

    def eval_BinOp(self, node, env):
        return self.binop(node, self.eval(node.left, env), node.op, node.right, env,
                          left_node=node.left)

    def binop(self, node, left, op, right_node, env, left_node=None):
        right = self.eval(right_node, env)
        return self.q.arithmetic(self, node, left, op, right, right_node, left_node)

    def eval_Tuple(self, node, env):
        return self.q.tuple_of(self, node, tuple(self.eval(e, env) for e in node.elts))

    def eval_List(self, node, env):
        out = set()
        for element in node.elts:
            out |= as_collection(self.eval(element, env))
        return frozenset(out) or self.q.constant(self, node, [])

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
        return self.q.untraced(self, node, carried, "ids kept in a dict at %s:%d whose keys are "
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
            return self.q.untraced(self, node, iterated, "ids in a nested comprehension at %s:%d, "
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
        """A dict comprehension keyed by layer (`{i: i + 1 for i in ids}`) is a Mapping
        of what one key and one value hold, when either carries ids; any other is not
        followed."""
        if len(node.generators) == 1:
            generator = node.generators[0]
            inner = dict(env)
            self.assign(generator.target, as_elements(self.eval(generator.iter, env)), inner,
                        node)
            for condition in generator.ifs:
                self.eval(condition, inner)
            values = self.eval(node.value, inner)
            keys = self.eval(node.key, inner)
            if carries_ids(keys) or carries_ids(values):
                return frozenset([Mapping(keys, values, self.step(node, "dict"))])
            value = as_collection(values)
        else:
            value = self.comprehension(node, env, node.value)
        return self.q.untraced(self, node, value, "ids kept in a dict comprehension at %s:%d"
                               % (self.fn.rel, self.line(node)), "a dict comprehension")

    def apply_lambda(self, index, argument, node):
        lam, env = self.lambdas[index]
        params = [a.arg for a in lam.args.args]
        inner = dict(env)
        if params:
            inner[params[0]] = argument
        return self.eval(lam.body, inner)


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
        elif isinstance(atom, Mapping):
            out |= atom.values
        elif isinstance(atom, Lost):
            out.add(atom)  # ids lost stay lost, whatever is read from them
        elif isinstance(atom, (Source, Unknown, Deferred, Param)):
            out.add(atom)
    return frozenset(out)
