"""The key-offset question: what constant is added to the ids read under a key of a named
container (`dflash_config["target_layer_ids"]`, not DSpark's `hf_config.target_layer_ids`)
on their way out of the function that reads them?

The ids are followed through names, comprehensions, map(lambda), `array + n`, append
loops, and into helpers (same module, `vllm.*` imports, methods) and back, with a step of
evidence at each. Where they leave (returned, stored, or lost in a construct that is not
followed) is a finding; a flow that cannot be followed is a finding of its own (`:?`),
never silence. Values other than ids and constant ints are not tracked: they are EMPTY.
"""

import ast
import re

from fleetcheck.probe.trace.flow import Flow
from fleetcheck.probe.trace.nodes import const_int
from fleetcheck.probe.trace.question import Question
from fleetcheck.probe.trace.state import MAX_FINDINGS
from fleetcheck.probe.trace.values import (EMPTY, IDS_KINDS, NONINT, Container, Ids, Int,
                                           Items, Keyed, Lost, Mapping, as_elements, carries_ids,
                                           flat, with_step)

# builtins whose result is (one of) their argument(s) as a number: ids stay ids
SAME_VALUE = {"int", "float", "round", "abs", "min", "max", "sum"}
CONSTANT_LINE = re.compile(r"(_*[A-Z][A-Z0-9_]*)\s*(?::[^=]*)?=")
CONTAINER_ATOM = Container()
CONTAINER = frozenset([CONTAINER_ATOM])


class KeyOffset(Question):
    """Flows from each function that reads the key; findings by the offset they end at.
    Ids and constant ints go through each flow; anything else is EMPTY, and ids that go
    where the interpreter does not follow are lost (a `:?` finding), never dropped."""

    def __init__(self, key, container=None):
        self.key = key
        self.container = container

    # -- what a construct means for the ids --------------------------------------------
    def unknown(self, flow, node, why):
        return EMPTY

    def constant(self, flow, node, value):
        """An int literal is counted with; no other constant is tracked."""
        if isinstance(value, int) and not isinstance(value, bool):
            return frozenset([Int(value, None)])
        return EMPTY

    def key_read(self, flow, node, base, name):
        if name == self.key and (self.container is None or CONTAINER_ATOM in base):
            return frozenset([Ids(0, (flow.step(node, "read"),))])
        if self.container is not None and name == self.container:
            return CONTAINER
        return None

    def free_name(self, flow, node):
        return CONTAINER if node.id == self.container else EMPTY

    def unbound_attribute(self, flow, node, name, base):
        return frozenset(a for a in base if isinstance(a, Lost))

    def untraced(self, flow, node, value, lost_why, unknown_why):
        return self.lose(flow, value, node, lost_why) if carries_ids(value) else EMPTY

    def unary(self, flow, node, value):
        """`-n` of a constant int is the constant; ids negated are lost."""
        if carries_ids(value):
            return self.lose(flow, value, node, "ids negated or inverted at %s:%d" %
                             (flow.fn.rel, flow.line(node)))
        if value and all(isinstance(a, Int) for a in value) and \
                isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -1 if isinstance(node.op, ast.USub) else 1
            return frozenset(Int(sign * a.value, a.step) for a in value)
        return EMPTY

    def tuple_of(self, flow, node, items):
        """A tuple of ids or of constant ints (`offset, other = 1, 0`), item by item."""
        if all(not carries_ids(i) and not any(isinstance(a, Int) for a in i) for i in items):
            return EMPTY
        return frozenset([Items(items)])

    def arithmetic(self, flow, node, left, op, right, right_node, left_node):
        if isinstance(op, (ast.Add, ast.Sub)):
            sign = 1 if isinstance(op, ast.Add) else -1
            # ids + n, n + ids, ids - n (never n - ids)
            sides = [(left, right_node, right)] + \
                ([(right, left_node, left)] if sign == 1 else [])
            for ids, other_node, other in sides:
                carried = [a for a in ids if isinstance(a, IDS_KINDS)]
                amounts = self.amounts(flow, other_node, other) if carried else None
                if carried and amounts:
                    out = set()
                    for amount, named in amounts:
                        step = flow.step(node, "%+d" % (sign * amount))
                        out |= set(type(a)(a.offset + sign * amount,
                                           a.trail + ((named,) if named else ()) + (step,))
                                   for a in carried)
                    return frozenset(out)
            if isinstance(op, ast.Add) and any(isinstance(a, Ids) for a in left) and \
                    any(isinstance(a, Ids) for a in right):
                return left | right  # list concatenation
        if carries_ids(left) or carries_ids(right):
            return self.lose(flow, left | right, node, "ids combined with a value that is not a "
                             "constant at %s:%d" % (flow.fn.rel, flow.line(node)))
        return EMPTY

    def numeric_call(self, flow, call):
        """int(i), max(ids): an id itself; sum(ids) is none of them."""
        node, func, args = call.node, call.node.func, call.args
        if not (isinstance(func, ast.Name) and args and func.id in SAME_VALUE and
                any(carries_ids(v) for v in args)):
            return None
        if func.id == "sum":
            return self.lose(flow, args[0], node, "ids summed at %s:%d" % (flow.fn.rel,
                                                                     flow.line(node)))
        if func.id in ("min", "max") and len(args) == 1:
            return as_elements(args[0])
        return frozenset().union(*args) if func.id in ("min", "max") else args[0]

    def relevant(self, flow, values):
        return any(carries_ids(v) for v in values)

    def ignored_call(self, flow, node, func, env):
        """A method of the ids themselves (tensor.add(0)): what it returns is not known."""
        if isinstance(func, ast.Attribute):
            receiver = flow.eval(func.value, env)
            if carries_ids(receiver):
                return self.lose(flow, receiver, node, "ids flow into .%s() at %s:%d, which is "
                                 "not followed" % (func.attr, flow.fn.rel, flow.line(node)))
        return EMPTY

    def spread(self, flow, node, expression, value):
        return value

    def unfollowed(self, flow, node, what, why, args, keywords, opaque, func=None):
        """The ids a call that is not followed gets are lost there."""
        step = flow.step(node, "lost")
        values = [flat(v) for v in args + list(keywords.values()) + list(opaque)]
        return frozenset(Lost(a.offset, a.trail + (step,), "ids flow into %s at %s:%d, "
                              "which could not be followed%s"
                              % (what, flow.fn.rel, flow.line(node), why))
                         for value in values for a in value
                         if isinstance(a, IDS_KINDS)) | frozenset(
            a for value in values for a in value if isinstance(a, Lost))

    def not_followed(self, flow, ref, node, args, keywords, why):
        return self.lose(flow, frozenset(a for v in args + list(keywords.values()) for a in v),
                         node, "ids flow into %s() at %s:%d, not followed (%s)"
                         % (ref.name, flow.fn.rel, flow.line(node), why))

    def passed(self, flow, step, value):
        return frozenset(with_step(a, step) for a in value)

    def spare(self, flow, node, ref, values):
        """Ids passed beyond a function's parameters are lost there, never dropped."""
        if not any(carries_ids(v) for v in values):
            return EMPTY
        return self.lose(flow, frozenset().union(*values), node, "ids passed to %s() at %s:%d "
                         "beyond its parameters" % (ref.name, flow.fn.rel, flow.line(node)))

    def bound(self, flow, value):
        """A name that holds no int on some path is not a constant."""
        if not any(isinstance(a, Int) for a in value):
            return value | frozenset([NONINT])
        return value

    def stored(self, flow, node, value, name):
        if carries_ids(value):
            self.end(flow.state, frozenset(a for a in value if not isinstance(a, Container)),
                       flow.step(node, "stored"),
                       "stored on %s" % name if name else "stored in a subscript")

    def discarded(self, flow, node, value):
        lost = frozenset(atom for atom in value if isinstance(atom, Lost))
        if lost:
            self.end(flow.state, lost, flow.step(node, "lost"))

    def leaving(self, flow, node, value):
        if flow.depth == 0:
            self.end(flow.state, value, flow.step(node, "return"))

    def default_value(self, flow, node):
        """A default named by an int constant is that constant."""
        value = flow.eval(node, {})
        if not any(isinstance(a, Int) for a in value) and \
                isinstance(node, (ast.Name, ast.Attribute)):
            found = flow.named_constant(node)
            if found is not None and isinstance(found[0], int) and \
                    not isinstance(found[0], bool):
                return frozenset([Int(found[0], found[1])])
        return value

    def lose(self, flow, value, node, why):
        step = flow.step(node, "lost")
        value = flat(value)
        return frozenset(Lost(a.offset, a.trail + (step,), why) for a in value
                         if isinstance(a, IDS_KINDS)) | \
            frozenset(a for a in value if isinstance(a, Lost))

    def amounts(self, flow, node, value):
        """(n, step naming it or None) for each constant int the operand may be on the
        paths that reach here; None when it is not a constant on every path."""
        literal = const_int(node) if node is not None else None
        if literal is not None:
            return [(literal, None)]
        if value and all(isinstance(a, Int) for a in value):
            return [(a.value, a.step) for a in value]
        if not value and isinstance(node, (ast.Name, ast.Attribute)):
            found = flow.named_constant(node)
            if found is not None and isinstance(found[0], int) and \
                    not isinstance(found[0], bool):
                return [found]
        return None

    # -- where flows start, what is found ----------------------------------------------
    def examine(self, state, source):
        """One flow per function around the key's occurrences in a file."""
        state.examined.add(source.rel)
        lines = source.hit_lines(self.key)
        for line in list(lines):
            # the key named by a module constant: the functions reading that name
            named = CONSTANT_LINE.match(source.lines[line - 1])
            if named and source.lines[line - 1].rstrip().endswith(("'%s'" % self.key,
                                                                    '"%s"' % self.key)):
                lines += source.hit_lines(named.group(1), True)
        for _, ref in state.functions_around(source, lines):
            Flow(state, ref, self.entry_env(state, ref), 0, (ref.key,)).run()

    def entry_env(self, state, ref):
        """Parameters hold their defaults (a parameter named like the container is the
        container)."""
        defaults = ref.defaults()
        flow = Flow(state, ref, {}, 0, ())
        return dict((name, self.default_value(flow, defaults[name]) if name in defaults
                     else EMPTY) for name in ref.params() if name != self.container)

    def end(self, state, value, step, stored=None):
        """Ids leaving a flow (returned, stored, or lost in a call): a finding each.
        `stored` names where ids were stored for other code to read (not followed)."""
        for atom in value:
            if isinstance(atom, Items):
                for item in atom.items:
                    self.end(state, item, step, stored)
            elif isinstance(atom, Keyed):
                for _, item in atom.items:
                    self.end(state, item, step, stored)
            elif isinstance(atom, IDS_KINDS):
                trail = atom.trail + ((step,) if step[:2] != atom.trail[-1][:2] else ())
                if stored:
                    self.add_finding(state, "?", trail, "ids (%+d so far) are %s at %s:%d and read "
                                     "elsewhere, which is not followed"
                                     % (atom.offset, stored, step[0], step[1]), stored=True)
                else:
                    self.add_finding(state, atom.offset, trail)
            elif isinstance(atom, Lost):
                self.add_finding(state, "?", atom.trail, atom.why)
            elif isinstance(atom, Mapping):
                # a dict keyed by layer leaving the flow: which of its keys and values
                # the reader takes is not followed
                for inner in flat(atom.keys) | flat(atom.values):
                    if isinstance(inner, IDS_KINDS):
                        self.add_finding(state, "?", inner.trail + (atom.step, step),
                                         "ids kept in a dict comprehension at %s:%d leave "
                                         "it at %s:%d; which of its keys or values is read "
                                         "is not followed" % (atom.step[:2] + step[:2]))
                    elif isinstance(inner, Lost):
                        self.add_finding(state, "?", inner.trail, inner.why)

    def finish(self, state):
        """Ids stored on an object are only a loss when their read reaches no other end
        of the flow (a value kept on self and also returned is judged by the return)."""
        ended = set((f["trail"][0]["file"], f["trail"][0]["line"]) for f in state.findings
                    if not f.get("stored"))
        state.findings = [f for f in state.findings if not f.get("stored") or
                         (f["trail"][0]["file"], f["trail"][0]["line"]) not in ended]
        for finding in state.findings:
            finding.pop("stored", None)
        # in a fixed order: flows meet helpers and overrides through sets, whose order
        # changes with the interpreter's hash seed, and the first few of a label are the
        # ones sent (the lead's analysis must equal the controller's, the golden its own)
        state.findings.sort(key=finding_order)
        return state.findings

    def add_finding(self, state, offset, trail, why=None, stored=False):
        if len(state.findings) >= MAX_FINDINGS:
            return
        if offset == "?":
            decisive = trail[-1]
        else:
            shifts = [s for s in trail if s[2].startswith(("+", "-"))]
            decisive = shifts[-1] if shifts else trail[0]
        entry = {"offset": offset, "file": decisive[0], "line": decisive[1],
                 "text": decisive[3], "step": decisive[2],
                 "trail": [{"file": s[0], "line": s[1], "step": s[2], "text": s[3]}
                           for s in trail]}
        if why:
            entry["why"] = why
        if stored:
            entry["stored"] = True
        if entry not in state.findings:
            state.findings.append(entry)


def finding_order(finding):
    return (finding["file"] or "", finding["line"] or 0, str(finding["offset"]),
            finding["step"] or "", finding["text"] or "", finding.get("why") or "",
            [(s["file"], s["line"], s["step"], s["text"]) for s in finding["trail"]])
