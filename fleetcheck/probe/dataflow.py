"""Dataflow over vLLM's code, for what a grep cannot prove.

key-offset: the constant added to the ids read under a key of a named container
(`dflash_config["target_layer_ids"]`, not DSpark's `hf_config.target_layer_ids`) on their
way out of the function that reads them: through names, comprehensions, map(lambda),
`array + n`, append loops, and into helpers (same module, `vllm.*` imports, methods) and
back, with a step of evidence at each. A flow that cannot be followed is a finding of its
own (`:?`), never silence.

value-source: what reaches one argument of a call (Attention's per_layer_sliding_window,
the KV cache manager's block-drop flag): a read of a named config key or method, a
constant, or something that cannot be traced. Flow-sensitive (a later assignment replaces
an earlier one; branches merge), through tuple unpacking, helpers of the module, and back
from a parameter to the module's call sites.

Values are frozensets of atoms (tuples). Steps of evidence are (file, line, step, text).
"""

import ast
import re

from fleetcheck.probe import conditions
from fleetcheck.probe.codebase import FunctionRef
from fleetcheck.probe.patterns import evidence_text

MAX_CALL_DEPTH = 4
MAX_CALLER_DEPTH = 3
MAX_FINDINGS = 40
EMPTY = frozenset()
PASS_THROUGH_CALLS = {"tuple", "list", "sorted", "set", "frozenset", "reversed"}
PASS_THROUGH_METHODS = {"array", "asarray", "tensor", "as_tensor", "copy", "tolist",
                        "clone", "astype"}
# builtins whose result says something about their arguments but carries no ids
OBSERVERS = {"len", "isinstance", "bool", "str", "repr", "print", "type", "id", "hash",
             "any", "all", "min", "max", "sum", "int", "float", "range", "issubclass",
             "callable", "hasattr", "format", "abs", "round"}
# builtins whose result is (one of) their argument(s) as a number: ids stay ids
SAME_VALUE = {"int", "float", "round", "abs", "min", "max", "sum"}
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
               "info_once", "debug_once", "warning_once"}
MUTATORS = {"append", "extend", "insert", "add", "update"}
PARTIAL = {"partial", "functools.partial"}
TRUTH = "\0truth:"  # env key prefix: what a name bound to a test says about DFlash
NONINT = ("nonint",)  # a path on which a name holds something other than an int
CONSTANT_NAME = re.compile(r"_*[A-Z][A-Z0-9_]*$")
CONSTANT_LINE = re.compile(r"(_*[A-Z][A-Z0-9_]*)\s*(?::[^=]*)?=")



def passes_keyword(name, text):
    """Does a function's text pass `name=` as a keyword (not `name ==`), or name it as a
    dict key (keywords passed as `**kwargs`)?"""
    return re.search(r"[(,\s]%s\s*=(?!=)" % re.escape(name), text) is not None or \
        re.search(r"[\"']%s[\"']" % re.escape(name), text) is not None


def step_of(codebase, rel, line, end, kind):
    source = codebase.source(rel)
    text = evidence_text(source.lines, line, end) if source is not None else ""
    return (rel, line, kind, text)


def add_step(atom, step):
    """An ids-carrying atom with one more step on its trail."""
    if atom[0] in ("ids", "elem"):
        return (atom[0], atom[1], atom[2] + (step,))
    if atom[0] == "lost":
        return (atom[0], atom[1], atom[2] + (step,), atom[3])
    return atom


def carries_ids(value):
    return any(atom[0] in ("ids", "elem", "lost", "container") or
               (atom[0] == "tuple" and any(carries_ids(v) for v in atom[1])) or
               (atom[0] == "dict" and any(carries_ids(v) for _, v in atom[1]))
               for atom in value)


def as_collection(value):
    """Elements gathered into a list/tuple: elem atoms become ids atoms (an int element
    does not make the list an int)."""
    return frozenset(("ids",) + atom[1:] if atom[0] == "elem" else atom for atom in value
                     if atom[0] not in ("int", "nonint"))


def join(values):
    """Values of alternative paths: where one path gives an int and another does not,
    the result is not a constant."""
    out = frozenset().union(*values) if values else EMPTY
    if any(any(a[0] == "int" for a in v) for v in values) and \
            any(not v or any(a[0] != "int" for a in v) for v in values):
        out = out | frozenset([NONINT])
    return out


def dict_atom(items):
    """A dict of known keys (later keys replace earlier ones), as one atom."""
    merged = {}
    for key, value in items:
        merged[key] = value
    return ("dict", tuple(sorted(merged.items(), key=lambda item: item[0])))


def flat(value):
    """The atoms of a value with tuples and dicts opened: what a call that is not followed
    gets, ids inside them included."""
    out = set()
    for atom in value:
        if atom[0] == "tuple":
            for item in atom[1]:
                out |= flat(item)
        elif atom[0] == "dict":
            for _, item in atom[1]:
                out |= flat(item)
        else:
            out.add(atom)
    return frozenset(out)


def as_elements(value):
    """What iterating over a value yields: the elements of ids, the items of tuples."""
    out = set()
    for atom in value:
        if atom[0] == "ids":
            out.add(("elem",) + atom[1:])
        elif atom[0] == "tuple":
            for item in atom[1]:
                out |= item
        elif atom[0] not in ("int", "nonint"):
            out.add(atom)
    return frozenset(out)


def is_deferred(atom):
    """An untraced call result that may still be followed (see Analysis.expand)."""
    return atom[0] == "unk" and len(atom) > 3


def project(atom, index):
    """The deferred call's result, element `index` of it (tuple unpacking, x[i])."""
    return atom[:4] + ((atom[4] if len(atom) > 4 else ()) + (index,),)


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


def callee_name(func):
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def dotted_name(node):
    """a.b.c for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class Capture(object):
    """Record the value of one argument wherever a call to `call` is evaluated (on a
    given line, when `line` is set)."""

    def __init__(self, call, keyword, position=None, line=None):
        self.call = call
        self.keyword = keyword
        self.position = position
        self.line = line
        self.values = []  # (value, the call's step, the flow, the argument's own step)


class Analysis(object):
    """One finder's dataflow over the tree; `findings` collects what it proves."""

    def __init__(self, codebase, mode, key=None, container=None, sources=None, scope=(),
                 constants=None):
        self.codebase = codebase
        self.constants = constants or {}  # repr of a constant -> label (value-source)
        self.scope = scope  # the finder's files: where subclasses are looked for
        self.partials = []  # (flow, function expression, bound args, bound keywords)
        self.predicates = {}  # function key -> what it returns for DFlash
        self.predicate_refs = {}  # call site -> the predicate it calls
        self.tests = []  # (flow, expression, env) of each test bound to a name
        self.told = {}  # index in tests -> what the test is for DFlash
        self.mode = mode  # "offset" or "source"
        self.key = key
        self.container = container
        self.sources = sources or {}  # name -> label
        self.findings = []
        self.memo = {}
        self.examined = set()

    # -- key-offset -------------------------------------------------------------------
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

    def offset_roots(self, source):
        """One flow per function around the key's occurrences in a file."""
        self.examined.add(source.rel)
        lines = source.hit_lines(self.key)
        for line in list(lines):
            # the key named by a module constant: the functions reading that name
            named = CONSTANT_LINE.match(source.lines[line - 1])
            if named and source.lines[line - 1].rstrip().endswith(("'%s'" % self.key,
                                                                    '"%s"' % self.key)):
                lines += source.hit_lines(named.group(1), True)
        for _, ref in self.functions_around(source, lines):
            Flow(self, ref, self.entry_env(ref), 0, (ref.key,)).run()

    def end(self, value, step, stored=None):
        """Ids leaving a flow (returned, stored, or lost in a call): a finding each.
        `stored` names where ids were stored for other code to read (not followed)."""
        for atom in value:
            if atom[0] == "tuple":
                for item in atom[1]:
                    self.end(item, step, stored)
            elif atom[0] == "dict":
                for _, item in atom[1]:
                    self.end(item, step, stored)
            elif atom[0] in ("ids", "elem"):
                trail = atom[2] + ((step,) if step[:2] != atom[2][-1][:2] else ())
                if stored:
                    self.add_finding("?", trail, "ids (%+d so far) are %s at %s:%d and read "
                                     "elsewhere, which is not followed"
                                     % (atom[1], stored, step[0], step[1]), stored=True)
                else:
                    self.add_finding(atom[1], trail)
            elif atom[0] == "lost":
                self.add_finding("?", atom[2], atom[3])

    def finish(self):
        """Ids stored on an object are only a loss when their read reaches no other end
        of the flow (a value kept on self and also returned is judged by the return)."""
        ended = set((f["trail"][0]["file"], f["trail"][0]["line"]) for f in self.findings
                    if not f.get("stored"))
        self.findings = [f for f in self.findings if not f.get("stored") or
                         (f["trail"][0]["file"], f["trail"][0]["line"]) not in ended]
        for finding in self.findings:
            finding.pop("stored", None)
        return self.findings

    def add_finding(self, offset, trail, why=None, stored=False):
        if len(self.findings) >= MAX_FINDINGS:
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
        if entry not in self.findings:
            self.findings.append(entry)

    # -- value-source -----------------------------------------------------------------
    def source_roots(self, source, call, keyword):
        """Flows over the functions holding `call(..., keyword=...)`; a finding per call."""
        self.examined.add(source.rel)
        for text, ref in self.functions_around(source, source.hit_lines(keyword, True)):
            if call + "(" not in text or not passes_keyword(keyword, text):
                continue  # the name is a parameter or a variable here, not the call's keyword
            capture = Capture(call, keyword)
            Flow(self, ref, self.entry_env(ref), 0, (ref.key,), [capture]).run()
            for value, sink, _, argument in capture.values:
                self.classify(self.expand(self.through_callers(value, 0), 0), sink, argument)

    def through_callers(self, value, depth):
        """Parameters replaced by what the module's call sites pass for them."""
        out = set()
        for atom in value:
            if atom[0] == "tuple":
                out.add(("tuple", tuple(frozenset(self.through_callers(v, depth))
                                        for v in atom[1])))
                continue
            if atom[0] != "param":
                out.add(atom)
                continue
            _, ref, name, position = atom
            passed = self.passed_by_callers(ref, name, position) \
                if depth < MAX_CALLER_DEPTH else []
            if not passed:
                out.add(("unk", "parameter %s of %s() gets no value from a call in %s"
                         % (name, ref.name, ref.rel),
                         step_of(self.codebase, ref.rel, ref.node.lineno + ref.line_offset,
                                 ref.node.lineno + ref.line_offset, "parameter")))
            for item in passed:
                out |= self.through_callers(item, depth + 1)
        return frozenset(out)

    def expand(self, value, depth):
        """Calls of helpers outside the module whose result reaches the call, followed
        now (their modules read only now), to what they return."""
        out = set()
        for atom in value:
            if atom[0] != "unk" or len(atom) < 4 or depth >= MAX_CALL_DEPTH:
                out.add(atom[:3] if atom[0] == "unk" else atom)
                continue
            if atom[3][0] == "constant":
                found = atom[3][1].named_constant(atom[3][2])
                out.add(("const", repr(found[0])[:40], found[1]) if found else atom[:3])
                continue
            flow, func, node, args, keywords = atom[3]
            ref, why = flow.resolve_callee(func)
            if ref is None:
                out.add(atom[:3])
                continue
            result = flow.follow(ref, node, list(args), dict(keywords))
            for index in atom[4] if len(atom) > 4 else ():
                picked = set()
                for item in result:
                    if item[0] == "tuple" and -len(item[1]) <= index < len(item[1]):
                        picked |= item[1][index]
                    else:
                        picked.add(item)
                result = frozenset(picked)
            out |= self.expand(self.through_callers(result, depth), depth + 1)
        return frozenset(out)

    def passed_by_callers(self, ref, name, position):
        """The values call sites in the function's module pass for one parameter."""
        source = self.codebase.source(ref.rel)
        constructor = ref.name == "__init__" and ref.cls is not None
        called = ref.cls[1] if constructor else ref.name
        out = []
        def_line = ref.node.lineno + ref.line_offset
        lines = [line for line in source.hit_lines(called, True) if line != def_line]
        for _, site in self.functions_around(source, lines):
            capture = Capture(called, name, position)
            Flow(self, site, self.entry_env(site), 0, (site.key,), [capture]).run()
            out.extend(value for value, _, _, _ in capture.values)
        if not out:
            return out
        default = ref.defaults().get(name)
        if any(value is None for value in out):
            out = [v for v in out if v is not None]
            out.append(Flow(self, ref, {}, 0, ()).eval(default, {}) if default is not None
                       else frozenset([("unk", "no value for %s" % name,
                                        step_of(self.codebase, ref.rel, def_line, def_line,
                                                "parameter"))]))
        return out

    def classify(self, value, sink, argument=None):
        labels = {}
        constants = []
        unknown = []
        for atom in value:
            if atom[0] == "src":
                labels.setdefault(atom[1], []).append(atom[2])
            elif atom[0] == "const":
                constants.append(atom[2])
                if atom[1] in self.constants:
                    labels.setdefault(self.constants[atom[1]], []).append(atom[2])
            elif atom[0] == "unk":
                unknown.append((atom[1], atom[2]))
            elif atom[0] == "tuple":
                unknown.append(("a tuple", sink))
            elif atom[0] == "dict":
                if atom[1]:
                    unknown.append(("a dict", sink))
                else:
                    constants.append(sink)
        head = [sink] + ([argument] if argument is not None and argument != sink else [])
        for label, steps in sorted(labels.items()):
            self.add_source_finding(label, head, sorted(set(steps))[:3])
        named = set(self.constants.values())
        if not [label for label in labels if label not in named] and constants and \
                not unknown:
            self.add_source_finding("constant", head, sorted(set(constants))[:3])
        for why, step in sorted(set(unknown))[:2]:
            self.add_source_finding("?", head, [step], why)

    def add_source_finding(self, label, head, steps, why=None):
        """`head`: the call, then the argument it was traced from on its own line (a long
        call's evidence text elides its middle, where that argument often is)."""
        sink = head[0]
        entry = {"source": label, "file": sink[0], "line": sink[1], "text": sink[3],
                 "step": "call",
                 "trail": [{"file": s[0], "line": s[1], "step": s[2], "text": s[3]}
                           for s in head + [s for s in steps if s not in head]]}
        if why:
            entry["why"] = why
        if entry not in self.findings and len(self.findings) < MAX_FINDINGS:
            self.findings.append(entry)

    def entry_env(self, ref):
        """What a flow's parameters hold at its start. key-offset: their defaults (a
        parameter named like the container is the container); value-source: themselves,
        to be replaced by what the module's call sites pass."""
        if self.mode == "offset":
            defaults = ref.defaults()
            flow = Flow(self, ref, {}, 0, ())
            return dict((name, flow.default_value(defaults[name]) if name in defaults
                         else EMPTY) for name in ref.params() if name != self.container)
        return dict((name, frozenset([("param", ref, name, index)]))
                    for index, name in enumerate(ref.params()))


class Flow(object):
    """Abstract execution of one function: names (and self.attributes) to values."""

    def __init__(self, analysis, fn, env, depth, stack, captures=(), self_cls=None):
        self.a = analysis
        self.fn = fn
        # the class `self` is known to be (or derive from): where self.m() is looked up
        self.self_cls = self_cls or fn.cls
        self.entry = env
        self.depth = depth
        self.stack = stack
        self.captures = captures
        self.returns = set()
        self.local_defs = {}
        self.control = []
        self.lambdas = []
        self.source = analysis.codebase.source(fn.rel)

    # -- helpers ------------------------------------------------------------------
    def line(self, node):
        return node.lineno + self.fn.line_offset

    def step(self, node, kind):
        first = self.line(node)
        last = getattr(node, "end_lineno", node.lineno) + self.fn.line_offset
        text = evidence_text(self.source.lines, first, last) if self.source else ""
        return (self.fn.rel, first, kind, text)

    def argument_step(self, given, keyword):
        """The traced argument's own line ('use_eagle=...'), or None when it came through
        a ** spread (no line of the call names it)."""
        if not given:
            return None
        node = given[0]
        first = self.line(node)
        last = getattr(node, "end_lineno", node.lineno) + self.fn.line_offset
        text = evidence_text(self.source.lines, first, last) if self.source else ""
        if keyword is not None and keyword + "=" not in text.replace(" ", ""):
            text = "%s=%s" % (keyword, text)  # the keyword sits on the line before its value
        return (self.fn.rel, first, "argument", text)

    def unknown(self, node, why):
        if self.a.mode == "offset":
            return EMPTY
        return frozenset([("unk", why, self.step(node, "untraced"))])

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
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.local_defs[node.name] = FunctionRef(self.fn.rel, node.name, node,
                                                     self.fn.line_offset)
            return env
        if isinstance(node, ast.Return):
            value = self.eval(node.value, env) if node.value is not None else \
                self.constant(node, None)
            if self.depth == 0 and self.a.mode == "offset":
                self.a.end(value, self.step(node, "return"))
            if self.a.mode == "source" and self.control and value:
                value = value | frozenset().union(*self.control)
            self.returns |= value
            return None
        if isinstance(node, ast.Raise):
            return None
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None:
                return env
            value = self.eval(node.value, env)
            # a test bound to a name is told only if a test reads the name (lookups of
            # predicates read modules)
            bound = frozenset([("test", len(self.a.tests))]) \
                if conditions.maybe_test(node.value) else None
            if bound is not None:
                self.a.tests.append((self, node.value, dict(env)))
            for target in getattr(node, "targets", None) or [node.target]:
                self.assign(target, value, env, node)
                name = dotted_name(target)
                if name is not None and (bound is not None or TRUTH + name in env):
                    env[TRUTH + name] = bound or frozenset([None])
            return env
        if isinstance(node, ast.AugAssign):
            current = self.eval(node.target, env) if not isinstance(node.target, ast.Attribute) \
                or dotted_name(node.target) in env else EMPTY
            value = self.binop(node, current, node.op, node.value, env)
            self.assign(node.target, value, env, node)
            return env
        if isinstance(node, ast.Expr):
            value = self.eval(node.value, env)
            if self.a.mode == "offset":
                lost = frozenset(atom for atom in value if atom[0] == "lost")
                if lost:
                    self.a.end(lost, self.step(node, "lost"))
            return env
        if isinstance(node, ast.If):
            test = self.eval(node.test, env)
            decided = self.truth(node.test, env) if branches_matter(node) else None
            self.control.append(frozenset(a for a in test if a[0] == "src"))
            # a branch whose test is false for DFlash is not a DFlash path
            body = self.exec_block(node.body, dict(env)) if decided is not False else None
            other = self.exec_block(node.orelse, dict(env)) if decided is not True else None
            self.control.pop()
            return merge(body, other)
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return self.exec_loop(node, env)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                value = self.eval(item.context_expr, env)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, value, env, node)
            return self.exec_block(node.body, env)
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
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
        if type(node).__name__ == "Match":
            self.eval(node.subject, env)
            result = dict(env)
            for case in node.cases:
                result = merge(result, self.exec_block(case.body, dict(env)))
            return result
        return env

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

    def assign(self, target, value, env, node):
        if self.a.mode == "source" and self.control and value:
            extra = frozenset().union(*self.control)
            value = value | extra
        if isinstance(target, ast.Name):
            if self.a.mode == "offset" and not any(a[0] == "int" for a in value):
                value = value | frozenset([NONINT])
            env[target.id] = value
            if TRUTH + target.id in env:
                env[TRUTH + target.id] = frozenset([None])
        elif isinstance(target, (ast.Tuple, ast.List)):
            count = len(target.elts)
            parts = [set() for _ in range(count)]
            for atom in value:
                if atom[0] == "tuple" and len(atom[1]) == count:
                    for index in range(count):
                        parts[index] |= atom[1][index]
                elif atom[0] == "ids":
                    for part in parts:
                        part.add(("elem",) + atom[1:])
                elif is_deferred(atom):
                    for index, part in enumerate(parts):
                        part.add(project(atom, index))
                else:
                    for part in parts:
                        part.add(atom)
            for element, part in zip(target.elts, parts):
                self.assign(element, frozenset(part), env, node)
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
                dicts = [a for a in current if a[0] == "dict"]
                if dicts and key is not None:
                    # kwargs["x"] = value: the key now holds the value
                    env[target.value.id] = frozenset(a for a in current if a[0] != "dict") | \
                        frozenset(dict_atom(a[1] + ((key, value),)) for a in dicts)
                    return
                env[target.value.id] = current | as_collection(value)
            if self.a.mode == "offset" and carries_ids(value):
                self.a.end(frozenset(a for a in value if a[0] != "container"),
                           self.step(node, "stored"),
                           "stored on %s" % name if name else "stored in a subscript")

    # -- expressions --------------------------------------------------------------
    def constant(self, node, value):
        if self.a.mode == "offset":
            return EMPTY
        return frozenset([("const", repr(value)[:40], self.step(node, "constant"))])

    def eval(self, node, env):
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            inner = EMPTY
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    inner = inner | self.eval(child, env)
            if self.a.mode == "offset" and carries_ids(inner):
                return self.lose(inner, node, "ids in a %s expression at %s:%d, which is not "
                                 "followed" % (type(node).__name__, self.fn.rel, self.line(node)))
            return self.unknown(node, "%s expression" % type(node).__name__)
        return method(node, env)

    def eval_Yield(self, node, env):
        """A generator's elements are what it returns."""
        value = self.eval(node.value, env) if node.value is not None else EMPTY
        self.returned(node, as_collection(value))
        return EMPTY

    def eval_YieldFrom(self, node, env):
        self.returned(node, self.eval(node.value, env))
        return EMPTY

    def returned(self, node, value):
        if self.depth == 0 and self.a.mode == "offset":
            self.a.end(value, self.step(node, "return"))
        self.returns |= value

    def eval_Constant(self, node, env):
        if self.a.mode == "offset" and isinstance(node.value, int) and \
                not isinstance(node.value, bool):
            return frozenset([("int", node.value, None)])
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
        if self.a.mode == "offset" and node.id == self.a.container:
            return frozenset([("container",)])
        if self.a.mode == "source":
            found = self.a.codebase.module_constant(self.fn.rel, node.id)
            if found is not None:
                return frozenset([("const", repr(found[0])[:40],
                                   step_of(self.a.codebase, self.fn.rel, found[1], found[1],
                                           "constant"))])
            if node.id in self.a.codebase.imports(self.fn.rel):
                return self.deferred_constant(node, "%s is not assigned in %s()"
                                              % (node.id, self.fn.name))
        return self.unknown(node, "%s is not assigned in %s()" % (node.id, self.fn.name))

    def deferred_constant(self, node, why):
        """A name of another module (or class) that may be a constant: looked up only if
        its value reaches the call (Analysis.expand)."""
        return frozenset([("unk", why, self.step(node, "untraced"), ("constant", self, node))])

    def key_read(self, node, base, name):
        """A read of a named key/attribute: the container, the ids, or a source."""
        if self.a.mode == "offset":
            if name == self.a.key and (self.a.container is None or
                                       ("container",) in base):
                return frozenset([("ids", 0, (self.step(node, "read"),))])
            if self.a.container is not None and name == self.a.container:
                return frozenset([("container",)])
            return None
        label = self.a.sources.get(name)
        if label is not None:
            return frozenset([("src", label, self.step(node, "source"))])
        return None

    def eval_Attribute(self, node, env):
        name = dotted_name(node)
        if name is not None and name in env:
            return env[name]
        base = self.eval(node.value, env)
        found = self.key_read(node, base, node.attr)
        if found is not None:
            return found
        if self.a.mode == "source" and name and name.startswith("self."):
            return self.deferred_constant(node, "%s is set outside %s()" % (name, self.fn.name))
        if self.a.mode == "source":
            # a class constant, or a config field's declared default
            return self.deferred_constant(node, "attribute .%s" % node.attr)
        return frozenset(a for a in base if a[0] == "lost") or \
            self.unknown(node, "attribute .%s" % node.attr)

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
        position = const_int(index)
        out = set()
        for atom in base:
            if atom[0] == "ids":
                out.add(atom if isinstance(index, ast.Slice) else ("elem",) + atom[1:])
            elif atom[0] == "tuple" and position is not None and -len(atom[1]) <= position \
                    < len(atom[1]):
                out |= atom[1][position]
            elif is_deferred(atom) and position is not None:
                out.add(project(atom, position))
            elif atom[0] == "dict" and key is not None:
                out |= dict(atom[1]).get(key, EMPTY)
            elif atom[0] == "lost":
                out.add(atom)  # ids lost stay lost, whatever is read from them
            elif self.a.mode == "source" and atom[0] in ("src", "unk", "param"):
                out.add(atom)
        if not out:
            return self.unknown(node, "a subscript")
        return frozenset(out)

    def eval_BoolOp(self, node, env):
        return join([self.eval(value, env) for value in node.values])

    def eval_IfExp(self, node, env):
        test = self.eval(node.test, env)
        decided = self.truth(node.test, env)
        body = join(([self.eval(node.body, env)] if decided is not False else []) +
                    ([self.eval(node.orelse, env)] if decided is not True else []))
        if self.a.mode == "source" and body:
            body = body | frozenset(a for a in test if a[0] == "src")
        return body

    def eval_Compare(self, node, env):
        values = [self.eval(node.left, env)] + [self.eval(c, env) for c in node.comparators]
        if self.a.mode == "offset":
            return EMPTY
        return frozenset(a for v in values for a in v if a[0] == "src") or \
            self.constant(node, "comparison")

    def eval_UnaryOp(self, node, env):
        value = self.eval(node.operand, env)
        if self.a.mode == "offset":
            return self.lose(value, node, "ids negated or inverted at %s:%d" %
                             (self.fn.rel, self.line(node))) if carries_ids(value) else EMPTY
        return value

    def eval_BinOp(self, node, env):
        return self.binop(node, self.eval(node.left, env), node.op, node.right, env,
                          left_node=node.left)

    def binop(self, node, left, op, right_node, env, left_node=None):
        right = self.eval(right_node, env)
        if self.a.mode == "source":
            return left | right
        if isinstance(op, (ast.Add, ast.Sub)):
            sign = 1 if isinstance(op, ast.Add) else -1
            # ids + n, n + ids, ids - n (never n - ids)
            sides = [(left, right_node, right)] + \
                ([(right, left_node, left)] if sign == 1 else [])
            for ids, other_node, other in sides:
                carried = [a for a in ids if a[0] in ("ids", "elem")]
                amounts = self.amounts(other_node, other) if carried else None
                if carried and amounts:
                    out = set()
                    for amount, named in amounts:
                        step = self.step(node, "%+d" % (sign * amount))
                        out |= set((a[0], a[1] + sign * amount,
                                    a[2] + ((named,) if named else ()) + (step,))
                                   for a in carried)
                    return frozenset(out)
            if isinstance(op, ast.Add) and any(a[0] == "ids" for a in left) and \
                    any(a[0] == "ids" for a in right):
                return left | right  # list concatenation
        if carries_ids(left) or carries_ids(right):
            return self.lose(left | right, node, "ids combined with a value that is not a "
                             "constant at %s:%d" % (self.fn.rel, self.line(node)))
        return EMPTY

    def lose(self, value, node, why):
        step = self.step(node, "lost")
        value = flat(value)
        return frozenset(("lost", a[1], a[2] + (step,), why) for a in value
                         if a[0] in ("ids", "elem")) | \
            frozenset(a for a in value if a[0] == "lost")

    def eval_Tuple(self, node, env):
        items = tuple(self.eval(e, env) for e in node.elts)
        if self.a.mode == "offset" and all(not carries_ids(i) for i in items):
            return EMPTY
        return frozenset([("tuple", items)])

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
                dicts = [a for a in value if a[0] == "dict"]
                if not dicts or len(dicts) != len(value) or len(paths) * len(dicts) > 8:
                    followed = False
                paths = [p + d[1] for p in paths for d in dicts]
                continue
            name = const_str(key)
            if name is None:
                self.eval(key, env)
                followed = False
            paths = [p + ((name, value),) for p in paths]
        if followed:
            return frozenset(dict_atom(p) for p in paths)
        if self.a.mode == "offset" and carries_ids(carried):
            return self.lose(carried, node, "ids kept in a dict at %s:%d whose keys are not "
                             "all strings" % (self.fn.rel, self.line(node)))
        return self.unknown(node, "a dict")

    def eval_Starred(self, node, env):
        return self.eval(node.value, env)

    def eval_NamedExpr(self, node, env):
        value = self.eval(node.value, env)
        self.assign(node.target, value, env, node)
        return value

    def eval_Lambda(self, node, env):
        self.lambdas.append((node, dict(env)))
        return frozenset([("lambda", len(self.lambdas) - 1)])

    def comprehension(self, node, env, element):
        if len(node.generators) != 1:
            iterated = frozenset().union(*[self.eval(g.iter, env) for g in node.generators])
            if self.a.mode == "offset" and carries_ids(iterated):
                return self.lose(iterated, node, "ids in a nested comprehension at %s:%d, "
                                 "which is not followed" % (self.fn.rel, self.line(node)))
            return self.unknown(node, "a nested comprehension")
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
        if self.a.mode == "offset" and carries_ids(value):
            return self.lose(value, node, "ids kept in a dict comprehension at %s:%d"
                             % (self.fn.rel, self.line(node)))
        return self.unknown(node, "a dict comprehension")

    def apply_lambda(self, index, argument, node):
        lam, env = self.lambdas[index]
        params = [a.arg for a in lam.args.args]
        inner = dict(env)
        if params:
            inner[params[0]] = argument
        return self.eval(lam.body, inner)

    def eval_Call(self, node, env):
        func = node.func
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
        name = callee_name(func)
        for capture in self.captures:
            if name == capture.call and (capture.line is None or capture.line == self.line(node)):
                if capture.keyword not in keywords and opaque:
                    capture.values.append((frozenset().union(*opaque),
                                           self.step(node, "call"), self, None))
                elif capture.keyword in keywords:
                    given = [k.value for k in node.keywords if k.arg == capture.keyword]
                    capture.values.append((keywords[capture.keyword], self.step(node, "call"),
                                           self, self.argument_step(given, capture.keyword)))
                elif capture.position is not None and capture.position < len(node.args) and \
                        not any(isinstance(a, ast.Starred) for a in node.args):
                    capture.values.append((args[capture.position], self.step(node, "call"),
                                           self, self.argument_step(
                                               [node.args[capture.position]], None)))
                elif capture.position is not None:
                    capture.values.append((None, self.step(node, "call"), self, None))
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            attribute = self.key_name(node.args[1])
            if attribute is not None:
                found = self.key_read(node, args[0], attribute)
                if found is not None:
                    return found
            return self.unknown(node, "getattr()")
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            key = self.key_name(node.args[0])
            base = self.eval(func.value, env)
            if key is not None:
                found = self.key_read(node, base, key)
                if found is not None:
                    if self.a.mode == "source" and len(args) > 1:
                        return found | args[1]
                    return found
                dicts = [a for a in base if a[0] == "dict"]
                if dicts and len(dicts) == len(base):
                    out = set()
                    for atom in dicts:
                        held = dict(atom[1])
                        out |= held[key] if key in held else \
                            (args[1] if len(args) > 1 else self.constant(node, None))
                    return frozenset(out)
        if dotted_name(func) in PARTIAL and node.args:
            self.a.partials.append((self, node.args[0], tuple(args[1:]), dict(keywords)))
            return frozenset([("partial", len(self.a.partials) - 1)])
        if isinstance(func, ast.Name) and func.id == "dict" and len(args) <= 1:
            bases = [a for a in args[0] if a[0] == "dict"] if args else [("dict", ())]
            if bases and (not args or len(bases) == len(args[0])):
                return frozenset(dict_atom(b[1] + tuple(keywords.items())) for b in bases)
        if self.a.mode == "source" and name in self.a.sources:
            return frozenset([("src", self.a.sources[name], self.step(node, "source"))])
        if isinstance(func, ast.Name) and func.id in PASS_THROUGH_CALLS and args:
            return as_collection(args[0])
        if isinstance(func, ast.Attribute) and func.attr in PASS_THROUGH_METHODS:
            if args and not isinstance(func.value, ast.Name) or \
                    (args and func.attr in ("array", "asarray", "tensor", "as_tensor")):
                return as_collection(args[0])
            return self.eval(func.value, env)
        if isinstance(func, ast.Name) and func.id == "map" and len(args) == 2:
            lambdas = [a for a in args[0] if a[0] == "lambda"]
            if lambdas:
                elements = as_elements(args[1])
                out = set()
                for atom in lambdas:
                    out |= as_collection(self.apply_lambda(atom[1], elements, node))
                return frozenset(out)
        if self.a.mode == "offset" and isinstance(func, ast.Name) and args and \
                func.id in SAME_VALUE and any(carries_ids(v) for v in args):
            # int(i), max(ids): an id itself; sum(ids) is none of them
            if func.id == "sum":
                return self.lose(args[0], node, "ids summed at %s:%d" % (self.fn.rel,
                                                                         self.line(node)))
            if func.id in ("min", "max") and len(args) == 1:
                return as_elements(args[0])
            return frozenset().union(*args) if func.id in ("min", "max") else args[0]
        if isinstance(func, ast.Name) and func.id in OBSERVERS:
            if self.a.mode == "source":
                out = frozenset(a for v in args for a in v if a[0] == "src")
                return out or self.constant(node, func.id + "()")
            return EMPTY
        if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and \
                "log" in (dotted_name(func.value) or "").lower():
            return EMPTY
        if isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault") and \
                isinstance(func.value, ast.Name) and \
                any(a[0] == "dict" for a in env.get(func.value.id, EMPTY)):
            self.update_dict(func.value.id, func.attr, node, args, keywords, env)
            return EMPTY
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS and \
                isinstance(func.value, ast.Name) and func.value.id in env:
            # a local collection filled in place (`ids.append(i + 1)`); `operator.add(i,
            # 0)` or `np.add(ids, 0)` name a module's function, which is a call like any
            added = set()
            for value in args:
                added |= (value if func.attr == "extend" else as_collection(value))
            env[func.value.id] = env.get(func.value.id, EMPTY) | frozenset(added)
            return EMPTY
        lambdas = [a for a in env.get(name, EMPTY) if a[0] == "lambda"] \
            if isinstance(func, ast.Name) else []
        if lambdas and args:
            out = set()
            for atom in lambdas:
                out |= self.apply_lambda(atom[1], args[0], node)
            return frozenset(out)
        partials = self.partials_called(func, env)
        relevant = self.a.mode == "source" or any(carries_ids(v) for v in
                                                    args + list(keywords.values()) + opaque)
        if partials and (relevant or any(carries_ids(v) for p in partials
                                         for v in list(p[2]) + list(p[3].values()))):
            out = set()
            for flow, target, bound, bound_keywords in partials:
                ref, why = flow.resolve_callee(target)
                if ref is None:
                    out |= self.unfollowed(node, "functools.partial of %s" % (
                        dotted_name(target) or "a computed function"), why,
                        list(bound) + args, dict(bound_keywords, **keywords), opaque)
                    continue
                out |= self.follow(ref, node, list(bound) + args,
                                   dict(bound_keywords, **keywords))
            return frozenset(out)
        if not relevant and self.a.mode == "offset" and isinstance(func, ast.Attribute):
            # a method of the ids themselves (tensor.add(0)): what it returns is not known
            receiver = self.eval(func.value, env)
            if carries_ids(receiver):
                return self.lose(receiver, node, "ids flow into .%s() at %s:%d, which is not "
                                 "followed" % (func.attr, self.fn.rel, self.line(node)))
        if not relevant:
            return EMPTY
        ref, why = self.resolve_callee(func, local_only=self.a.mode == "source")
        if ref is not None:
            result = self.follow(ref, node, args, keywords)
            for override, cls in self.overrides(func, ref):
                result = result | self.follow(override, node, args, keywords, cls)
            return result
        return self.unfollowed(node, "%s()" % (dotted_name(func) or name or
                                               "a computed function"), why, args, keywords,
                               opaque, func)

    def unfollowed(self, node, what, why, args, keywords, opaque, func=None):
        """The value of a call that is not followed: in value-source a deferred lookup,
        in key-offset the ids it gets are lost there."""
        if self.a.mode == "source" and func is None:
            return self.unknown(node, "%s could not be followed%s" % (what, why))
        if self.a.mode == "source":
            # a helper of another module is looked up only if its value reaches the call
            # (Analysis.expand): the calls that build a layer are many, and their modules
            # are not read for nothing
            deferred = (self, func, node, tuple(args), tuple(sorted(keywords.items())))
            return frozenset([("unk", "%s could not be followed%s" % (what, why),
                               self.step(node, "untraced"), deferred)])
        step = self.step(node, "lost")
        values = [flat(v) for v in args + list(keywords.values()) + list(opaque)]
        return frozenset(("lost", a[1], a[2] + (step,), "ids flow into %s at %s:%d, which "
                          "could not be followed%s" % (what, self.fn.rel, self.line(node), why))
                         for value in values for a in value
                         if a[0] in ("ids", "elem")) | frozenset(
            a for value in values for a in value if a[0] == "lost")

    # -- keywords through dicts, partials, overrides --------------------------------
    def spread_keywords(self, node, spread, keywords):
        """`**kwargs` of dicts with known keys become keywords (a key some paths leave
        out is, on those paths, not passed); the values of other `**` spreads, which
        may hold any keyword, are returned."""
        opaque = []
        for expression, value in spread:
            dicts = [a for a in value if a[0] == "dict"]
            if len(dicts) != len(value) or not dicts:
                opaque.append(value if self.a.mode == "offset" else
                              self.unknown(expression, "keywords passed as **%s at %s:%d "
                                           "could not be followed" % (
                                               dotted_name(expression) or "a value",
                                               self.fn.rel, self.line(node))))
                continue
            keys = set(k for d in dicts for k, _ in d[1])
            for key in sorted(keys):
                held = [dict(d[1]).get(key) for d in dicts]
                value = frozenset().union(*[h for h in held if h is not None])
                if any(h is None for h in held):
                    value = value | self.constant(node, "not passed")
                keywords[key] = keywords.get(key, EMPTY) | value
        return opaque

    def update_dict(self, name, method, node, args, keywords, env):
        """kwargs.update(...) / kwargs.setdefault(k, v) on a dict of known keys."""
        current = env[name]
        updated = set(a for a in current if a[0] != "dict")
        for atom in (a for a in current if a[0] == "dict"):
            if method == "setdefault":
                key = const_str(node.args[0]) if node.args else None
                if key is None:
                    updated.add(atom)
                    continue
                held = dict(atom[1])
                if key not in held:
                    held[key] = args[1] if len(args) > 1 else self.constant(node, None)
                updated.add(dict_atom(tuple(held.items())))
                continue
            others = [a for a in args[0] if a[0] == "dict"] if args else [("dict", ())]
            if args and len(others) != len(args[0]):
                updated.add(("dict", ()))  # keys of an unknown dict: nothing known
                continue
            for other in others:
                updated.add(dict_atom(atom[1] + other[1] + tuple(keywords.items())))
        env[name] = frozenset(updated)

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
                    value = Flow(self.a, self.fn, {}, self.depth, self.stack).eval(found[0], {})
        else:
            return []
        return [self.a.partials[a[1]] for a in value if a[0] == "partial"]

    def overrides(self, func, ref):
        """(method, class) of each subclass in the tree that overrides the method
        `self.m()` reaches: the code does not say which class was built, so each counts."""
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and
                func.value.id in ("self", "cls") and self.self_cls):
            return []
        codebase = self.a.codebase
        out = []
        for rel, cls in codebase.subclasses(self.self_cls[0], self.self_cls[1], self.a.scope):
            found = codebase.function(rel, func.attr, cls)
            if found is not None and found.key != ref.key:
                out.append((found, (rel, cls)))
        return out

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
        if test[1] not in self.a.told:
            flow, expression, bound_env = self.a.tests[test[1]]
            self.a.told[test[1]] = None  # a test reading itself decides nothing
            self.a.told[test[1]] = flow.truth(expression, bound_env)
        return self.a.told[test[1]]

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
                flow = Flow(self.a, ref, {}, self.depth + 1, self.stack + (ref.key,))
                self.a.predicates[ref.key] = flow.truth(body, {})
        return self.a.predicates[ref.key]

    def predicate_ref(self, func):
        """The function a predicate call reaches (found once per call site)."""
        key = (self.fn.key, self.self_cls, func.lineno, func.col_offset)
        if key not in self.a.predicate_refs:
            self.a.predicate_refs[key] = self.find_predicate(func)
        return self.a.predicate_refs[key]

    def find_predicate(self, func):
        if isinstance(func, ast.Name) and func.id in self.local_defs:
            return self.local_defs[func.id]
        if isinstance(func, ast.Name):
            return self.a.codebase.function(self.fn.rel, func.id)
        if not isinstance(func, ast.Attribute):
            return None
        owner = self.receiver_class(func.value, 0)
        if owner is None:
            return None
        return self.a.codebase.method(owner[0], owner[1], func.attr)

    def receiver_class(self, node, depth):
        """(rel, class) an expression's value is an instance of, from what the code
        declares: `self`, a parameter's annotation, a field's annotation in its class,
        the value `__init__` assigns to `self.x`, or the class its name spells
        (`speculative_config` -> `SpeculativeConfig`) as the module imports it."""
        codebase = self.a.codebase
        if depth > 3:
            return None
        if isinstance(node, ast.Name):
            if node.id in ("self", "cls"):
                return self.self_cls
            for arg in all_args(self.fn.node):
                if arg.arg == node.id and arg.annotation is not None:
                    found = self.class_among(self.fn.rel, annotation_names(arg.annotation))
                    if found:
                        return found
            for statement in ast.walk(self.fn.node):
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                        isinstance(statement.targets[0], ast.Name) and \
                        statement.targets[0].id == node.id:
                    found = self.receiver_class(statement.value, depth + 1)
                    if found:
                        return found
            return self.class_among(self.fn.rel, [camel(node.id)])
        if not isinstance(node, ast.Attribute):
            return None
        owner = self.receiver_class(node.value, depth + 1)
        if owner is not None:
            field = codebase.class_field(owner[0], owner[1], node.attr)
            if field:
                found = self.class_among(owner[0], re.findall(r"[A-Za-z_]\w*", field))
                if found:
                    return found
            init = codebase.method(owner[0], owner[1], "__init__")
            if init is not None:
                for statement in ast.walk(init.node):
                    if isinstance(statement, ast.Assign) and any(
                            dotted_name(t) == "self." + node.attr for t in statement.targets):
                        flow = Flow(self.a, init, {}, self.depth, self.stack, (), owner)
                        found = flow.receiver_class(statement.value, depth + 1)
                        if found:
                            return found
        return self.class_among(self.fn.rel, [camel(node.attr)])

    def class_among(self, rel, names):
        for name in names:
            if name and name[0].isupper():
                found = self.a.codebase.resolve(rel, name)
                if found and found[0] == "class":
                    return found[1:]
        return None

    def named_constant(self, node):
        """(value, step at its definition) of a named constant: module level (here or
        imported from `vllm.*`), class level (`self.X`, `Class.X`, enum members and their
        `.value`), or a module's (`module.X`); None otherwise."""
        codebase = self.a.codebase
        found = None
        if isinstance(node, ast.Name):
            found = codebase.constant(self.fn.rel, node.id)
        elif isinstance(node, ast.Attribute):
            if node.attr == "value" and isinstance(node.value, ast.Attribute):
                return self.named_constant(node.value)
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                if self.self_cls:
                    found = codebase.class_constant(self.self_cls[0], self.self_cls[1],
                                                    node.attr)
            elif dotted_name(base):
                prefix = dotted_name(base)
                if codebase.class_block(self.fn.rel, prefix) is not None:
                    found = codebase.class_constant(self.fn.rel, prefix, node.attr)
                else:
                    resolved = codebase.resolve(self.fn.rel, prefix.split(".")[0])
                    if resolved and resolved[0] == "class" and "." not in prefix:
                        found = codebase.class_constant(resolved[1], resolved[2], node.attr)
                    elif resolved and resolved[0] == "module":
                        where = codebase.module_file(self.module_named(prefix, resolved[1]))
                        found = codebase.constant(where, node.attr) if where else None
            if found is None and not (isinstance(base, ast.Name) and
                                      base.id in ("self", "cls")):
                owner = self.receiver_class(base, 0)
                if owner is not None:
                    found = codebase.class_constant(owner[0], owner[1], node.attr)
        if found is None:
            return None
        value, rel, line = found
        return value, step_of(codebase, rel, line, line, "constant")

    def default_value(self, node):
        """A parameter's default, evaluated where the function is defined."""
        value = self.eval(node, {})
        if self.a.mode == "offset" and not any(a[0] == "int" for a in value) and \
                isinstance(node, (ast.Name, ast.Attribute)):
            found = self.named_constant(node)
            if found is not None and isinstance(found[0], int) and \
                    not isinstance(found[0], bool):
                return frozenset([("int", found[0], found[1])])
        return value

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

    def amounts(self, node, value):
        """(n, step naming it or None) for each constant int the operand may be on the
        paths that reach here; None when it is not a constant on every path."""
        literal = const_int(node) if node is not None else None
        if literal is not None:
            return [(literal, None)]
        if value and all(a[0] == "int" for a in value):
            return [(a[1], a[2]) for a in value]
        if not value and isinstance(node, (ast.Name, ast.Attribute)):
            found = self.named_constant(node)
            if found is not None and isinstance(found[0], int) and \
                    not isinstance(found[0], bool):
                return [found]
        return None

    def resolve_callee(self, func, local_only=False):
        """(FunctionRef, "") for a function of the tree, or (None, why not). local_only:
        only the module's own functions and methods (nothing else is read)."""
        codebase = self.a.codebase
        if isinstance(func, ast.Name):
            if func.id in self.local_defs:
                return self.local_defs[func.id], ""
            found = codebase.function(self.fn.rel, func.id)
            if found is None and not local_only:
                resolved = codebase.resolve(self.fn.rel, func.id)
                found = resolved[1] if resolved and resolved[0] == "function" else None
                if resolved and resolved[0] == "class":
                    return None, " (a class: the ids are kept in an instance)"
            return (found, "") if found else (None, " (not defined in the tree)")
        if not isinstance(func, ast.Attribute):
            return None, " (a computed callee)"
        base = func.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls") and self.self_cls:
            found = codebase.method(self.self_cls[0], self.self_cls[1], func.attr)
            return (found, "") if found else (None, " (no such method in the tree)")
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and \
                base.func.id == "super" and self.fn.cls:
            for base_rel, base_cls in codebase.class_bases(*self.fn.cls):
                found = codebase.method(base_rel, base_cls, func.attr)
                if found:
                    return found, ""
            return None, " (the base class is not in the tree)"
        prefix = dotted_name(base)
        if prefix is None:
            return None, ""
        if codebase.class_block(self.fn.rel, prefix) is not None:
            found = codebase.method(self.fn.rel, prefix, func.attr)
            return (found, "") if found else (None, "")
        if local_only:
            return None, ""
        resolved = codebase.resolve(self.fn.rel, prefix.split(".")[0])
        if resolved and resolved[0] == "module":
            module = self.module_named(prefix, resolved[1])
            target = codebase.resolve_in_module(module, func.attr)
            if target and target[0] == "function":
                return target[1], ""
            return None, " (not defined in %s)" % module
        if resolved and resolved[0] == "class":
            found = codebase.method(resolved[1], resolved[2], func.attr)
            return (found, "") if found else (None, "")
        return None, ""

    def module_named(self, prefix, first):
        """The dotted module `prefix.attr` reads from: `first` is what the prefix's first
        name resolved to (`import vllm.a.b as m`; `import vllm.a.b` then `vllm.a.b.f`)."""
        imported = self.a.codebase.imports(self.fn.rel).get(prefix)
        if imported is not None and imported[1] is None:
            return imported[0]
        if "." in prefix:
            return first + "." + prefix.split(".", 1)[1]
        return first

    def follow(self, ref, node, args, keywords, self_cls=None):
        """Into a helper with the argument values, and its return value back out.
        self_cls: the class `self` is in the helper (an override's own class)."""
        if self_cls is None and ref.cls is not None and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and \
                node.func.value.id in ("self", "cls"):
            self_cls = self.self_cls
        if self.depth >= MAX_CALL_DEPTH or ref.key in self.stack:
            why = "depth limit" if self.depth >= MAX_CALL_DEPTH else "recursion"
            if self.a.mode == "source":
                return self.unknown(node, "%s() not followed (%s)" % (ref.name, why))
            return self.lose(frozenset(a for v in args + list(keywords.values()) for a in v),
                             node, "ids flow into %s() at %s:%d, not followed (%s)"
                             % (ref.name, self.fn.rel, self.line(node), why))
        step = self.step(node, "call")
        if self.a.mode == "offset":
            args = [frozenset(add_step(a, step) for a in v) for v in args]
            keywords = dict((k, frozenset(add_step(a, step) for a in v))
                            for k, v in keywords.items())
        params = ref.params()
        defaults = ref.defaults()
        env = {}
        definer = Flow(self.a, ref, {}, self.depth + 1, self.stack, (), self_cls)
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
            flow = Flow(self.a, ref, env, self.depth + 1, self.stack + (ref.key,), (),
                        self_cls)
            result = flow.run()
            if self.a.mode == "source" and not result:
                result = self.constant(node, None)
            self.a.memo[key] = result
        return self.a.memo[key] | spare

    def spare_arguments(self, ref, params, args, keywords, env, node):
        """Arguments no named parameter takes: into *args / **kwargs when the function
        has them, else (in key-offset) ids in them are lost here, never dropped."""
        extra = args[len(params):]
        unmatched = dict((k, v) for k, v in keywords.items() if k not in params)
        signature = ref.node.args
        if signature.vararg is not None:
            env[signature.vararg.arg] = frozenset([("tuple", tuple(extra))])
            extra = []
        if signature.kwarg is not None:
            env[signature.kwarg.arg] = frozenset([dict_atom(tuple(unmatched.items()))])
            unmatched = {}
        values = list(extra) + list(unmatched.values())
        if self.a.mode != "offset" or not any(carries_ids(v) for v in values):
            return EMPTY
        return self.lose(frozenset().union(*values), node, "ids passed to %s() at %s:%d "
                         "beyond its parameters" % (ref.name, self.fn.rel, self.line(node)))


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
            out[name] = out[name] | frozenset([None])
    return out


def branches_matter(node):
    """Can telling an `if` for DFlash change a flow? Not when both branches only log."""
    for statement in node.body + node.orelse:
        for inner in ast.walk(statement):
            if isinstance(inner, (ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign,
                                  ast.Raise, ast.Yield, ast.YieldFrom)) or \
                    type(inner).__name__ == "NamedExpr":
                return True
            if isinstance(inner, ast.Call) and not (
                    isinstance(inner.func, ast.Attribute) and inner.func.attr in LOG_METHODS
                    and "log" in (dotted_name(inner.func.value) or "").lower()):
                return True
    return False


def all_args(node):
    args = node.args
    return list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs)


def annotation_names(node):
    """Class names an annotation mentions (`SpeculativeConfig | None`, Optional[...],
    "Forward")."""
    out = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            out.append(inner.id)
        elif isinstance(inner, ast.Attribute):
            out.append(inner.attr)
        elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            out.extend(re.findall(r"[A-Za-z_]\w*", inner.value))
    return out


def camel(name):
    """speculative_config -> SpeculativeConfig."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)
