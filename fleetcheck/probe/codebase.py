"""Where a name used in vLLM's code is defined: the function or class a call reaches, in
the same module, in a `vllm.*` module it imports (any import form, aliases, re-exports),
or as a method of a class; the class a receiver is an instance of; the value of a named
constant. The dataflow asks a Scope (one function's view of the tree) and never looks
names up itself, so what a name means is decided in one place. Only the function a flow
reaches is cut out of its file and parsed (a 250 KB runner file holds hundreds), so
following a helper costs what it covers. Files are read through the finders' shared cache, so a build's analysis ships them."""

import ast
import re

from fleetcheck.probe.files import ProbeFileError

IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import\b|import[ \t]+[\w.])",
                         re.MULTILINE)
CLASS_LINE = r"^([ \t]*)class[ \t]+%s\b"
DEF_LINE = r"^([ \t]*)(?:async[ \t]+)?def[ \t]+%s[ \t]*\("
MAX_REEXPORT_DEPTH = 3


class FunctionRef(object):
    """A function cut out of its file: `node` is its parsed def, lines are the file's."""

    def __init__(self, rel, name, node, line_offset, cls=None, static=False):
        self.rel = rel
        self.name = name
        self.node = node
        self.line_offset = line_offset
        self.cls = cls  # (rel, class name) of the class it is a method of
        self.static = static

    @property
    def key(self):
        return (self.rel, self.cls[1] if self.cls else None, self.name, self.node.lineno +
                self.line_offset)

    def params(self):
        """Parameter names in call order, `self`/`cls` dropped for methods."""
        args = self.node.args
        names = [a.arg for a in getattr(args, "posonlyargs", [])] + [a.arg for a in args.args]
        if self.cls is not None and not self.static and names:
            names = names[1:]
        return names

    def defaults(self):
        """Parameter name -> default expression node."""
        args = self.node.args
        positional = [a.arg for a in getattr(args, "posonlyargs", [])] + \
            [a.arg for a in args.args]
        out = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is not None:
                out[arg.arg] = default
        return out


# the class sets attributes by computed names (setattr(self, ...), vars(self)[k] = v,
# self.__dict__.update(...)), or answers any name
DYNAMIC_ATTRIBUTES = re.compile(r"\bsetattr\(\s*(?:self|cls)\b|def\s+__getattr__\b|"
                                r"(?:\b(?:self|cls)\.__dict__|\bvars\(\s*self\s*\))"
                                r"\s*(?:\[[^\]]*\]\s*=(?!=)|\.(?:update|setdefault)\b)")


class Codebase(object):
    """Lookups in the install's tree, memoised for one analysis."""

    def __init__(self, load):
        self.load = load  # rel -> SourceFile or ProbeFileError (the finders' cache)
        self._imports = {}
        self._functions = {}
        self._constants = {}
        self._subclasses = {}
        self._classes = {}

    def source(self, rel):
        entry = self.load(rel)
        return None if isinstance(entry, ProbeFileError) else entry

    # -- modules --------------------------------------------------------------------
    def module_file(self, dotted):
        """vllm.a.b -> vllm/a/b.py or vllm/a/b/__init__.py, when it is in the tree."""
        if not dotted or not (dotted == "vllm" or dotted.startswith("vllm.")):
            return None
        base = dotted.replace(".", "/")
        for rel in (base + ".py", base + "/__init__.py"):
            if self.source(rel) is not None:
                return rel
        return None

    def imports(self, rel):
        """Local name -> (module, attribute or None) for every import in the file (module
        level or inside functions), relative imports resolved against its package."""
        if rel in self._imports:
            return self._imports[rel]
        found = {}
        source = self.source(rel)
        if source is not None:
            package = rel[:-len("/__init__.py")] if rel.endswith("/__init__.py") else \
                rel.rsplit("/", 1)[0]
            package = package.replace("/", ".")
            for statement in import_statements(source.text):
                for name, target in import_bindings(statement, package):
                    found.setdefault(name, target)
        self._imports[rel] = found
        return found

    # -- definitions ----------------------------------------------------------------
    def function(self, rel, name, cls=None):
        """The def of `name` at module level of `rel`, or in class `cls` of `rel`."""
        key = (rel, cls, name)
        if key not in self._functions:
            self._functions[key] = self._find_function(rel, name, cls)
        return self._functions[key]

    def _find_function(self, rel, name, cls):
        source = self.source(rel)
        if source is None or not source.contains(name):
            return None
        if cls is None:
            span, indent = (1, len(source.lines)), ""
        else:
            block = self.class_block(rel, cls)
            if block is None:
                return None
            span, indent = (block[0] + 1, block[1]), block[2]
        pattern = re.compile(DEF_LINE % re.escape(name))
        for line in source.hit_lines(name, True):
            if not span[0] <= line <= span[1]:
                continue
            match = pattern.match(source.lines[line - 1])
            if match is None or (cls is None and match.group(1)) or \
                    (cls is not None and match.group(1) != indent):
                continue
            first, node = source.parsed_function(line)
            if node is None:
                return None
            static = decorated(source.lines, line, "staticmethod")
            return FunctionRef(rel, name, node, first - 1,
                               (rel, cls) if cls is not None else None, static)
        return None

    def class_block(self, rel, cls):
        """(class line, last line, indent of its body) of a class defined in `rel`."""
        key = (rel, cls)
        if key not in self._classes:
            self._classes[key] = self._find_class(rel, cls)
        return self._classes[key]

    def _find_class(self, rel, cls):
        source = self.source(rel)
        if source is None:
            return None
        pattern = re.compile(CLASS_LINE % re.escape(cls))
        for line in source.hit_lines(cls, True):
            match = pattern.match(source.lines[line - 1])
            if match is None:
                continue
            level = len(match.group(1))
            # the class ends before the first code line indented no deeper than its
            # `class` line (found by one regex search: classes run to thousands of lines)
            text = source.text
            source.line_of(0)  # the line offsets
            begin = source._starts[line]
            found = re.compile(r"^[ \t]{0,%d}(?=[^ \t\r\n#)\]])" % level, re.M).search(text, begin)
            end = source.line_of(found.start()) - 1 if found else len(source.lines)
            last = end
            while last > line and (not source.lines[last - 1].strip() or
                                   source.lines[last - 1].lstrip().startswith("#")):
                last -= 1
            body = re.compile(r"^([ \t]+)(?:def |async |@|class )", re.M).search(
                text, begin, source._starts[end] if end < len(source.lines) else len(text))
            return line, last, body.group(1) if body else " " * (level + 4)
        return None

    def class_bases(self, rel, cls):
        """(rel, class name) of the bases of a class that are defined in the tree."""
        out = []
        for base in self.base_names(rel, cls):
            if "." in base:  # module.Class, the module imported in `rel`
                module, _, name = base.rpartition(".")
                head = self.resolve(rel, module.split(".")[0])
                found = self.resolve_in_module(
                    head[1] + module[len(module.split(".")[0]):], name) \
                    if head and head[0] == "module" else None
            else:
                found = self.resolve(rel, base)
            if found and found[0] == "class":
                out.append(found[1:])
        return out

    def base_names(self, rel, cls):
        """The bases a class statement names (`object` left out), as written."""
        block = self.class_block(rel, cls)
        if block is None:
            return []
        source = self.source(rel)
        header = []
        for text in source.lines[block[0] - 1:block[1]]:
            header.append(text.strip())
            if text.rstrip().endswith(":"):
                break
        try:
            # joined by newlines: a header wrapped with a comment on a line still parses
            node = ast.parse("\n".join(header) + " pass").body[0]
        except (SyntaxError, ValueError, IndexError):
            return []
        names = [dotted_name(base) or "?" for base in getattr(node, "bases", [])]
        return [name for name in names if name != "object"]

    def method(self, rel, cls, name, depth=0):
        """A method of a class or of its bases in the tree."""
        found = self.function(rel, name, cls)
        if found is not None or depth >= MAX_REEXPORT_DEPTH:
            return found
        for base_rel, base in self.class_bases(rel, cls):
            found = self.method(base_rel, base, name, depth + 1)
            if found is not None:
                return found
        return None

    def resolve(self, rel, name, depth=0):
        """What a bare name means in `rel`: ("function", ref), ("class", rel, name),
        ("module", dotted), or None when it is not defined in the tree."""
        ref = self.function(rel, name)
        if ref is not None:
            return ("function", ref)
        if self.class_block(rel, name) is not None:
            return ("class", rel, name)
        target = self.imports(rel).get(name)
        if target is None or depth >= MAX_REEXPORT_DEPTH:
            return None
        module, attribute = target
        if attribute is None:
            return ("module", module) if self.module_file(module) else None
        submodule = module + "." + attribute
        if self.module_file(submodule) is not None and \
                self.module_file(module) != self.module_file(submodule):
            return ("module", submodule)
        where = self.module_file(module)
        if where is None:
            return None
        return self.resolve(where, attribute, depth + 1)

    def module_constant(self, rel, name):
        """(value, line) of the last module-level `NAME = <literal>` in `rel`, or None."""
        found = self.module_assignment(rel, name)
        if found is None:
            return None
        value = literal(found[0])
        return None if value is NOT_LITERAL else (value, found[1])

    def module_assignment(self, rel, name):
        """(value expression, line) of the last module-level assignment to `name` in
        `rel` (the value a reader of the module sees), or None."""
        key = (rel, name)
        if key not in self._constants:
            source = self.source(rel)
            self._constants[key] = last_assignment(
                source, [line for line in source.hit_lines(name, True)
                         if source.lines[line - 1].startswith(name)], name) \
                if source is not None and source.contains(name) else None
        return self._constants[key]

    def constant(self, rel, name, depth=0):
        """(value, rel, line) of a named constant as `rel` sees it: assigned at module
        level there (to a literal, or to another constant), or imported from a `vllm.*`
        module (any import form, re-exports); None otherwise."""
        found = self.module_assignment(rel, name)
        if found is not None:
            value = literal(found[0])
            if value is not NOT_LITERAL:
                return value, rel, found[1]
            if isinstance(found[0], ast.Name) and depth < MAX_REEXPORT_DEPTH and \
                    found[0].id != name:
                return self.constant(rel, found[0].id, depth + 1)
            return None
        target = self.imports(rel).get(name)
        if target is None or target[1] is None or depth >= MAX_REEXPORT_DEPTH:
            return None
        where = self.module_file(target[0])
        return self.constant(where, target[1], depth + 1) if where else None

    def declares(self, rel, cls, name, depth=0, inherited=True):
        """Could an instance of the class have the attribute `name`: the class or (when
        `inherited`) a base defines it (a def, a class-level binding, `self.name = ...`),
        or a base is not in the tree (it may)?"""
        block = self.class_block(rel, cls)
        if block is None:
            return True
        source = self.source(rel)
        defines = re.compile(r"^\s*(?:(?:async\s+)?def\s+%s\b|%s\s*[:=]|.*\b(?:self|cls)\.%s"
                             r"\s*(?::[^=]*)?=(?!=))" % ((re.escape(name),) * 3))
        if any(block[0] < line <= block[1] and defines.match(source.lines[line - 1])
               for line in source.hit_lines(name, True)):
            return True
        if any(DYNAMIC_ATTRIBUTES.search(source.lines[line - 1])
               for word in ("setattr", "__getattr__", "__dict__", "vars")
               for line in source.hit_lines(word, True)
               if block[0] < line <= block[1]):
            return True  # set under a computed name, or answered for any name: it may be
        if not inherited:
            return False
        bases = self.class_bases(rel, cls)
        if depth >= MAX_REEXPORT_DEPTH or len(bases) < len(self.base_names(rel, cls)):
            return True
        return any(self.declares(r, b, name, depth + 1) for r, b in bases)

    def names_outside_reads(self, rel, name, skip=()):
        """Does a line of the file (other than the (rel, line) pairs in `skip`) name
        `name` other than as the string a getattr()/hasattr() call reads: a binding, a
        def, `x.name = ...`, `setattr(x, "name", ...)`?"""
        source = self.source(rel)
        if source is None or not source.contains(name):
            return False
        reads = re.compile(r"\b(?:getattr|hasattr)\(([^()]|\([^()]*\))*?[\"']%s[\"']"
                           % re.escape(name))
        word = re.compile(r"\b%s\b" % re.escape(name))
        for line in source.hit_lines(name, True):
            if (rel, line) in skip:
                continue
            if word.search(reads.sub("", source.lines[line - 1])):
                return True
        return False

    def class_constant(self, rel, cls, name, depth=0):
        """(value, rel, line) of a class-level `NAME = <literal>` (enum members too) of
        a class or its bases in the tree; None when an instance assignment `self.NAME =`
        in the class may replace it."""
        block = self.class_block(rel, cls)
        if block is None:
            return None
        source = self.source(rel)
        indent = block[2]
        lines = [line for line in source.hit_lines(name, True)
                 if block[0] < line <= block[1]]
        if any(re.search(r"\b(?:self|cls)\.%s\s*(?::[^=]*)?=(?!=)" % re.escape(name),
                         source.lines[line - 1]) for line in lines):
            return None
        found = last_assignment(source, [line for line in lines if source.lines[line - 1]
                                         .startswith(indent + name)], name, len(indent))
        if found is not None:
            value = literal(found[0])
            return (value, rel, found[1]) if value is not NOT_LITERAL else None
        if depth < MAX_REEXPORT_DEPTH:
            for base_rel, base in self.class_bases(rel, cls):
                found = self.class_constant(base_rel, base, name, depth + 1)
                if found is not None:
                    return found
        return None

    def class_field(self, rel, cls, name):
        """The annotation text of a field `name: T` declared in a class body, or None."""
        block = self.class_block(rel, cls)
        if block is None:
            return None
        source = self.source(rel)
        pattern = re.compile(r"^%s%s\s*:\s*([^=#]+)" % (re.escape(block[2]), re.escape(name)))
        for line in source.hit_lines(name, True):
            if block[0] < line <= block[1]:
                match = pattern.match(source.lines[line - 1])
                if match:
                    return match.group(1).strip()
        return None

    def subclasses(self, rel, cls, files, depth=0):
        """(rel, name) of the classes in `rel` and in `files` (already read for the
        finder) that derive from class `cls` of `rel`, directly or not."""
        key = (rel, cls, depth)
        if key in self._subclasses:
            return self._subclasses[key]
        out = []
        pattern = re.compile(r"^[ \t]*class[ \t]+(\w+)[ \t]*\((.*)")
        for where in sorted(set(files) | {rel}):
            source = self.source(where)
            if source is None or not source.contains(cls):
                continue
            for line in source.hit_lines(cls, True):
                # the class statement naming cls, its header wrapped over a few lines
                match = None
                for opener in range(line, max(0, line - 12), -1):
                    match = pattern.match(source.lines[opener - 1])
                    if match is not None or source.lines[opener - 1].rstrip().endswith(":") \
                            and opener != line:
                        break
                if match is None or match.group(1) == cls or \
                        (where, match.group(1)) in out:
                    continue
                if (rel, cls) in self.class_bases(where, match.group(1)):
                    out.append((where, match.group(1)))
        self._subclasses[key] = out
        if depth < 2:
            for where, name in list(out):
                for found in self.subclasses(where, name, files, depth + 1):
                    if found not in out:
                        out.append(found)
        return out

    def resolve_in_module(self, dotted, name):
        where = self.module_file(dotted)
        return self.resolve(where, name) if where else None


class Scope(object):
    """What names mean inside one function: `self_cls` is the class `self` is known to be
    (or derive from), `local_defs` the functions the body has defined so far (shared
    with the flow that fills it)."""

    def __init__(self, codebase, fn, self_cls, local_defs):
        self.codebase = codebase
        self.fn = fn
        self.self_cls = self_cls
        self.local_defs = local_defs

    def callee(self, func, local_only=False):
        """(FunctionRef, "") for a function of the tree, or (None, why not). local_only:
        only the module's own functions and methods (nothing else is read)."""
        codebase = self.codebase
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
        imported = self.codebase.imports(self.fn.rel).get(prefix)
        if imported is not None and imported[1] is None:
            return imported[0]
        if "." in prefix:
            return first + "." + prefix.split(".", 1)[1]
        return first

    def overrides(self, func, ref, files):
        """(method, class) of each subclass in the tree (`rel` and `files`) that
        overrides the method `self.m()` reaches: the code does not say which class was
        built, so each counts."""
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and
                func.value.id in ("self", "cls") and self.self_cls):
            return []
        codebase = self.codebase
        out = []
        for rel, cls in codebase.subclasses(self.self_cls[0], self.self_cls[1], files):
            found = codebase.function(rel, func.attr, cls)
            if found is not None and found.key != ref.key:
                out.append((found, (rel, cls)))
        return out

    def predicate(self, func):
        """The function a predicate call (`spec.use_dflash()`) reaches, or None."""
        if isinstance(func, ast.Name) and func.id in self.local_defs:
            return self.local_defs[func.id]
        if isinstance(func, ast.Name):
            return self.codebase.function(self.fn.rel, func.id)
        if not isinstance(func, ast.Attribute):
            return None
        owner = self.receiver_class(func.value, 0)
        if owner is None:
            return None
        return self.codebase.method(owner[0], owner[1], func.attr)

    def receiver_class(self, node, depth):
        """(rel, class) an expression's value is an instance of, from what the code
        declares: `self`, a parameter's annotation, a field's annotation in its class,
        the value `__init__` assigns to `self.x`, or the class its name spells
        (`speculative_config` -> `SpeculativeConfig`) as the module imports it."""
        codebase = self.codebase
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
                        found = Scope(codebase, init, owner, {}).receiver_class(
                            statement.value, depth + 1)
                        if found:
                            return found
        return self.class_among(self.fn.rel, [camel(node.attr)])

    def class_among(self, rel, names):
        for name in names:
            if name and name[0].isupper():
                found = self.codebase.resolve(rel, name)
                if found and found[0] == "class":
                    return found[1:]
        return None

    def named_constant(self, node):
        """(value, rel, line) of a named constant: module level (here or imported from
        `vllm.*`), class level (`self.X`, `Class.X`, enum members and their `.value`),
        or a module's (`module.X`); None otherwise."""
        codebase = self.codebase
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
        return found


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


NOT_LITERAL = object()


def literal(node):
    """The value of a literal expression (numbers, strings, tuples of them, -1), or
    NOT_LITERAL."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def last_assignment(source, lines, name, indent=0):
    """(value expression, line) of the last of the `name = ...` / `name: T = ...`
    statements starting on `lines` at `indent`; a statement may span lines."""
    for line in reversed(lines):
        rest = source.lines[line - 1][indent + len(name):].lstrip()
        if not (rest.startswith("=") and not rest.startswith("==")) and \
                not (rest.startswith(":") and "=" in rest):
            continue
        for end in range(line, min(line + 30, len(source.lines)) + 1):
            text = "\n".join(piece[indent:] for piece in source.lines[line - 1:end])
            try:
                node = ast.parse(text).body[0]
            except (SyntaxError, ValueError, IndexError):
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                return node.value, line
            break
    return None


def decorated(lines, line, name):
    """Is the def on `line` decorated with @name?"""
    index = line - 2
    while index >= 0 and lines[index].lstrip().startswith("@"):
        if lines[index].strip().lstrip("@").split("(")[0].strip() == name:
            return True
        index -= 1
    return False


def import_statements(text):
    """Each import statement of the file as its own source text (parenthesised and
    backslash-continued ones joined), found without parsing the file."""
    out = []
    for match in IMPORT_LINE.finditer(text):
        end = text.find("\n", match.start())
        end = len(text) if end < 0 else end
        statement = text[match.start():end]
        while (statement.count("(") > statement.count(")") or
               statement.rstrip().endswith("\\")) and end < len(text):
            nxt = text.find("\n", end + 1)
            nxt = len(text) if nxt < 0 else nxt
            statement += "\n" + text[end + 1:nxt]
            end = nxt
        out.append(statement.strip())
    return out


def import_bindings(statement, package):
    """(local name, (module, attribute or None)) for one import statement."""
    try:
        node = ast.parse(statement).body[0]
    except (SyntaxError, ValueError, IndexError):
        return []
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                out.append((alias.asname, (alias.name, None)))
            else:
                out.append((alias.name.split(".")[0], (alias.name.split(".")[0], None)))
                out.append((alias.name, (alias.name, None)))
    elif isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
            module = ".".join(parts + ([module] if module else []))
        for alias in node.names:
            out.append((alias.asname or alias.name, (module, alias.name)))
    return out
