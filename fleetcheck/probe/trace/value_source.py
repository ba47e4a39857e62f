"""The value-source question: what reaches one argument of a call (Attention's
per_layer_sliding_window, the KV cache manager's block-drop flag)? A read of a named
config key or method, a constant, or something that cannot be traced.

A flow runs over each function holding the call; the argument's value is then traced
back from a parameter to what the module's call sites pass for it, and into helpers of
other modules only when their result reaches the argument (Deferred): the calls that
build a layer are many, and their modules are not read for nothing. A finding is filed
per label the value may come from; `?` with the reason where it cannot be traced.
"""

import ast
import re

from fleetcheck.probe.codebase import dotted_name
from fleetcheck.probe.trace.flow import Flow
from fleetcheck.probe.trace.nodes import step_of
from fleetcheck.probe.trace.question import Question
from fleetcheck.probe.trace.state import MAX_CALL_DEPTH, MAX_FINDINGS
from fleetcheck.probe.trace.values import (CallLookup, Constant, ConstantLookup, Deferred,
                                           Items, Keyed, Kwargs, Param, Partial, Source,
                                           Unknown)

MAX_CALLER_DEPTH = 3
NUMERIC_SAME = {"int", "float", "abs", "round"}


class Capture(object):
    """Record the value of one argument wherever a call to `call` is evaluated: by
    keyword, or (for a parameter traced back to its callers) by position."""

    def __init__(self, call, keyword, position=None, missing=False):
        self.call = call
        self.keyword = keyword
        self.position = position
        # a call leaving the argument out is recorded (None: the parameter's default)
        self.missing = missing or position is not None
        self.values = []  # (value or None, the call's step, the argument's own step)


class ValueSource(Question):
    """Findings for the argument `argument` of every call of `call` in the files. Every
    value is something: a source, a constant, or an Unknown with its reason; values also
    carry the config reads of the tests they are computed under."""

    local_callees_only = True

    def __init__(self, call, argument, sources, constants=None):
        self.call = call
        self.argument = argument
        self.sources = sources  # name -> label
        self.constants = constants or {}  # repr of a constant -> label

    # -- what a construct means for the argument ---------------------------------------
    def unknown(self, flow, node, why):
        return frozenset([Unknown(why, flow.step(node, "untraced"))])

    def constant(self, flow, node, value):
        return frozenset([Constant(repr(value)[:40], flow.step(node, "constant"))])

    def key_read(self, flow, node, base, name):
        label = self.sources.get(name)
        if label is not None:
            return frozenset([Source(label, flow.step(node, "source"))])
        return None

    def named_call(self, flow, call):
        if call.name in self.sources:
            return frozenset([Source(self.sources[call.name],
                                     flow.step(call.node, "source"))])
        return None

    def numeric_call(self, flow, call):
        """int(w), float(w), abs(w), round(w): the same value as a number (a window
        normalised by int() is still the window)."""
        func = call.node.func
        if isinstance(func, ast.Name) and func.id in NUMERIC_SAME and len(call.args) == 1 \
                and not call.keywords and func.id not in call.env:
            return call.args[0]
        return None

    def free_name(self, flow, node):
        found = flow.state.codebase.module_constant(flow.fn.rel, node.id)
        if found is not None:
            return frozenset([Constant(repr(found[0])[:40],
                                       step_of(flow.state.codebase, flow.fn.rel, found[1],
                                               found[1], "constant"))])
        if node.id in flow.state.codebase.imports(flow.fn.rel):
            return self.deferred_constant(flow, node, "%s is not assigned in %s()"
                                          % (node.id, flow.fn.name))
        return Question.free_name(self, flow, node)

    def unbound_attribute(self, flow, node, name, base):
        """A class constant, or a config field's declared default."""
        if name and name.startswith("self."):
            return self.deferred_constant(flow, node, "%s is set outside %s()"
                                          % (name, flow.fn.name))
        return self.deferred_constant(flow, node, "attribute .%s" % node.attr)

    def deferred_constant(self, flow, node, why):
        """A name of another module (or class) that may be a constant: looked up only if
        its value reaches the call (ValueSource.expand)."""
        return frozenset([Deferred(why, flow.step(node, "untraced"),
                                   ConstantLookup(flow, node))])

    def untraced(self, flow, node, value, lost_why, unknown_why):
        return self.unknown(flow, node, unknown_why)

    def read_with_default(self, flow, found, args):
        return found | args[1] if len(args) > 1 else found

    def spread(self, flow, node, expression, value):
        return self.unknown(flow, expression, "keywords passed as **%s at %s:%d could not be "
                            "followed" % (dotted_name(expression) or "a value",
                                          flow.fn.rel, flow.line(node)))

    def unfollowed(self, flow, node, what, why, args, keywords, opaque, func=None):
        """A helper of another module is looked up only if its value reaches the call."""
        if func is None:
            return self.unknown(flow, node, "%s could not be followed%s" % (what, why))
        lookup = CallLookup(flow, func, node, tuple(args), tuple(sorted(keywords.items())))
        return frozenset([Deferred("%s could not be followed%s" % (what, why),
                                   flow.step(node, "untraced"), lookup)])

    def not_followed(self, flow, ref, node, args, keywords, why):
        return self.unknown(flow, node, "%s() not followed (%s)" % (ref.name, why))

    def at_call(self, flow, call):
        node, args, keywords, opaque = call.node, call.args, call.keywords, call.opaque
        for capture in flow.watching:
            if call.name != capture.call:
                bound = self.partial_of(flow, call, capture.call)
                if bound is None:
                    continue
                # a functools.partial of the callee: its bound keywords, then the call's
                args, keywords = bound[0] + args, dict(bound[1], **keywords)
                if capture.keyword in keywords:
                    capture.values.append((keywords[capture.keyword],
                                           flow.step(node, "call"), None))
                elif opaque:
                    capture.values.append((passed_on(frozenset().union(*opaque),
                                                     capture.keyword),
                                           flow.step(node, "call"), None))
                elif capture.missing:
                    capture.values.append((None, flow.step(node, "call"), None))
                continue
            step = flow.step(node, "call")
            if capture.keyword not in keywords and opaque:
                capture.values.append((passed_on(frozenset().union(*opaque), capture.keyword),
                                       step, None))
            elif capture.keyword in keywords:
                given = [k.value for k in node.keywords if k.arg == capture.keyword]
                capture.values.append((keywords[capture.keyword], step,
                                       self.argument_step(flow, given, capture.keyword)))
            elif capture.position is not None and capture.position < len(node.args) and \
                    not any(isinstance(a, ast.Starred) for a in node.args):
                capture.values.append((args[capture.position], step,
                                       self.argument_step(flow, [node.args[capture.position]],
                                                          None)))
            elif capture.missing and any(isinstance(a, ast.Starred) for a in node.args):
                capture.values.append((self.unknown(flow, node, "%s may be passed by a *spread "
                                                    "at %s:%d" % (capture.keyword, flow.fn.rel,
                                                                  flow.line(node))),
                                       step, None))
            elif capture.missing:
                capture.values.append((None, step, None))

    def partial_of(self, flow, call, callee):
        """(bound args, bound keywords) when the call calls a functools.partial of
        `callee` held by a name (`make_attn = partial(Attention, ...)`), else None."""
        func = call.node.func
        if not isinstance(func, ast.Name) or func.id not in call.env:
            return None
        partials = [flow.state.partials[a.index] for a in call.env[func.id]
                    if isinstance(a, Partial)]
        for _, target, bound, bound_keywords in partials:
            name = dotted_name(target)
            if name is not None and name.split(".")[-1] == callee:
                return list(bound), dict(bound_keywords)
        return None

    def argument_step(self, flow, given, keyword):
        """The traced argument's own line ('use_eagle=...'), or None when it came through
        a ** spread (no line of the call names it)."""
        if not given:
            return None
        node = given[0]
        rel, first, step, text = flow.step(node, "argument")
        if keyword is not None and keyword + "=" not in text.replace(" ", ""):
            text = "%s=%s" % (keyword, text)  # the keyword sits on the line before its value
        return (rel, first, step, text)

    # -- where flows start, what is found ----------------------------------------------
    def examine(self, state, source):
        """Flows over the functions holding `call(..., argument=...)`; a finding per
        call."""
        state.examined.add(source.rel)
        keyword = self.argument
        done = set()
        for text, ref in state.functions_around(source, source.hit_lines(keyword, True)):
            if not calls_or_binds(self.call, text) or not passes_keyword(keyword, text):
                continue  # the name is a parameter or a variable here, not the call's keyword
            done.add(ref.node.lineno + ref.line_offset)
            self.trace_calls(state, ref, Capture(self.call, keyword))
        self.examine_positional(state, source, done)
        self.examine_subclasses(state, source)

    def examine_subclasses(self, state, source):
        """A subclass of `call` in the file (`class _Attn(Attention)`), constructed
        instead of it: what reaches the base is what its __init__ passes to
        `super().__init__` for the argument (by keyword or at the base's position), traced
        back from its parameters to what the module's calls of the subclass pass."""
        if re.search(r"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*\b%s\b" % re.escape(self.call),
                     source.text, re.M) is None:  # [^)]: a header wrapped over lines too
            return
        resolved = state.codebase.resolve(source.rel, self.call)
        if resolved is None or resolved[0] != "class":
            return
        position = self.callee_position(state, source.rel)
        target = (resolved[1], resolved[2])
        for rel, name in state.codebase.subclasses(resolved[1], resolved[2], [source.rel]):
            if rel != source.rel:
                continue
            init = state.codebase.function(rel, "__init__", name)
            if init is None or not super_init_reaches(state.codebase, rel, name, target):
                continue  # its super().__init__ is a subclass's: traced back from there
            self.trace_calls(state, init, Capture("__init__", self.argument,
                                                  position if position >= 0 else None))

    def trace_calls(self, state, ref, capture):
        Flow(state, ref, self.entry_env(state, ref), 0, (ref.key,), watching=[capture]).run()
        for value, sink, argument in capture.values:
            if value is None:  # left out: the callee's own default (Attention's is None)
                value = frozenset([Constant("the default", sink)])
            self.classify(state, self.expand(state, self.through_callers(state, value, 0), 0), sink, argument)

    def examine_positional(self, state, source, done):
        """Calls that pass the argument by position, bound as Python binds them: the
        position is the argument's in the callee's own def (`Attention.__init__` of the
        install), so a value counts only where it lands in that parameter. The callee's
        module is read only when a call passes that many positional arguments."""
        if not source.contains(self.call):
            return
        position = None
        # only lines that call it, outside the functions the keyword pass traced: a
        # function is parsed only when it may pass the argument by position
        lines = [line for line in source.hit_lines(self.call, True)
                 if self.call + "(" in source.lines[line - 1]]
        fresh = []
        for line in lines:
            block = source.enclosing_function(line)
            if block is not None and block[0] not in done:  # block[0]: the def's line
                fresh.append(line)
        for text, ref in state.functions_around(source, fresh):
            if ref.node.lineno + ref.line_offset in done:
                continue
            widest = widest_positional_call(ref.node, self.call)
            if widest == 0:
                continue
            if position is None:
                position = self.callee_position(state, source.rel)
                if position < 0:
                    return
            if widest > position:
                self.trace_calls(state, ref, Capture(self.call, self.argument, position))

    def callee_position(self, state, rel):
        """The index of `argument` among the positional parameters of `call` as `rel`
        sees it (a class: its __init__, self dropped; a function), or -1 when it is not
        in the tree, takes the argument by keyword only, or collects *args before it."""
        resolved = state.codebase.resolve(rel, self.call)
        ref = None
        if resolved is not None and resolved[0] == "class":
            ref = state.codebase.method(resolved[1], resolved[2], "__init__")
        elif resolved is not None and resolved[0] == "function":
            ref = resolved[1]
        if ref is None:
            return -1
        state.examined.add(ref.rel)
        args = ref.node.args
        positional = [a.arg for a in getattr(args, "posonlyargs", [])] + \
            [a.arg for a in args.args]
        if resolved[0] == "class" and positional:
            positional = positional[1:]
        return positional.index(self.argument) if self.argument in positional else -1

    def entry_env(self, state, ref):
        """Parameters hold themselves, to be replaced by what the module's call sites
        pass (keyword-only ones by keyword; **kwargs key by key)."""
        env = dict((name, frozenset([Param(ref, name, index)]))
                   for index, name in enumerate(ref.params()))
        signature = ref.node.args
        for arg in signature.kwonlyargs:
            env[arg.arg] = frozenset([Param(ref, arg.arg, None)])
        if signature.kwarg is not None:
            env[signature.kwarg.arg] = frozenset([Kwargs(ref, signature.kwarg.arg, ())])
        return env

    def through_callers(self, state, value, depth):
        """Parameters replaced by what the module's call sites pass for them."""
        out = set()
        for atom in value:
            if isinstance(atom, Items):
                out.add(Items(tuple(frozenset(self.through_callers(state, v, depth))
                                    for v in atom.items)))
                continue
            if not isinstance(atom, Param):
                out.add(atom)
                continue
            ref, name = atom.ref, atom.name
            passed = self.passed_by_callers(state, ref, name, atom.position) \
                if depth < MAX_CALLER_DEPTH else []
            if not passed:
                out.add(Unknown("parameter %s of %s() gets no value from a call in %s"
                                % (name, ref.name, ref.rel),
                                step_of(state.codebase, ref.rel,
                                        ref.node.lineno + ref.line_offset,
                                        ref.node.lineno + ref.line_offset, "parameter")))
            for item in passed:
                out |= self.through_callers(state, item, depth + 1)
        return frozenset(out)

    def expand(self, state, value, depth):
        """Deferred values that reach the call, followed now (their modules read only
        now), to what they are."""
        out = set()
        for atom in value:
            if not isinstance(atom, Deferred) or depth >= MAX_CALL_DEPTH:
                out.add(atom.unknown() if isinstance(atom, Deferred) else atom)
                continue
            lookup = atom.lookup
            if isinstance(lookup, ConstantLookup):
                found = lookup.flow.named_constant(lookup.node)
                out.add(Constant(repr(found[0])[:40], found[1]) if found else atom.unknown())
                continue
            flow = lookup.flow
            ref, why = flow.names.callee(lookup.func)
            if ref is None:
                out.add(atom.unknown())
                continue
            result = flow.follow(ref, lookup.node, list(lookup.args), dict(lookup.keywords))
            for index in atom.projection:
                picked = set()
                for item in result:
                    if isinstance(item, Items) and -len(item.items) <= index < len(item.items):
                        picked |= item.items[index]
                    else:
                        picked.add(item)
                result = frozenset(picked)
            out |= self.expand(state, self.through_callers(state, result, depth), depth + 1)
        return frozenset(out)

    def passed_by_callers(self, state, ref, name, position):
        """The values call sites in the function's module pass for one parameter."""
        codebase = state.codebase
        source = codebase.source(ref.rel)
        constructor = ref.name == "__init__" and ref.cls is not None
        called = [ref.cls[1]] if constructor else [ref.name]
        out = []
        def_line = ref.node.lineno + ref.line_offset
        if constructor:
            # a subclass built instead: one without an __init__ of its own runs this one,
            # one with its own passes what its super().__init__ call passes
            for rel, sub in codebase.subclasses(ref.rel, ref.cls[1], [ref.rel]):
                init = codebase.function(rel, "__init__", sub)
                if rel != ref.rel or not super_init_reaches(codebase, rel, sub, ref.cls):
                    continue
                if init is None:
                    called.append(sub)
                    continue
                capture = Capture("__init__", name, position, missing=True)
                Flow(state, init, self.entry_env(state, init), 0, (init.key,),
                     watching=[capture]).run()
                out.extend(value for value, _, _ in capture.values)
        for callee in called:
            lines = [line for line in source.hit_lines(callee, True) if line != def_line]
            for _, site in state.functions_around(source, lines):
                capture = Capture(callee, name, position, missing=True)
                Flow(state, site, self.entry_env(state, site), 0, (site.key,),
                     watching=[capture]).run()
                out.extend(value for value, _, _ in capture.values)
        if not out:
            return out
        default = ref.defaults().get(name)
        if any(value is None for value in out):
            out = [v for v in out if v is not None]
            out.append(Flow(state, ref, {}, 0, ()).eval(default, {})
                       if default is not None else
                       frozenset([Unknown("no value for %s" % name,
                                          step_of(state.codebase, ref.rel, def_line, def_line,
                                                  "parameter"))]))
        return out

    def classify(self, state, value, sink, argument=None):
        labels = {}
        constants = []
        unknown = []
        for atom in value:
            if isinstance(atom, Source):
                labels.setdefault(atom.label, []).append(atom.step)
            elif isinstance(atom, Constant):
                constants.append(atom.step)
                if atom.text in self.constants:
                    labels.setdefault(self.constants[atom.text], []).append(atom.step)
            elif isinstance(atom, (Unknown, Deferred)):
                unknown.append((atom.why, atom.step))
            elif isinstance(atom, Items):
                unknown.append(("a tuple", sink))
            elif isinstance(atom, Keyed):
                if atom.items:
                    unknown.append(("a dict", sink))
                else:
                    constants.append(sink)
        head = [sink] + ([argument] if argument is not None and argument != sink else [])
        for label, steps in sorted(labels.items()):
            self.add_finding(state, label, head, sorted(set(steps))[:3])
        named = set(self.constants.values())
        if not [label for label in labels if label not in named] and constants and \
                not unknown:
            self.add_finding(state, "constant", head, sorted(set(constants))[:3])
        for why, step in sorted(set(unknown))[:2]:
            self.add_finding(state, "?", head, [step], why)

    def add_finding(self, state, label, head, steps, why=None):
        """`head`: the call, then the argument it was traced from on its own line (a long
        call's evidence text elides its middle, where that argument often is)."""
        sink = head[0]
        entry = {"source": label, "file": sink[0], "line": sink[1], "text": sink[3],
                 "step": "call",
                 "trail": [{"file": s[0], "line": s[1], "step": s[2], "text": s[3]}
                           for s in head + [s for s in steps if s not in head]]}
        if why:
            entry["why"] = why
        if entry not in state.findings and len(state.findings) < MAX_FINDINGS:
            state.findings.append(entry)


def passed_on(value, keyword):
    """What a `**` spread passes for `keyword`: a **kwargs parameter passes what its
    callers pass under that keyword."""
    return frozenset(Param(atom.ref, keyword, None) if isinstance(atom, Kwargs) else atom
                     for atom in value)


def super_init_reaches(codebase, rel, cls, target, depth=0):
    """Does `super().__init__` in class `cls` of `rel` run the __init__ of class
    `target` ((rel, name)): a base is the target, or a base in the tree without an
    __init__ of its own reaches it?"""
    for base in codebase.class_bases(rel, cls):
        if tuple(base) == tuple(target):
            return True
        if depth < 3 and codebase.function(base[0], "__init__", base[1]) is None and \
                super_init_reaches(codebase, base[0], base[1], target, depth + 1):
            return True
    return False


def widest_positional_call(node, name):
    """The most positional arguments a call of `name` inside the function passes (0 when
    none, or when a `*spread` makes their positions unknown)."""
    widest = 0
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            called = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else None
            if called == name and not any(isinstance(a, ast.Starred) for a in call.args):
                widest = max(widest, len(call.args))
    return widest


def calls_or_binds(call, text):
    """Does a function's text call `call`, or bind it in a functools.partial?"""
    return call + "(" in text or \
        re.search(r"partial\(\s*(?:[\w.]+\.)?%s\s*[,)]" % re.escape(call), text) is not None


def passes_keyword(name, text):
    """Does a function's text pass `name=` as a keyword (not `name ==`), or name it as a
    dict key (keywords passed as `**kwargs`)?"""
    return re.search(r"[(,\s]%s\s*=(?!=)" % re.escape(name), text) is not None or \
        re.search(r"[\"']%s[\"']" % re.escape(name), text) is not None
