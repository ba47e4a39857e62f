"""One flow: the abstract execution of one function, names (and self.attributes) to
values, for the question its trace asks. Statements, expressions, calls and path
conditions each live in a module of their own; this joins them."""

from fleetcheck.probe.codebase import Scope
from fleetcheck.probe.patterns import evidence_text
from fleetcheck.probe.trace.calls import Calls
from fleetcheck.probe.trace.expressions import Expressions
from fleetcheck.probe.trace.paths import Paths
from fleetcheck.probe.trace.statements import Statements


class Flow(Statements, Expressions, Calls, Paths):
    """`watching`: what the question watches in this flow (value-source: the calls whose
    argument it records); a helper's flow watches nothing."""

    def __init__(self, state, fn, env, depth, stack, self_cls=None, watching=()):
        self.state = state
        self.q = state.question
        self.fn = fn
        # the class `self` is known to be (or derive from): where self.m() is looked up
        self.self_cls = self_cls or fn.cls
        self.entry = env
        self.depth = depth
        self.stack = stack
        self.watching = watching
        self.returns = set()
        self.local_defs = {}
        self.control = []
        self.lambdas = []
        self.source = state.codebase.source(fn.rel)
        self.names = Scope(state.codebase, fn, self.self_cls, self.local_defs)

    def spawn(self, fn, env, depth, stack, self_cls=None):
        return Flow(self.state, fn, env, depth, stack, self_cls)

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
