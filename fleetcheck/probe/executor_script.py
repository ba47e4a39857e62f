"""The executor's child: the script the install's own interpreter runs (see executor.py).
It is a string because it never runs in the probe: the probe is Python 3.8 and stdlib
only, while the child runs under the install's interpreter (3.10+ for vLLM 0.2x) and
executes the install's own source. Standard library only there too.

What it does, in short: the install's modules are executed from their source, statement
by statement, with an `__import__` of its own (the standard library is real, the fix
path's modules are executed the same way on demand, everything else is a permissive
stand-in); a statement that cannot run is recorded and skipped. Then each question calls
the install's functions with DFlash's inputs. Where a result depends on a stand-in (its
truth value, a comparison, a membership test), the call runs again with the other
outcome, up to a bound of runs; the answers of all runs are printed, each with the
choices it took (file:line) and the install's lines it executed (sys.settrace)."""

SCRIPT = r'''
import ast, builtins, dataclasses, fnmatch, inspect, json, os, re, signal, stat, sys, time, types

REQUEST = json.loads(sys.argv[1])
SITE = REQUEST["site"].rstrip("/")  # /proc/self/fd/N: the site dir the probe opened for it
START = time.monotonic()
DEADLINE = START + float(REQUEST.get("budget_s", 10))
MAX_RUNS = int(REQUEST.get("max_runs", 64))
MAX_LINES = 400000  # lines one run may execute in the install's files
TEXT = 200


class OutOfTime(BaseException):
    """Not an Exception: the install's own `except Exception` must not swallow it."""


class Choices(object):
    """The outcomes of the unknowns of one run: a prefix forced, the rest False."""

    def __init__(self):
        self.forced, self.taken, self.lines, self.memo = [], [], 0, {}
        self.first = True

    def start(self, forced):
        self.forced, self.taken, self.lines, self.memo = list(forced), [], 0, {}

    def choose(self, what):
        """The outcome of one unknown. Inside an assert it holds (the install asserts what
        it relies on); the same unknown at the same line keeps its first outcome within a
        run (a platform query does not change its answer between two layers)."""
        if time.monotonic() > DEADLINE:
            raise OutOfTime()
        path, line = install_frame()
        if path is not None and line in assert_lines(path):
            return True
        at = "%s:%d: %s" % (rel(path), line, line_text(path, line)) if path else \
            "(outside the install)"
        key = (at, what)
        if key in self.memo:
            return self.memo[key]
        index = len(self.taken)
        value = self.forced[index] if index < len(self.forced) else False
        self.taken.append((value, at, what))
        self.memo[key] = value
        return value


CHOICES = Choices()


RELATIVE = {}


def rel(path):
    """The path inside the site dir, or None: asked for every frame of every traced line,
    so each answer is kept."""
    try:
        return RELATIVE[path]
    except KeyError:
        pass
    answer = os.path.relpath(path, SITE) if path.startswith(SITE + os.sep) else None
    RELATIVE[path] = answer
    return answer


SOURCES = {}
FILE_ERRORS = []  # "file: why" of the install's files the child could not read
READ = set()  # the install's files this question read or executed (its answer rests on them)
MAX_SOURCE = 16 << 20


class NotRegular(OSError):
    pass


def source(path):
    """A file of the install, read once: opened without blocking and read only when it is
    a regular file (a FIFO or a device in the tree is refused, never waited on)."""
    data = SOURCES.get(path)
    if data is not None:
        READ.add(path)
        return data
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotRegular(path, "not a regular file")
            chunks, size = [], 0
            while size <= MAX_SOURCE:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        why = "%s: %s" % (rel(path) or path, exc.strerror or exc.args[-1])
        FILE_ERRORS.append(why)
        raise
    data = SOURCES[path] = b"".join(chunks)
    READ.add(path)
    return data


LINE_CACHE = {}


def line_text(path, line):
    lines = LINE_CACHE.get(path)
    if lines is None:
        try:
            lines = source(path).decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        LINE_CACHE[path] = lines
    return lines[line - 1].strip()[:TEXT] if 0 < line <= len(lines) else ""


def install_frame():
    """(path, line) of the innermost frame in the install's files, or (None, None)."""
    frame = sys._getframe(1)
    while frame is not None:
        if rel(frame.f_code.co_filename) is not None:
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None, None


def where():
    """file:line: text of the innermost frame in the install's files."""
    path, line = install_frame()
    if path is None:
        return "(outside the install)"
    return "%s:%d: %s" % (rel(path), line, line_text(path, line))


def assert_lines(path):
    """Whether a line is an assert's: its text starts with `assert` (a cheap reading; an
    unknown on an assert's continuation line is explored like any other)."""
    return AssertLines(path)


class AssertLines(object):
    def __init__(self, path):
        self.path = path

    def __contains__(self, line):
        return line_text(self.path, line).startswith("assert ")


# --- stand-ins ---------------------------------------------------------------------------
CALLS = []  # (stand-in name, args, kwargs) of calls made on stand-ins during a run


def is_code(value):
    return isinstance(value, (type, types.FunctionType, types.MethodType))


class StandIn(object):
    """Anything the install needs that is not the standard library or the fix path's own
    code (torch, triton, pydantic, transformers, the rest of vLLM): every attribute, call,
    item and operation gives another stand-in; its truth value and comparisons are the
    run's choices; called on a function or class (a decorator), it gives that back."""

    def __init__(self, name):
        object.__setattr__(self, "_fc_name", name)
        object.__setattr__(self, "_fc_attrs", {})

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        attrs = object.__getattribute__(self, "_fc_attrs")
        if attr not in attrs:
            name = object.__getattribute__(self, "_fc_name")
            attrs[attr] = REPLACEMENTS.get(attr) or StandIn(name + "." + attr)
        return attrs[attr]

    def __setattr__(self, attr, value):
        object.__getattribute__(self, "_fc_attrs")[attr] = value

    def __delattr__(self, attr):
        object.__getattribute__(self, "_fc_attrs").pop(attr, None)

    def __call__(self, *args, **kwargs):
        if args and is_code(args[0]):
            return args[0]
        name = object.__getattribute__(self, "_fc_name")
        if len(CALLS) < 2000:
            CALLS.append((name, args, kwargs))
        return StandIn(name + "()")

    def __mro_entries__(self, bases):
        attrs = object.__getattribute__(self, "_fc_attrs")
        if "__fc_base" not in attrs:
            attrs["__fc_base"] = permissive_base(object.__getattribute__(self, "_fc_name"))
        return (attrs["__fc_base"],)

    def __repr__(self):
        return "<%s>" % object.__getattribute__(self, "_fc_name")

    __str__ = __repr__

    def __format__(self, spec):
        return repr(self)

    def __hash__(self):
        return id(self)

    def __bool__(self):
        return CHOICES.choose("truth value of %r" % self)

    def __eq__(self, other):
        return other is self or CHOICES.choose("%r == %r" % (self, other))

    def __ne__(self, other):
        return other is not self and CHOICES.choose("%r != %r" % (self, other))

    def __lt__(self, other):
        return CHOICES.choose("%r < %r" % (self, other))

    def __le__(self, other):
        return CHOICES.choose("%r <= %r" % (self, other))

    def __gt__(self, other):
        return CHOICES.choose("%r > %r" % (self, other))

    def __ge__(self, other):
        return CHOICES.choose("%r >= %r" % (self, other))

    def __contains__(self, item):
        return CHOICES.choose("%r in %r" % (item, self))

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __index__(self):
        return 1

    __int__ = __index__

    def __float__(self):
        return 1.0

    def __getitem__(self, key):
        return StandIn("%s[]" % object.__getattribute__(self, "_fc_name"))

    def __setitem__(self, key, value):
        pass

    def __delitem__(self, key):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __instancecheck__(self, obj):
        return CHOICES.choose("isinstance(%r, %r)" % (obj, self))

    def __subclasscheck__(self, cls):
        return CHOICES.choose("issubclass(%r, %r)" % (cls, self))

    def _fc_op(self, *other):
        return StandIn("(%s op)" % object.__getattribute__(self, "_fc_name"))

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fc_op
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _fc_op
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __pos__ = __invert__ = _fc_op
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _fc_op
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __abs__ = _fc_op


class Given(StandIn):
    """One of DFlash's inputs (the speculative config, the model config, self): an object
    that exists, equal only to itself; its attributes not given are stand-ins."""

    def __bool__(self):
        return True

    def __eq__(self, other):
        return other is self

    def __ne__(self, other):
        return other is not self

    __hash__ = StandIn.__hash__


def globbed(relative, pattern):
    """fnmatch, with `**/` also matching no directory at all (as the probe's globs do)."""
    return fnmatch.fnmatch(relative, pattern) or (
        "**/" in pattern and fnmatch.fnmatch(relative, pattern.replace("**/", "")))


def permissive_base(name):
    """A real class standing in for a stand-in used as a base class: any arguments, any
    attribute an instance was not given is a stand-in."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, attr):
        """A name the code sets on its objects somewhere and this one has not been given
        yet is missing (read before the line that sets it); any other name may be the
        stood-in base's own (nn.Module's), so it is a stand-in."""
        if attr.startswith("__") and attr.endswith("__") or attr in set_on_self(type(self)):
            raise AttributeError(attr)
        value = StandIn("%s.%s" % (type(self).__name__, attr))
        object.__setattr__(self, attr, value)
        return value

    def __init_subclass__(cls, **kwargs):
        pass

    def __class_getitem__(cls, item):
        return cls

    return type(name.rsplit(".", 1)[-1], (object,), {
        "__init__": __init__, "__getattr__": __getattr__,
        "__init_subclass__": classmethod(__init_subclass__),
        "__class_getitem__": classmethod(__class_getitem__)})


class Namespace(object):
    """A config as a model's config is: the attributes it has, AttributeError for others."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def get_text_config(self, *args, **kwargs):
        return self

    def to_dict(self):
        return dict(self.__dict__)

    def __repr__(self):
        return "config(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))


# --- loading the install's modules -----------------------------------------------------
REAL_GLOBS = [g for g in REQUEST.get("real", [])]
REPLACEMENTS = {}  # name -> recorder: what `from ... import NAME` gives wherever it is
MODULES = {}
SKIPPED = []  # "file:line: text (error)" of top-level statements that could not run
def explored_isinstance(obj, classes):
    """isinstance for the install's code: of a stand-in (what is not DFlash's input) the
    answer is unknown, so it is one of the run's choices."""
    if type(obj) is StandIn:
        return CHOICES.choose("isinstance(%r, %r)" % (obj, classes))
    return isinstance(obj, classes)


BUILTINS = dict(builtins.__dict__, isinstance=explored_isinstance)


def module_file(name):
    base = os.path.join(SITE, *name.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
        if os.path.lexists(path) and not os.path.isdir(path):
            try:  # a module that is not a regular file: named in FILE_ERRORS
                source(path)
            except OSError:
                pass
    return None


def is_real(name):
    path = module_file(name)
    if path is None:
        return None
    relative = rel(path)
    return path if any(globbed(relative, g) for g in REAL_GLOBS) else None


def module_future_flags(path):
    """The __future__ features the module's own code was compiled with."""
    import __future__
    mask = 0
    for feature in __future__.all_feature_names:
        mask |= getattr(__future__, feature).compiler_flag
    return compiled(path).co_flags & mask


def future_flags(tree):
    import __future__
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                if feature is not None:
                    flags |= feature.compiler_flag
    return flags


PARSED = {}
COMPILED = {}


def parse(path):
    if path not in PARSED:
        PARSED[path] = ast.parse(source(path), path)
    return PARSED[path]


def load_real(name, path):
    module = types.ModuleType(name)
    module.__file__ = path
    module.__package__ = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    if path.endswith("__init__.py"):
        module.__path__ = [os.path.dirname(path)]
    module.__dict__["__builtins__"] = dict(BUILTINS, __import__=fake_import)
    MODULES[name] = module
    sys.modules[name] = module  # dataclasses and typing look a class's module up there
    try:  # most modules run whole: one compile (once per child), no syntax tree
        exec(compiled(path), module.__dict__)
        return module
    except OutOfTime:
        raise
    except BaseException as exc:
        failed = failing_line(sys.exc_info()[2], path)
        error = exc
    tree = parse(path)
    flags = future_flags(tree)
    after = None
    for index, node in enumerate(tree.body):
        if node.lineno <= (failed or 0) <= (getattr(node, "end_lineno", None) or node.lineno):
            after = index
            SKIPPED.append("%s:%d: %s (%s: %s)" % (
                rel(path), node.lineno, line_text(path, node.lineno), type(error).__name__,
                str(error)[:TEXT]))
            break
    if after is None:  # it failed before any statement of its own ran (a SyntaxError)
        SKIPPED.append("%s: %s: %s" % (rel(path), type(error).__name__, str(error)[:TEXT]))
        return module
    for node in tree.body[after + 1:]:
        if time.monotonic() > DEADLINE:
            raise OutOfTime()
        code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec", flags,
                       dont_inherit=True)
        try:
            exec(code, module.__dict__)
        except OutOfTime:
            raise
        except BaseException as exc:
            SKIPPED.append("%s:%d: %s (%s: %s)" % (
                rel(path), node.lineno, line_text(path, node.lineno), type(exc).__name__,
                str(exc)[:TEXT]))
    return module


def failing_line(tb, path):
    """The line of the module's own top-level code where it raised."""
    line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == path and code.co_name == "<module>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def vllm_module(name):
    if name in MODULES:
        return MODULES[name]
    path = is_real(name)
    if path is not None:
        module = load_real(name, path)
    else:
        module = StandIn(name)
        MODULES[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(vllm_module(parent), child, module)
    return module


def resolve(name, globals_, level):
    if not level:
        return name
    package = (globals_ or {}).get("__package__") or ""
    parts = package.split(".")
    base = ".".join(parts[:len(parts) - (level - 1)]) if level > 1 else package
    return base + "." + name if name else base


class Lazy(object):
    """A name imported from a fix-path module not loaded yet: the module is executed only
    when the name is used (called, read, subclassed, tested), so a fix-path module's
    dozens of imports cost nothing until one of them is on DFlash's path."""

    def __init__(self, module, attr):
        object.__setattr__(self, "_fc_where", (module, attr))

    def _fc(self):
        cache = object.__getattribute__(self, "__dict__")
        if "_fc_value" not in cache:
            module, attr = object.__getattribute__(self, "_fc_where")
            loaded = vllm_module(module)
            value = getattr(loaded, attr, None) if isinstance(loaded, types.ModuleType) \
                else getattr(loaded, attr)
            if value is None and isinstance(loaded, types.ModuleType) and \
                    not hasattr(loaded, attr):
                value = vllm_module(module + "." + attr) if module_file(
                    module + "." + attr) else StandIn(module + "." + attr)
            cache["_fc_value"] = value
        return cache["_fc_value"]

    def __getattr__(self, attr):
        return getattr(Lazy._fc(self), attr)

    def __setattr__(self, attr, value):
        setattr(Lazy._fc(self), attr, value)

    def __call__(self, *args, **kwargs):
        return Lazy._fc(self)(*args, **kwargs)

    def __mro_entries__(self, bases):
        value = Lazy._fc(self)
        if isinstance(value, type):
            return (value,)
        return value.__mro_entries__(bases)

    def __instancecheck__(self, obj):
        value = Lazy._fc(self)
        return isinstance(obj, value) if isinstance(value, (type, tuple)) else False

    def __subclasscheck__(self, cls):
        value = Lazy._fc(self)
        return issubclass(cls, value) if isinstance(value, (type, tuple)) else False

    def __bool__(self):
        return bool(Lazy._fc(self))

    def __eq__(self, other):
        return Lazy._fc(self) == other

    def __ne__(self, other):
        return Lazy._fc(self) != other

    def __hash__(self):
        return id(self)

    def __iter__(self):
        return iter(Lazy._fc(self))

    def __len__(self):
        return len(Lazy._fc(self))

    def __getitem__(self, key):
        return Lazy._fc(self)[key]

    def __contains__(self, item):
        return item in Lazy._fc(self)

    def __or__(self, other):  # an annotation's `X | None`: nothing to load for it
        return StandIn("(annotation)")

    __ror__ = __or__

    def __index__(self):
        return Lazy._fc(self).__index__()

    def __int__(self):
        return int(Lazy._fc(self))

    def __neg__(self):
        return -Lazy._fc(self)


def _lazy_op(name):
    import operator
    function = getattr(operator, name)

    def forward(self, other):
        return function(Lazy._fc(self), other)

    def reverse(self, other):
        return function(other, Lazy._fc(self))
    return forward, reverse


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "xor",
              "lshift", "rshift", "lt", "le", "gt", "ge"):
    _forward, _reverse = _lazy_op(_name)
    _dunder = _name.rstrip("_")
    setattr(Lazy, "__%s__" % _dunder, _forward)
    if _dunder not in ("lt", "le", "gt", "ge"):
        setattr(Lazy, "__r%s__" % _dunder, _reverse)

    def __repr__(self):
        return "<lazy %s.%s>" % object.__getattribute__(self, "_fc_where")


def fake_import(name, globals=None, locals=None, fromlist=(), level=0):
    full = resolve(name, globals, level)
    top = full.split(".")[0]
    if top != "vllm":
        try:
            __import__(full)
            module = sys.modules[full]
        except ImportError:
            module = MODULES.get(full) or MODULES.setdefault(full, StandIn(full))
        if fromlist:
            return module
        return sys.modules.get(top) or MODULES.get(top) or module
    if fromlist and full not in MODULES and is_real(full) and not any(
            module_file(full + "." + item) for item in fromlist):
        holder = types.SimpleNamespace()
        for item in fromlist:
            setattr(holder, item, REPLACEMENTS.get(item) or Lazy(full, item))
        return holder
    module = vllm_module(full)
    for item in fromlist or ():
        if item == "*":
            continue
        if item in REPLACEMENTS:
            if isinstance(module, types.ModuleType):
                module.__dict__[item] = REPLACEMENTS[item]
            continue
        if isinstance(module, types.ModuleType) and not hasattr(module, item):
            if module_file(full + "." + item):
                vllm_module(full + "." + item)
            else:
                setattr(module, item, StandIn(full + "." + item))
    return module if fromlist else vllm_module("vllm")


# --- finding what to run (static: where the key is read, which class is mapped) ----------
def unlisted(exc):
    """A directory of the install the child could not list is named in FILE_ERRORS (one
    that does not exist is no error: an older install has no such package)."""
    if not isinstance(exc, FileNotFoundError):
        FILE_ERRORS.append("%s: %s" % (rel(exc.filename or "") or exc.filename,
                                       exc.strerror or exc))


def files_under(globs):
    out = []
    for pattern in globs:
        base = pattern.split("*")[0].rsplit("/", 1)[0]
        top = os.path.join(SITE, base)
        if os.path.isfile(os.path.join(SITE, pattern)):
            out.append(pattern)
            continue
        for dirpath, dirnames, filenames in os.walk(top, onerror=unlisted):
            dirnames.sort()
            for filename in sorted(filenames):
                relative = rel(os.path.join(dirpath, filename))
                if relative and relative.endswith(".py") and globbed(relative, pattern) \
                        and relative not in out:
                    out.append(relative)
    return out


def module_name(relative):
    name = relative[:-3].replace(os.sep, ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


CO_OPTIMIZED = 0x1  # a function's code object (a class body's is not)


def compiled(path):
    """The module's code object, compiled once per child (found and loaded from it)."""
    code = COMPILED.get(path)
    READ.add(path)  # compiled by an earlier question: its source is not read again
    if code is None:
        code = COMPILED[path] = compile(source(path), path, "exec", 0, True)
    return code


def key_names(data, key):
    """The key's text and the module-level names bound to it (`_KEY = "target_layer_ids"`)."""
    text = data.decode("utf-8", "replace")
    return [key] + re.findall(r"(?m)^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=\s*[\"']%s[\"']\s*$" %
                              re.escape(key), text)


def holds_constant(value, key):
    return value == key or (isinstance(value, (tuple, frozenset)) and any(
        holds_constant(item, key) for item in value))


def code_reads(code, names):
    """Whether the code (with the lambdas, comprehensions and defs inside it) holds the
    key's text as a constant or uses a name bound to it."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if code_reads(const, names):
                return True
        elif holds_constant(const, names[0]):
            return True
    used = set(code.co_names) | set(code.co_varnames) | set(code.co_cellvars) | \
        set(code.co_freevars)
    return any(name in used for name in names[1:])


class Def(object):
    """A def found in a module's code: its name and the line of its `def`."""

    def __init__(self, path, code):
        self.name = code.co_name
        self.lineno = code.co_firstlineno
        pattern = re.compile(r"(async\s+)?def\s+%s\b" % re.escape(code.co_name))
        for line in range(code.co_firstlineno, code.co_firstlineno + 40):
            if pattern.match(line_text(path, line)):
                self.lineno = line
                break


def defs_reading(path, names):
    """(class name or None, Def) of each module-level def and method that holds the key,
    found in the compiled module (no syntax tree of a 300 KB model runner is built)."""
    found = []
    for const in compiled(path).co_consts:
        if not isinstance(const, types.CodeType) or const.co_name.startswith("<"):
            continue
        if const.co_flags & CO_OPTIMIZED:
            if code_reads(const, names):
                found.append((None, Def(path, const)))
            continue
        for item in const.co_consts:  # a class body: its methods
            if isinstance(item, types.CodeType) and item.co_flags & CO_OPTIMIZED and \
                    not item.co_name.startswith("<") and code_reads(item, names):
                found.append((const.co_name, Def(path, item)))
    return sorted(found, key=lambda pair: pair[1].lineno)


def class_def(tree, name):
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def follow_class(module, name, hops=0):
    """(path, ClassDef) of `name` as `module` binds it, following `from X import name`."""
    path = module_file(module)
    if path is None or hops > 4:
        return None, None
    tree = parse(path)
    node = class_def(tree, name)
    if node is not None:
        return path, node
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for item in tree.body:
        if isinstance(item, ast.ImportFrom) and any(
                (a.asname or a.name) == name for a in item.names):
            source = resolve(item.module or "", {"__package__": package}, item.level)
            original = next(a.name for a in item.names if (a.asname or a.name) == name)
            return follow_class(source, original, hops + 1)
    return None, None


def signature_of(path, node):
    """An inspect.Signature of the class's __init__ as written: defaults are literals,
    or stand-ins named by their text."""
    init = next((i for i in node.body if isinstance(i, ast.FunctionDef) and
                 i.name == "__init__"), None)
    if init is None:
        return None
    args = init.args
    namespace = {}

    def default(expr):
        try:
            value = ast.literal_eval(expr)
        except ValueError:
            value = StandIn(ast.get_source_segment(source(path).decode("utf-8", "replace"), expr) or "default")
        key = "_d%d" % len(namespace)
        namespace[key] = value
        return ast.Name(id=key, ctx=ast.Load())

    def plain(arg):
        return ast.arg(arg=arg.arg, annotation=None)

    new = ast.arguments(
        posonlyargs=[plain(a) for a in getattr(args, "posonlyargs", [])],
        args=[plain(a) for a in args.args],
        vararg=plain(args.vararg) if args.vararg else None,
        kwonlyargs=[plain(a) for a in args.kwonlyargs],
        kw_defaults=[default(d) if d is not None else None for d in args.kw_defaults],
        kwarg=plain(args.kwarg) if args.kwarg else None,
        defaults=[default(d) for d in args.defaults])
    function = ast.FunctionDef(name="init", args=new, body=[ast.Pass()], decorator_list=[],
                               returns=None, type_comment=None)
    module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
    exec(compile(module, path, "exec"), namespace)
    return inspect.signature(namespace["init"])


RECORDED = []  # (class name, {parameter: value}, where) of each recorder's construction


def recorder(name, signature, origin):
    """A class standing in for the install's `name` (Attention, KVCacheManager): built, it
    records what each parameter of the install's own __init__ got."""

    def __init__(self, *args, **kwargs):
        if signature is None:  # the install has no such class to bind to: keywords only
            RECORDED.append((name, dict(kwargs, args=list(args)), where()))
            return
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            values.pop(next(iter(signature.parameters)), None)
        except TypeError as exc:
            values = {"error": "does not fit %s's signature: %s" % (name, exc)}
        RECORDED.append((name, values, where()))

    base = permissive_base(name)
    return type(name, (base,), {"__init__": __init__, "__fc_origin": origin})


# --- running one question ----------------------------------------------------------------
class Tracer(object):
    def __init__(self):
        self.lines = []
        self.seen = set()
        self.returns = {}

    def __call__(self, frame, event, arg):
        name = rel(frame.f_code.co_filename)
        if name is None:
            return None
        return self.local

    def local(self, frame, event, arg):
        if event == "line":
            CHOICES.lines += 1
            if CHOICES.lines > MAX_LINES or (CHOICES.lines % 1000 == 0 and
                                            time.monotonic() > DEADLINE):
                raise OutOfTime()
            key = (frame.f_code.co_filename, frame.f_lineno)
            if key not in self.seen and len(self.lines) < 400:
                self.seen.add(key)
                self.lines.append(key)
        return self.local


def traced(call):
    """(outcome, lines): outcome is ("returned", value) or ("raised", text, where). Only
    a question's first run is traced line by line (its evidence); the others are bounded
    by the deadline's alarm."""
    tracer = Tracer()
    del CALLS[:]
    del RECORDED[:]
    if CHOICES.first:
        sys.settrace(tracer)
    try:
        value = call()
        outcome = ("returned", value)
    except OutOfTime:
        raise
    except AssertionError as exc:
        outcome = ("infeasible", "assert", last_install_line(sys.exc_info()[2]))
    except BaseException as exc:
        tb = sys.exc_info()[2]
        kind = "rejected" if raised_by_install(tb) else "raised"
        outcome = (kind, "%s: %s" % (type(exc).__name__, str(exc)[:TEXT]),
                   last_install_line(tb))
    finally:
        sys.settrace(None)
    lines = ["%s:%d: %s" % (rel(f), n, line_text(f, n)) for f, n in tracer.lines]
    return outcome, lines


def raised_by_install(tb):
    """Whether the install's own `raise` statement raised it (a refusal the code means),
    not Python or a stand-in failing under it."""
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = tb.tb_frame.f_code.co_filename
    if rel(path) is None:
        return False
    line = tb.tb_lineno
    return any(line_text(path, n).startswith("raise ") for n in range(max(line - 3, 1), line + 1))


def last_install_line(tb):
    found = None
    while tb is not None:
        name = rel(tb.tb_frame.f_code.co_filename)
        if name is not None:
            found = "%s:%d: %s" % (name, tb.tb_lineno, line_text(tb.tb_frame.f_code.co_filename,
                                                                   tb.tb_lineno))
        tb = tb.tb_next
    return found


def explore(run):
    """Every run of `run` over the choices its unknowns make, depth first, at most
    MAX_RUNS: [(observation, choices, lines)] and whether every path was run."""
    results = []
    pending = [[]]
    CHOICES.first = True
    while pending and len(results) < MAX_RUNS:
        if time.monotonic() > DEADLINE:
            raise OutOfTime()
        forced = pending.pop()
        CHOICES.start(forced)
        observation, lines = run()
        taken = list(CHOICES.taken)
        CHOICES.first = False
        results.append((observation, [(v, w, what) for v, w, what in taken], lines))
        for index in range(len(taken) - 1, len(forced) - 1, -1):
            pending.append([v for v, _, _ in taken[:index]] + [not taken[index][0]])
    return results, not pending


def observe(results, describe):
    """One JSON-able answer of a question from its runs: the observations (described),
    the choices that separate two that differ, the lines of the first run."""
    out = []
    for observation, taken, lines in results:
        out.append({"observation": describe(observation), "choices": [
            {"value": v, "where": w, "what": what[:TEXT]} for v, w, what in taken][:40],
            "lines": lines[:60]})
    return out


def plain(value, depth=0):
    """A value as JSON can carry it, bounded."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, str):
        return value[:TEXT]
    if isinstance(value, (list, tuple)) and depth < 3:
        return [plain(v, depth + 1) for v in list(value)[:32]]
    if isinstance(value, dict) and depth < 3:
        return dict((str(k)[:60], plain(v, depth + 1)) for k, v in list(value.items())[:32])
    return repr(value)[:TEXT]


# --- the three questions ---------------------------------------------------------------
def drafter_config(kind):
    """DFlash drafter configs as a model config holds them (z-lab's Qwen3 drafter)."""
    common = dict(
        architectures=["DFlashDraftModel"], model_type="qwen3", hidden_size=256,
        intermediate_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=40960,
        rope_theta=1000000, rope_scaling=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000},
        vocab_size=1024, attention_bias=False, attention_dropout=0.0,
        tie_word_embeddings=False, torch_dtype="bfloat16", dtype="bfloat16", block_size=16,
        target_hidden_size=256, num_target_layers=24, initializer_range=0.02,
        quantization_config=None)
    window = REQUEST.get("window", 2048)
    if kind == "uniform":
        return Namespace(num_hidden_layers=5, layer_types=["sliding_attention"] * 5,
                         use_sliding_window=True,
                         sliding_window=window, max_window_layers=5,
                         dflash_config={"target_layer_ids": [1, 9, 17], "mask_token_id": 5,
                                        "use_swa": True, "swa_window_size": window},
                         **common)
    if kind == "mixed":
        types_ = ["sliding_attention"] * 4 + ["full_attention"]
        return Namespace(num_hidden_layers=5, layer_types=types_, use_sliding_window=True,
                         sliding_window=window, max_window_layers=4,
                         dflash_config={"target_layer_ids": [1, 9, 17], "mask_token_id": 5},
                         **common)
    ids = REQUEST.get("ids", [1, 9, 17])
    return Namespace(num_hidden_layers=1, layer_types=None, use_sliding_window=False,
                     sliding_window=None, max_window_layers=1,
                     dflash_config={"target_layer_ids": list(ids), "mask_token_id": 5},
                     **common)


def speculative_standin(hf_config, method="dflash"):
    spec = Given("speculative_config")
    draft = Given("draft_model_config")
    draft.hf_config = hf_config
    draft.hf_text_config = hf_config
    draft.architectures = list(hf_config.architectures)
    draft.model = "z-lab/Qwen3.6-27B-DFlash"
    spec.method = method
    spec.draft_model_config = draft
    spec.num_speculative_tokens = 15
    spec.model = draft.model
    return spec


def vllm_config_standin(spec, use_v2=None):
    config = Given("vllm_config")
    config.speculative_config = spec
    if use_v2 is not None:
        config.use_v2_model_runner = use_v2
    return config


def load_entry(relative):
    return vllm_module(module_name(relative))


ATTRIBUTE = re.compile(r"\.\s*(\w+)")


def assigned_attributes(text):
    """The attribute names a line assigns (`x.name = `, `x.name: T = `, `x.name += `): the
    text before a line's first `=` (not `==`), up to an annotation's colon, when it holds
    no call or comment. A line scan: a regular expression with a lazy group over a 300 KB
    model runner cost a child 0.1 s."""
    names = set()
    for line in text.split("\n"):
        at = line.find("=")
        if at < 0 or line[at + 1:at + 2] == "=":
            continue
        target = line[:at].split(":", 1)[0]
        if "#" in target or "(" in target or "." not in target:
            continue
        names.update(ATTRIBUTE.findall(target))
    return names


def set_on_self(cls):
    """The attribute names the code of the class's modules sets on an object (self in
    __init__ and the other methods, a runner elsewhere): the others an instance lacks."""
    names = set()
    for klass in getattr(cls, "__mro__", ()):
        path = getattr(sys.modules.get(getattr(klass, "__module__", "")), "__file__", None)
        if path and path not in SET_NAMES:
            try:
                SET_NAMES[path] = assigned_attributes(source(path).decode("utf-8", "replace"))
            except OSError:
                SET_NAMES[path] = set()
        names |= SET_NAMES.get(path, set())
    return names


SET_NAMES = {}


def bare_instance(cls, fields, known=None):
    """An instance of the install's class made without its __init__: the fields given, a
    stand-in for any other attribute it is asked for (only those in `known` when given,
    AttributeError for the rest, as the real instance). Raises when the class cannot be
    subclassed so."""
    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__") or (
                known is not None and attr not in known):
            raise AttributeError(attr)
        value = StandIn("self." + attr)
        object.__setattr__(self, attr, value)
        return value
    sub = type(cls)(cls.__name__, (cls,), {"__getattr__": __getattr__,
                                           "__abstractmethods__": frozenset()})
    self = object.__new__(sub)
    for key, value in fields.items():
        object.__setattr__(self, key, value)
    return self


def standin_self(cls, name, fields):
    """An instance of the install's class without its __init__ (or, when the class could
    not be built, a stand-in): the fields given, a stand-in for any attribute the code
    sets on self somewhere, AttributeError for the others (as the real instance)."""
    if isinstance(cls, type):
        try:
            return bare_instance(cls, fields, set_on_self(cls))
        except Exception:
            pass
    self = Given("self")
    for key, value in fields.items():
        setattr(self, key, value)
    return self


def bind_arguments(function, roles):
    """Arguments for the install's function: by what each parameter is (the roles given by
    name pattern), else its default, else a stand-in."""
    args, kwargs = [], {}
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    for parameter in parameters:
        value = None
        for pattern, given in roles:
            if re.search(pattern, parameter.name):
                value = given
                break
        if value is None:
            if parameter.default is not inspect.Parameter.empty:
                continue
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            value = StandIn(parameter.name)
        if parameter.kind == parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    return args, kwargs


def ask_offset(question):
    """Every def that reads the key, called with a DFlash speculative config: the aux
    layer ids it returns (else stores on self, else passes on) against the ids."""
    ids = list(REQUEST.get("ids", [1, 9, 17]))
    key = question.get("key", "target_layer_ids")
    answers = []
    for relative in files_under(question["files"]):
        path = os.path.join(SITE, relative)
        try:
            data = source(path)
            if key.encode() not in data:
                continue
            found = defs_reading(path, key_names(data, key))
        except (OSError, SyntaxError, ValueError) as exc:
            answers.append({"file": relative, "error": "cannot parse: %s" % exc})
            continue
        for class_name, node in found:
            entry = offset_entry(relative, class_name, node, ids)
            answers.append(entry)
            owner = entry.pop("_owner", None)
            for sub in subclasses_overriding(owner, entry.pop("_function", None),
                                             question["files"]):
                answers.append(offset_entry(relative, class_name, node, ids, sub))
    return answers


def offset_entry(relative, class_name, node, ids, subclass=None):
    entry = {"file": relative, "line": node.lineno, "function": (
        (subclass.__name__ if subclass else class_name) + "." if class_name else "") +
        node.name}
    try:
        module = load_entry(relative)
        owner = module.__dict__.get(class_name) if class_name else None
        if subclass is not None:
            owner = subclass
        else:
            entry["_owner"] = owner
        function = getattr(owner, node.name, None) if class_name else \
            module.__dict__.get(node.name)
        entry["_function"] = function if subclass is None else None
        if not callable(function):
            entry["error"] = "%s did not load (%s)" % (entry["function"], "; ".join(
                s for s in SKIPPED if s.startswith(relative))[:300] or "not defined")
            return entry
    except OutOfTime:
        raise
    except Exception as exc:
        entry["error"] = "cannot load %s: %s: %s" % (relative, type(exc).__name__, exc)
        return entry

    def run():
        hf_config = drafter_config("offset")
        spec = install_speculative_config(hf_config) or speculative_standin(hf_config)
        vllm_config = vllm_config_standin(spec)
        roles = [(r"^self$", None), (r"dflash", hf_config.dflash_config), (r"spec", spec),
                 (r"vllm_config", vllm_config),
                 (r"hf_config|draft_config|^config$", hf_config), (r"draft_model_config",
                                                                    spec.draft_model_config)]
        stored = {}
        target = function
        if class_name:
            self = standin_self(owner, class_name, {
                "speculative_config": spec, "vllm_config": vllm_config,
                "use_aux_hidden_state_outputs": True})
            target = types.MethodType(function, self) if not isinstance(
                function, types.MethodType) else function
        args, kwargs = bind_arguments(target, roles[1:])
        outcome, lines = traced(lambda: target(*args, **kwargs))
        if class_name and isinstance(self, StandIn):
            stored = dict(object.__getattribute__(self, "_fc_attrs"))
        elif class_name:
            stored = dict(vars(self))
        passed = [a for _, args_, kw in CALLS for a in list(args_) + list(kw.values())]
        return (outcome, [v for v in stored.values()], passed), lines

    results, complete = explore(run)

    def describe(observation):
        outcome, stored, passed = observation
        if outcome[0] != "returned":
            return {"kind": outcome[0], "detail": outcome[1], "at": outcome[2]}
        value = outcome[1]
        # what the function stored on self counts only when it returns nothing
        later = (("stored", stored),) if value is None else ()
        for how, candidates in (("returned", [value]),) + later:
            for candidate in candidates:
                shift = shift_of(candidate, ids)
                if shift is not None:
                    return {"kind": "ids", "how": how, "shift": shift,
                            "value": plain(candidate)}
        return {"kind": "returned", "value": plain(value)}

    entry["runs"] = observe(results, describe)
    entry["complete"] = complete
    entry["ids"] = ids
    if entry.get("_function") is None:
        entry.pop("_function", None)
    return entry


def install_speculative_config(hf_config):
    """The install's SpeculativeConfig for DFlash (its fields at their defaults), when the
    question runs it for real: its predicates (use_dflash()) are the install's own."""
    if not is_real("vllm.config.speculative"):
        return None
    try:
        module = vllm_module("vllm.config.speculative")
        cls = module.__dict__.get("SpeculativeConfig")
        if not isinstance(cls, type):
            return None
        draft = Given("draft_model_config")
        draft.hf_config = hf_config
        draft.hf_text_config = hf_config
        draft.architectures = list(hf_config.architectures)
        draft.model = "z-lab/Qwen3.6-27B-DFlash"
        return config_instance(cls, {"method": "dflash", "num_speculative_tokens": 15,
                                     "model": draft.model, "draft_model_config": draft})
    except OutOfTime:
        raise
    except Exception:
        return None


def subclasses_overriding(owner, function, globs):
    """Subclasses of the runner class, in the question's files, that define a name the
    entry reads (an override of the helper it calls, a class constant): the code does not
    say which class is built, so each is run."""
    if not isinstance(owner, type):
        return []
    names = set()
    codes = [getattr(function, "__code__", None)]
    while codes:  # the function's code and the comprehensions and lambdas inside it
        code = codes.pop()
        if code is None:
            continue
        names |= set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, str) and const.isidentifier():
                names.add(const)
            elif isinstance(const, types.CodeType):
                codes.append(const)
    marker = owner.__name__.encode()
    for relative in files_under(globs):
        path = os.path.join(SITE, relative)
        try:
            data = source(path)
        except OSError:
            continue
        if marker in data and re.search(rb"class\s+\w+\s*\([^)]*\b" + marker + rb"\b", data):
            try:
                load_entry(relative)
            except OutOfTime:
                raise
            except Exception:
                continue
    found = []
    for module in list(MODULES.values()):
        if not isinstance(module, types.ModuleType):
            continue
        for value in list(module.__dict__.values()):
            if isinstance(value, type) and value is not owner and issubclass(value, owner) \
                    and value not in found and any(
                        n in vars(k) for k in value.__mro__[:value.__mro__.index(owner)]
                        for n in names):
                found.append(value)
    return found


def shift_of(value, ids):
    if isinstance(value, (list, tuple)) and len(value) == len(ids) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        shifts = set(v - i for v, i in zip(value, ids))
        if len(shifts) == 1:
            return shifts.pop()
    return None


def ask_window(question):
    """The drafter's model built for a uniform and a mixed sliding drafter, Attention
    replaced by a recorder bound to the install's own Attention.__init__: the window each
    layer's attention gets."""
    relative = question["drafter"]
    arch_class = question.get("class") or registry_class(question)
    path, node = None, None
    for candidate in question.get("attention_modules", []):
        path, node = follow_class(candidate, "Attention")
        if node is not None:
            break
    drafter_tree = parse(os.path.join(SITE, relative))
    if node is None:
        for item in drafter_tree.body:
            if isinstance(item, ast.ImportFrom) and any(
                    a.name == "Attention" for a in item.names):
                package = module_name(relative).rpartition(".")[0]
                path, node = follow_class(resolve(item.module or "", {
                    "__package__": package}, item.level), "Attention")
                break
    signature = signature_of(path, node) if node is not None else None
    origin = "%s:%d" % (rel(path), node.lineno) if node is not None else None
    REPLACEMENTS["Attention"] = recorder("Attention", signature, origin)
    answer = {"file": relative, "class": arch_class, "attention": origin, "scenarios": {}}
    if signature is None or "per_layer_sliding_window" not in signature.parameters:
        answer["attention_note"] = "the install's Attention takes no per_layer_sliding_window"
    try:
        module = load_entry(relative)
    except OutOfTime:
        raise
    except Exception as exc:
        answer["error"] = "cannot load %s: %s: %s" % (relative, type(exc).__name__, exc)
        return answer
    cls = module.__dict__.get(arch_class)
    if not isinstance(cls, type):
        answer["error"] = "%s did not load from %s (%s)" % (arch_class, relative, "; ".join(
            s for s in SKIPPED if s.startswith(relative))[:300] or "not defined")
        return answer
    for kind in ("uniform", "mixed"):
        answer["scenarios"][kind] = window_scenario(cls, kind)
    return answer


def registry_class(question):
    """The class vLLM's model registry maps the drafter's architecture to: the literal
    `"Arch": ("module", "Class")` entry (static: the registry is a table of literals)."""
    if not question.get("registry") or not question.get("arch"):
        return None
    path = os.path.join(SITE, question["registry"])
    entry = re.search(r"""["']%s["']\s*:\s*[(\[]\s*["'][\w.]+["']\s*,\s*["'](\w+)["']\s*[)\]]""" %
                      re.escape(question["arch"]), source(path).decode("utf-8", "replace"))
    if entry:  # the table entry as written: no syntax tree of the whole registry
        return entry.group(1)
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == question["arch"] and \
                        isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == 2 \
                        and isinstance(value.elts[1], ast.Constant):
                    return value.elts[1].value
    return None


LAYER = re.compile(r"layers\.(\d+)")


def window_scenario(cls, kind):
    window = REQUEST.get("window", 2048)

    def run():
        hf_config = drafter_config(kind)
        spec = speculative_standin(hf_config)
        vllm_config = vllm_config_standin(spec)
        vllm_config.model_config = StandIn("model_config")
        outcome, lines = traced(lambda: cls(vllm_config=vllm_config, prefix=""))
        layers = []
        for name, values, at in RECORDED:
            if name != "Attention":
                continue
            if "error" in values:
                layers.append({"error": values["error"], "at": at})
                continue
            prefix = values.get("prefix")
            match = LAYER.search(prefix) if isinstance(prefix, str) else None
            window = values.get("per_layer_sliding_window")
            layer = {"layer": int(match.group(1)) if match else len(layers),
                     "window": plain(window), "at": at}
            if isinstance(window, (StandIn, Lazy)):
                layer["unknown"] = True  # a value the executor stood in for
            layers.append(layer)
        return (outcome, layers), lines

    results, complete = explore(run)
    if kind == "uniform":
        expected = [window] * 5
    else:
        expected = [window] * 4 + [None]

    def describe(observation):
        outcome, layers = observation
        if outcome[0] != "returned":
            return {"kind": outcome[0], "detail": outcome[1], "at": outcome[2],
                    "layers": layers[:8]}
        return {"kind": "built", "layers": layers[:8]}

    return {"runs": observe(results, describe), "complete": complete,
            "expected": expected}


def dataclass_defaults(cls):
    """An instance of the install's config class made without __init__ (no validation),
    each field at its default as the class declares it."""
    self = object.__new__(cls)
    fields = getattr(cls, "__dataclass_fields__", None) or {}
    names = list(fields)
    for klass in reversed(cls.__mro__):
        for name in getattr(klass, "__annotations__", {}) or {}:
            if name not in names:
                names.append(name)
    for name in names:
        field = fields.get(name)
        value = getattr(cls, name, None) if field is None else field.default
        if isinstance(value, dataclasses.Field):
            field, value = value, value.default
        if value is dataclasses.MISSING or isinstance(value, StandIn):
            factory = getattr(field, "default_factory", dataclasses.MISSING)
            value = factory() if factory is not dataclasses.MISSING and callable(factory) \
                else (None if value is dataclasses.MISSING else value)
        try:
            object.__setattr__(self, name, value)
        except Exception:
            pass
    return self


DECISION_METHODS = ("use_eagle", "needs_eagle_block_drop", "use_eagle_block_drop")


def ask_drop(question):
    """The install's SpeculativeConfig for DFlash at its defaults, its decision methods
    called, and the scheduler's construction of the KV cache manager run up to that call
    with a recorder: what DFlash gets for the block drop."""
    answer = {"decisions": {}, "scheduler": None}
    config_rel = None
    for relative in files_under(question["files"]):
        path = os.path.join(SITE, relative)
        if b"class SpeculativeConfig" in source(path):
                config_rel = relative
                break
    if config_rel is None:
        answer["error"] = "no class SpeculativeConfig in %s" % ", ".join(question["files"])
        return answer
    answer["config_file"] = config_rel
    try:
        module = load_entry(config_rel)
    except OutOfTime:
        raise
    except Exception as exc:
        answer["error"] = "cannot load %s: %s: %s" % (config_rel, type(exc).__name__, exc)
        return answer
    cls = module.__dict__.get("SpeculativeConfig")
    if not isinstance(cls, type):
        answer["error"] = "SpeculativeConfig did not load from %s (%s)" % (config_rel, "; ".join(
            s for s in SKIPPED if s.startswith(config_rel))[:300] or "not defined")
        return answer
    answer["opt_out_field"] = "disable_eagle_block_drop" in getattr(
        cls, "__dataclass_fields__", {}) or "disable_eagle_block_drop" in getattr(
        cls, "__annotations__", {})

    def make_spec(opt_out):
        spec = dataclass_defaults(cls)
        hf_config = drafter_config("offset")
        draft = Given("draft_model_config")
        draft.hf_config = hf_config
        draft.hf_text_config = hf_config
        draft.architectures = ["DFlashDraftModel"]
        for name, value in (("method", "dflash"), ("num_speculative_tokens", 15),
                            ("model", "z-lab/Qwen3.6-27B-DFlash"),
                            ("draft_model_config", draft)):
            object.__setattr__(spec, name, value)
        if opt_out:
            object.__setattr__(spec, "disable_eagle_block_drop", True)
        return spec

    for name in question.get("methods", DECISION_METHODS):
        function = getattr(cls, name, None)
        if not callable(function):
            continue

        def run(name=name):
            spec = make_spec(False)
            outcome, lines = traced(lambda: getattr(spec, name)())
            return (outcome,), lines

        results, complete = explore(run)
        answer["decisions"][name] = {
            "runs": observe(results, lambda o: describe_plain(o[0])), "complete": complete}
    scheduler = question["files"]
    if scheduler:
        answer["scheduler"] = drop_in_scheduler(scheduler, make_spec, question)
        if answer["opt_out_field"]:
            answer["scheduler_opt_out"] = drop_in_scheduler(
                scheduler, lambda _: make_spec(True), question)
    return answer


def describe_plain(outcome):
    if outcome[0] != "returned":
        return {"kind": outcome[0], "detail": outcome[1], "at": outcome[2]}
    return {"kind": "returned", "value": plain(outcome[1])}


def drop_in_scheduler(globs, make_spec, question):
    """The scheduler's method that builds the KV cache manager, run from where it reads the
    speculative config to that call (the rest of the method is left out), the manager
    replaced by a recorder bound to the install's own __init__."""
    manager = question.get("manager", "KVCacheManager")
    for relative in files_under(globs):
        path = os.path.join(SITE, relative)
        if (manager + "(").encode() not in source(path):
            continue
        for class_name, method in methods_naming(path, manager):
            stop = next((i for i, s in enumerate(method.body) if any(
                isinstance(c, ast.Call) and getattr(c.func, "id", getattr(
                    c.func, "attr", None)) == manager for c in ast.walk(s))), None)
            if stop is None:
                continue
            return run_slice(relative, types.SimpleNamespace(name=class_name), method, stop,
                             make_spec, manager, globs)
    return {"error": "no method builds %s in %s" % (manager, ", ".join(globs))}


def uses_name(code, name):
    return name in code.co_names or any(
        isinstance(c, types.CodeType) and uses_name(c, name) for c in code.co_consts)


def methods_naming(path, name):
    """(class name, FunctionDef) of each method of the module's classes whose code names
    `name`, in the order they are defined: found in the compiled module, and only those
    methods parsed (a syntax tree of the whole scheduler is not built)."""
    for const in compiled(path).co_consts:
        if not isinstance(const, types.CodeType) or const.co_flags & CO_OPTIMIZED or \
                const.co_name.startswith("<"):
            continue
        for item in const.co_consts:
            if isinstance(item, types.CodeType) and item.co_flags & CO_OPTIMIZED and \
                    not item.co_name.startswith("<") and uses_name(item, name):
                method = method_tree(path, Def(path, item))
                if method is not None:
                    yield const.co_name, method


def method_tree(path, found):
    """The FunctionDef of the def at `found.lineno`, parsed from its own lines (the block
    its indentation spans), with the file's line numbers; the whole file's tree when that
    block does not parse on its own."""
    lines = source(path).decode("utf-8", "replace").split("\n")
    start = found.lineno - 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    end, depth = start, 0
    while end < len(lines):  # past the signature, whose `) -> None:` may sit at the def's indent
        code = lines[end].split("#", 1)[0]
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        end += 1
        if depth <= 0 and code.rstrip().endswith(":"):
            break
    while end < len(lines):
        text = lines[end]
        if text.strip() and not text.lstrip().startswith("#") and \
                len(text) - len(text.lstrip()) <= indent:
            break
        end += 1
    block = "\n".join(line[indent:] if line[:indent].strip() == "" else line
                      for line in lines[start:end])
    try:
        tree = ast.parse(block, path)
        ast.increment_lineno(tree, start)
        node = tree.body[0]
    except (SyntaxError, ValueError, IndexError):
        node = next((item for top in parse(path).body if isinstance(top, ast.ClassDef)
                     for item in top.body if isinstance(item, ast.FunctionDef) and
                     item.lineno == found.lineno), None)
    return node if isinstance(node, ast.FunctionDef) and node.name == found.name else None


def engine_config_class(globs):
    """The install's VllmConfig, when the question's files hold it: its properties (the
    lookahead hashes, say) are the install's own decisions for DFlash too."""
    for relative in files_under(globs):
        path = os.path.join(SITE, relative)
        if b"class VllmConfig" not in source(path):
            continue
        cls = load_entry(relative).__dict__.get("VllmConfig")
        return cls if isinstance(cls, type) else None
    return None


def config_instance(cls, fields):
    """The install's config class made without __init__, its fields at their defaults,
    the given ones set, any other attribute a stand-in."""
    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return StandIn("%s.%s" % (cls.__name__, attr))
    try:
        sub = type(cls)(cls.__name__, (cls,), {"__getattr__": __getattr__,
                                               "__abstractmethods__": frozenset()})
        self = dataclass_defaults(sub)
    except Exception:
        return standin_self(None, cls.__name__, fields)
    for key, value in fields.items():
        object.__setattr__(self, key, value)
    return self


def call_arguments(path, statement, callee):
    """{keyword: "file:line: text"} of the keywords the statement's call of `callee` passes:
    the evidence names the line that hands over what was recorded (a call spans lines)."""
    out = {}
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                node.func, "attr", None)) == callee:
            for keyword in node.keywords:
                line = getattr(keyword, "lineno", None) or keyword.value.lineno
                if keyword.arg:
                    out[keyword.arg] = "%s:%d: %s" % (rel(path), line, line_text(path, line))
    return out


def run_slice(relative, class_node, method, stop, make_spec, manager, question_files):
    path = os.path.join(SITE, relative)
    begin = next((i for i, s in enumerate(method.body[:stop + 1]) if any(
        isinstance(c, (ast.Attribute, ast.Name)) and "speculative_config" in (
            getattr(c, "attr", None) or getattr(c, "id", None) or "") for c in ast.walk(s))),
        0)
    answer = {"file": relative, "function": "%s.%s" % (class_node.name, method.name),
              "from_line": method.body[begin].lineno, "to_line": method.body[stop].lineno,
              "arguments": call_arguments(path, method.body[stop], manager)}
    module = load_entry(relative)
    cls = module.__dict__.get(class_node.name)
    bound = module.__dict__.get(manager)
    if type(bound) is Lazy:  # imported, not loaded: where from is known without a tree
        mpath, mnode = follow_class(*object.__getattribute__(bound, "_fc_where"))
    else:
        mpath, mnode = follow_class(module_name(relative), manager)
    signature = signature_of(mpath, mnode) if mnode is not None else None
    record = recorder(manager, signature, "%s:%d" % (rel(mpath), mnode.lineno)
                      if mnode is not None else None)
    function = ast.copy_location(ast.FunctionDef(
        name="_fleetcheck_slice", args=method.args, body=method.body[begin:stop + 1],
        decorator_list=[], returns=None, type_comment=None), method)
    function = ast.fix_missing_locations(function)
    code = compile(ast.Module(body=[function], type_ignores=[]), path, "exec",
                   module_future_flags(path), dont_inherit=True)
    namespace = dict(module.__dict__)
    namespace[manager] = record
    exec(code, namespace)
    sliced = namespace["_fleetcheck_slice"]
    real_init = getattr(cls, method.name, None)

    config_cls = engine_config_class(question_files)

    def run():
        spec = make_spec(False)
        vllm_config = vllm_config_standin(spec) if config_cls is None else \
            config_instance(config_cls, {"speculative_config": spec})
        self = standin_self(cls, class_node.name, {
            "vllm_config": vllm_config, "speculative_config": spec})
        args, kwargs = bind_arguments(real_init if callable(real_init) else sliced,
                                      [(r"^self$", self), (r"vllm_config", vllm_config),
                                       (r"spec", spec)])
        if not args or args[0] is not self:
            args.insert(0, self)
        outcome, lines = traced(lambda: sliced(*args, **kwargs))
        got = [values for name, values, at in RECORDED if name == manager]
        return (outcome, got), lines

    results, complete = explore(run)

    def describe(observation):
        outcome, got = observation
        out = describe_plain(outcome)
        if got:
            out["use_eagle"] = plain(got[0].get("use_eagle", got[0].get("error")))
            out["lookahead"] = plain(got[0].get("num_hash_lookahead_tokens"))
            out["kind"] = "built"
        return out

    answer["runs"] = observe(results, describe)
    answer["complete"] = complete
    return answer


class UnknownEnviron(dict):
    """os.environ for the install's code: the host's variables are not DFlash's inputs, so
    a variable the child was not given is an unknown, set (to a stand-in) or not."""

    def __contains__(self, key):
        return dict.__contains__(self, key) or CHOICES.choose(
            "environment variable %s is set" % key)

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        if CHOICES.choose("environment variable %s is set" % key):
            return StandIn("os.environ[%r]" % key)
        return default

    def __getitem__(self, key):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        if CHOICES.choose("environment variable %s is set" % key):
            return StandIn("os.environ[%r]" % key)
        raise KeyError(key)


def out_of_time(signum, frame):
    raise OutOfTime()


PR_SET_DUMPABLE = 4


def confine():
    """No new processes; not dumpable (another process of the same user can neither read
    the descriptors the probe handed over through /proc nor trace the child and forge its
    answers); an alarm at each question's deadline (a loop that asks no stand-in); and the
    answers on a descriptor of their own, the install's prints going to stderr (a line the
    install's code prints is never read as an answer)."""
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    except (ValueError, OSError):
        pass
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass
    signal.signal(signal.SIGALRM, out_of_time)
    sys.stdout.flush()
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return answers


ENVIRON = dict(os.environ)  # the child's own: PATH and LANG, as the probe gave it


def fresh(question):
    """Each question loads the install's modules anew, with its own real ones (a module one
    question executes is a stand-in for another); compiled code and parsed trees are kept."""
    REAL_GLOBS[:] = question.get("real", REQUEST.get("real", []))
    os.environ = UnknownEnviron(ENVIRON)  # what an earlier question's code set is gone
    for name, module in list(MODULES.items()):
        if sys.modules.get(name) is module:
            del sys.modules[name]
    MODULES.clear()
    REPLACEMENTS.clear()
    del RECORDED[:]
    del CALLS[:]
    READ.clear()


def answer_line(out, name, answer, unread, read):
    """One question's answer, the install's files it could not read and those it read
    (the probe hashes these against RECORD: the answer rests on their bytes), printed as
    soon as it is known: a child killed later (its deadline, its memory limit) still
    leaves the answers before it."""
    out.write(json.dumps({"id": name, "answer": answer, "unread": unread,
                          "read": read}, default=repr) + "\n")
    out.flush()


ASKERS = {"offset": ask_offset, "window": ask_window, "drop": ask_drop}


def main():
    """Every question in turn, each with a fair share of the time left, so one question
    that runs long leaves the others theirs."""
    global DEADLINE
    end = DEADLINE
    out = confine()
    os.environ = UnknownEnviron(ENVIRON)
    questions = REQUEST["questions"]
    try:
        os.listdir(SITE)
    except OSError as exc:  # else every glob would find nothing: "no code reads the key"
        unreadable = {"error": "the install's site dir cannot be listed by its user: %s" % (
            exc.strerror or exc)}
        questions = []
        for question in REQUEST["questions"]:
            answer_line(out, question["id"], unreadable, [], [])
    try:
        for index, question in enumerate(questions):
            now = time.monotonic()
            DEADLINE = now + max(end - now, 0) / (len(questions) - index)
            signal.setitimer(signal.ITIMER_REAL, max(DEADLINE - now, 0.05))
            fresh(question)
            known = len(FILE_ERRORS)
            try:
                answer = ASKERS[question["kind"]](question)
            except OutOfTime:
                answer = {"error": "out of time after %.1f s" % (time.monotonic() - now)}
            except Exception as exc:
                answer = {"error": "%s: %s at %s" % (
                    type(exc).__name__, str(exc)[:TEXT], last_install_line(
                        sys.exc_info()[2]) or "the executor")}
            signal.setitimer(signal.ITIMER_REAL, 0)
            answer_line(out, question["id"], answer, sorted(set(FILE_ERRORS[known:])),
                        sorted(r for r in map(rel, READ) if r is not None))
    finally:
        out.write(json.dumps({"python": sys.version.split()[0], "skipped": SKIPPED[:40],
                              "elapsed_s": round(time.monotonic() - START, 3)}) + "\n")
        out.flush()


main()
'''
