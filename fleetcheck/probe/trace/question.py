"""What a question over the tree is: an object the interpreter is given, never a subclass
of it. It says where flows start (`examine`) and what its findings are (`finish`), and
what each construct means for it through the hooks below; each hook is given the flow
asking (`flow.fn`, `flow.step(node, kind)`, `flow.eval(node, env)`, `flow.state`).
The defaults are what most questions want; a question overrides only what it counts."""

from fleetcheck.probe.trace.values import EMPTY, Items


class Question(object):
    # only the module's own functions are followed into (value-source reads no module
    # for a call whose value may never reach the argument; see values.Deferred)
    local_callees_only = False

    # -- where flows start, what is found ---------------------------------------------
    def examine(self, state, source):
        """Run the question's flows over one file holding the finder's needle."""
        raise NotImplementedError

    def finish(self, state):
        """The findings, once every file has been examined."""
        return state.findings

    # -- values the question gives constructs -------------------------------------------
    def unknown(self, flow, node, why):
        """A value that cannot be traced."""
        raise NotImplementedError

    def constant(self, flow, node, value):
        """A constant (a literal, or what a construct such as a comparison yields)."""
        raise NotImplementedError

    def key_read(self, flow, node, base, name):
        """A read of a named key/attribute/method the question looks for, or None."""
        raise NotImplementedError

    def named_call(self, flow, call):
        """A call the question reads by its name alone (`spec.use_eagle()`), or None."""
        return None

    def untraced(self, flow, node, value, lost_why, unknown_why):
        """An expression the interpreter does not follow, `value` what flows into it."""
        raise NotImplementedError

    def unbound_attribute(self, flow, node, name, base):
        """`x.attr` with no value bound here."""
        raise NotImplementedError

    def free_name(self, flow, node):
        """A name with no value bound in the function."""
        return self.unknown(flow, node, "%s is not assigned in %s()" % (node.id, flow.fn.name))

    def arithmetic(self, flow, node, left, op, right, right_node, left_node):
        """`left op right`: by default what either side holds."""
        return left | right

    def unary(self, flow, node, value):
        """`-x`, `not x`: by default what x holds."""
        return value

    def tuple_of(self, flow, node, items):
        """A tuple display, item by item."""
        return frozenset([Items(items)])

    def read_with_default(self, flow, found, args):
        """`.get(key, default)` of a key the question reads."""
        return found

    def numeric_call(self, flow, call):
        """A builtin of numbers (`int(i)`, `max(ids)`), or None."""
        return None

    def relevant(self, flow, values):
        """Does a call with these values need following?"""
        return True

    def ignored_call(self, flow, node, func, env):
        """The value of a call that is not relevant."""
        return EMPTY

    def spread(self, flow, node, expression, value):
        """The value of a `**` spread that may hold any keyword."""
        raise NotImplementedError

    def unfollowed(self, flow, node, what, why, args, keywords, opaque, func=None):
        """The value of a call whose callee is not followed."""
        raise NotImplementedError

    def not_followed(self, flow, ref, node, args, keywords, why):
        """The value of a call of `ref` cut off (depth limit, recursion)."""
        raise NotImplementedError

    def passed(self, flow, step, value):
        """A value as a helper's parameter receives it at the call `step`."""
        return value

    def spare(self, flow, node, ref, values):
        """Arguments no parameter of `ref` takes."""
        return EMPTY

    def bound(self, flow, value):
        """A value as a plain name holds it."""
        return value

    # -- what the question sees happen --------------------------------------------------
    def stored(self, flow, node, value, name):
        """A value stored on an attribute or in a subscript (`name`: which, if known)."""

    def discarded(self, flow, node, value):
        """The value of an expression statement."""

    def leaving(self, flow, node, value):
        """A value returned (or yielded) by the function."""

    def at_call(self, flow, call):
        """Every call evaluated, before its value is known."""

    def default_value(self, flow, node):
        """A parameter's default, evaluated where the function is defined."""
        return flow.eval(node, {})
