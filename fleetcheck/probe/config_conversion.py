"""The install's own conversions of a drafter's config, applied as vLLM applies them before
any model code reads it:

- a speculators-format checkpoint (the key `transformers_utils/config.py` tests,
  `speculators_config`) becomes what `SpeculatorsConfig.extract_transformers_pre_trained_config`
  (`transformers_utils/configs/speculators/base.py`) builds: its `transformer_layer_config`,
  updated by the algorithm that `algos.py` registers for its `speculators_model_type`;
- a drafter of method dflash has its architectures rewritten as EAGLEConfig does
  (`transformers_utils/configs/eagle.py`, the branch for that method);
- a speculative config that names no method gets the one `config/speculative.py`'s
  detection chain decides (`"eagle-" in model.lower()`, then `eagle3`, `dflash`, ...,
  architectures and model_type tests), evaluated branch by branch in its order.

The code is read with ast and run by a small interpreter over JSON values (dicts, lists,
strings, numbers): nothing of vLLM is imported. What the code raises for this config
(`KeyError: 'aux_hidden_state_layer_ids'`) is the finding; a statement the interpreter
does not run stops the conversion and says where, never a guess. Stdlib only."""

import ast
import os

from fleetcheck.probe.files import ProbeFileError, read_bytes

CONFIG = "vllm/transformers_utils/config.py"
SPECULATIVE = "vllm/config/speculative.py"
BASE = "vllm/transformers_utils/configs/speculators/base.py"
ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
EAGLE = "vllm/transformers_utils/configs/eagle.py"
EXTRACT = "extract_transformers_pre_trained_config"
MAX_STEPS = 20000
MAX_ITEMS = 100000  # no value the interpreter builds or walks is longer


class Unknown(Exception):
    """A construct the interpreter does not run: (file, line, what)."""

    def __str__(self):
        return "%s:%s holds %s, which fleetcheck does not interpret" % self.args


class Raised(Exception):
    """What the install's code raises for this config."""


class Function:
    def __init__(self, node, module):
        self.node, self.module = node, module


BUILTINS = {"len": len, "list": list, "dict": dict, "int": int, "str": str, "bool": bool,
            "tuple": tuple, "float": float, "sorted": sorted, "set": set, "any": any,
            "all": all, "min": min, "max": max, "sum": sum, "isinstance": isinstance,
            "True": True, "False": False, "None": None, "ValueError": ValueError,
            "KeyError": KeyError, "TypeError": TypeError, "NotImplementedError":
            NotImplementedError, "range": range}
METHODS = {dict: ("get", "keys", "values", "items", "copy", "pop", "setdefault", "update"),
           list: ("copy", "index", "count", "append", "extend"),
           str: ("startswith", "endswith", "lower", "upper", "strip", "split", "replace")}


class Module:
    """One parsed file: its functions, the dicts its decorators register into, names
    imported from other modules this interpreter holds."""

    def __init__(self, rel, tree, imports=None):
        self.rel, self.tree = rel, tree
        self.names = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.names[node.name] = node
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and \
                    isinstance(node.value, ast.Constant):
                self.names[node.targets[0].id] = node.value.value
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    found = (imports or {}).get((node.module, alias.name))
                    if found is not None:
                        self.names[alias.asname or alias.name] = found
        self.registered = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    key = registry_key(decorator, self.names)
                    if key is not None:
                        table, name = key
                        self.registered.setdefault(table, {})[name] = Function(node, self)
        for table, entries in self.registered.items():
            self.names[table] = entries

    def method(self, cls, name):
        node = self.names.get(cls)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return Function(item, self)
        return None


def registry_key(decorator, names):
    """(the module-level dict, the key) of `@register("name")`, where `register` is a
    function of the module whose inner function stores into that dict."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and
            len(decorator.args) == 1 and isinstance(decorator.args[0], ast.Constant) and
            isinstance(decorator.args[0].value, str)):
        return None
    outer = names.get(decorator.func.id)
    if not isinstance(outer, ast.FunctionDef):
        return None
    for node in ast.walk(outer):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    return target.value.id, decorator.args[0].value
    return None


class Return(Exception):
    def __init__(self, value):
        self.value = value


class Interpreter:
    def __init__(self, attributes=None):
        self.steps = 0
        self.attributes = attributes  # {"a.b.c": value}: the only attributes it reads

    def call(self, function, args, kwargs):
        node = function.node
        params = [a.arg for a in node.args.args]
        scope = {}
        defaults = node.args.defaults
        for name, default in zip(params[len(params) - len(defaults):], defaults):
            scope[name] = self.expr(default, {}, function.module)
        for name, value in zip(params, args):
            scope[name] = value
        for name, value in kwargs.items():
            if name not in params:
                raise Unknown(function.module.rel, node.lineno, "keyword %s" % name)
            scope[name] = value
        try:
            self.block(node.body, scope, function.module)
        except Return as done:
            return done.value
        return None

    def block(self, statements, scope, module):
        for statement in statements:
            self.statement(statement, scope, module)

    def statement(self, node, scope, module):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Unknown(module.rel, node.lineno, "too many steps")
        if isinstance(node, ast.Expr):
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                self.expr(node.value, scope, module)
        elif isinstance(node, ast.Assign):
            value = self.expr(node.value, scope, module)
            for target in node.targets:
                self.assign(target, value, scope, module)
        elif isinstance(node, ast.If):
            branch = node.body if self.expr(node.test, scope, module) else node.orelse
            self.block(branch, scope, module)
        elif isinstance(node, ast.For) and not node.orelse:
            for item in bounded_items(self.expr(node.iter, scope, module), module, node):
                self.assign(node.target, item, scope, module)
                self.block(node.body, scope, module)
        elif isinstance(node, ast.Return):
            raise Return(self.expr(node.value, scope, module) if node.value else None)
        elif isinstance(node, ast.Raise):
            raise Raised("%s:%d: %s" % (module.rel, node.lineno, source_line(module, node)))
        elif isinstance(node, ast.Pass):
            return
        else:
            raise Unknown(module.rel, node.lineno, type(node).__name__)

    def assign(self, target, value, scope, module):
        if isinstance(target, ast.Name):
            scope[target.id] = value
        elif isinstance(target, ast.Subscript):
            container = self.expr(target.value, scope, module)
            key = self.expr(subscript_of(target), scope, module)
            if not isinstance(container, (dict, list)):
                raise Raised("TypeError: %s does not support item assignment (%s:%d)" % (
                    type(container).__name__, module.rel, target.lineno))
            container[key] = value
        elif isinstance(target, ast.Tuple):
            values = list(value)
            for sub, item in zip(target.elts, values):
                self.assign(sub, item, scope, module)
        else:
            raise Unknown(module.rel, target.lineno, "assignment to %s" % type(target).__name__)

    def expr(self, node, scope, module):
        try:
            return self.evaluate(node, scope, module)
        except (Unknown, Raised, Return):
            raise
        except (KeyError, IndexError) as exc:
            raise Raised("%s: %s (%s:%d: %s)" % (type(exc).__name__, exc, module.rel,
                                                 node.lineno, source_line(module, node)))
        except (TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
            raise Raised("%s: %s (%s:%d)" % (type(exc).__name__, exc, module.rel, node.lineno))

    def evaluate(self, node, scope, module):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in scope:
                return scope[node.id]
            if node.id in module.names:
                found = module.names[node.id]
                return Function(found, module) if isinstance(found, ast.FunctionDef) else found
            if node.id in BUILTINS:
                return BUILTINS[node.id]
            raise Unknown(module.rel, node.lineno, "name %s" % node.id)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.expr(e, scope, module) for e in node.elts]
            return items if isinstance(node, ast.List) else (
                tuple(items) if isinstance(node, ast.Tuple) else set(items))
        if isinstance(node, ast.Dict):
            out = {}
            for key, value in zip(node.keys, node.values):
                if key is None:
                    out.update(self.expr(value, scope, module))
                else:
                    out[self.expr(key, scope, module)] = self.expr(value, scope, module)
            return out
        if isinstance(node, ast.Attribute) and self.attributes is not None:
            name = dotted(node)
            if name in self.attributes:
                return self.attributes[name]
            raise Unknown(module.rel, node.lineno, "attribute %s" % (name or node.attr))
        if isinstance(node, ast.Subscript):
            return self.expr(node.value, scope, module)[
                self.expr(subscript_of(node), scope, module)]
        if isinstance(node, ast.Call):
            return self.call_expr(node, scope, module)
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left, scope, module), self.expr(node.right, scope, module)
            operations = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
                          ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
                          ast.Mod: lambda a, b: a % b}
            operation = operations.get(type(node.op))
            if operation is None:
                raise Unknown(module.rel, node.lineno, type(node.op).__name__)
            if isinstance(left, bool) or isinstance(right, bool):
                raise Unknown(module.rel, node.lineno, "arithmetic on a bool")
            if isinstance(node.op, ast.Mult) and any(isinstance(v, (str, list, tuple))
                                                     for v in (left, right)):
                count = right if isinstance(left, (str, list, tuple)) else left
                if isinstance(count, int) and count * len(
                        left if isinstance(left, (str, list, tuple)) else right) > MAX_ITEMS:
                    raise Unknown(module.rel, node.lineno, "a value over %d items" % MAX_ITEMS)
            return operation(left, right)
        if isinstance(node, ast.UnaryOp):
            value = self.expr(node.operand, scope, module)
            if isinstance(node.op, ast.Not):
                return not value
            if isinstance(node.op, ast.USub):
                return -value
            raise Unknown(module.rel, node.lineno, type(node.op).__name__)
        if isinstance(node, ast.BoolOp):
            value = None
            for sub in node.values:
                value = self.expr(sub, scope, module)
                if isinstance(node.op, ast.And) and not value:
                    return value
                if isinstance(node.op, ast.Or) and value:
                    return value
            return value
        if isinstance(node, ast.Compare):
            left = self.expr(node.left, scope, module)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.expr(right_node, scope, module)
                if not compare(op, left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.expr(node.body if self.expr(node.test, scope, module) else node.orelse,
                             scope, module)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            generator = node.generators[0]
            out = []
            for item in bounded_items(self.expr(generator.iter, scope, module), module, node):
                inner = dict(scope)
                self.assign(generator.target, item, inner, module)
                if all(self.expr(test, inner, module) for test in generator.ifs):
                    out.append(self.expr(node.elt, inner, module))
            return out
        if isinstance(node, ast.JoinedStr):
            return "".join(str(self.expr(v.value, scope, module))
                           if isinstance(v, ast.FormattedValue) else str(v.value)
                           for v in node.values)
        raise Unknown(module.rel, node.lineno, type(node).__name__)

    def call_expr(self, node, scope, module):
        args = [self.expr(a, scope, module) for a in node.args]
        kwargs = dict((k.arg, self.expr(k.value, scope, module)) for k in node.keywords
                      if k.arg is not None)
        if len(kwargs) != len(node.keywords):
            raise Unknown(module.rel, node.lineno, "**kwargs")
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = self.expr(func.value, scope, module)
            allowed = METHODS.get(type(owner), ())
            if func.attr not in allowed:
                raise Unknown(module.rel, node.lineno, "method %s of %s" % (
                    func.attr, type(owner).__name__))
            return getattr(owner, func.attr)(*args, **kwargs)
        callee = self.expr(func, scope, module)
        if isinstance(callee, Function):
            return self.call(callee, args, kwargs)
        if isinstance(callee, type) and issubclass(callee, Exception):
            return callee(*args)
        if callee in BUILTINS.values():
            return callee(*args, **kwargs)
        raise Unknown(module.rel, node.lineno, "call of %s" % type(callee).__name__)


def bounded_items(value, module, node):
    """The items of a value a loop walks, refused past MAX_ITEMS (a range(10**12))."""
    if hasattr(value, "__len__") and len(value) > MAX_ITEMS:
        raise Unknown(module.rel, node.lineno, "a loop over %d items" % len(value))
    return list(value)


def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def method_chain(module):
    """The detection chain: the `if self.method in (...): pass` whose elif branches each
    set `self.method = "..."`; [(test, method or None, line)]."""
    for node in ast.walk(module.tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and
                dotted(node.test.left) == "self.method" and
                isinstance(node.test.ops[0], ast.In) and
                len(node.body) == 1 and isinstance(node.body[0], ast.Pass)):
            continue
        chain = []
        branch = node.orelse
        while len(branch) == 1 and isinstance(branch[0], ast.If):
            test = branch[0]
            method = None
            for statement in test.body:
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                        dotted(statement.targets[0]) == "self.method" and \
                        isinstance(statement.value, ast.Constant):
                    method = statement.value.value
                    break
            chain.append((test.test, method, test.lineno))
            branch = test.orelse
        return chain
    return None


def decide_method(conversions, drafter, config):
    """(method, how) as the install's config/speculative.py decides it for a drafter
    named `drafter` whose config.json is `config`, or (None, why not)."""
    module = conversions.module("speculative", lambda: parse(conversions.root, SPECULATIVE))
    if isinstance(module, Exception):
        return None, "%s: %s" % (SPECULATIVE, module)
    chain = method_chain(module)
    if not chain:
        return None, "%s holds no method detection chain fleetcheck reads" % SPECULATIVE
    archs = config.get("architectures") if isinstance(config, dict) else None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    base = "self.draft_model_config"
    attributes = {base + ".model": drafter,
                  base + ".architectures": archs if isinstance(archs, list) else [],
                  base + ".hf_config.model_type": model_type}
    for test, method, line in chain:
        try:
            taken = Interpreter(attributes).expr(test, {}, module)
        except (Unknown, Raised) as exc:
            return None, "%s:%d: %s" % (SPECULATIVE, line, exc)
        if taken:
            if method is None:
                return None, "%s:%d: the branch taken sets no method" % (SPECULATIVE, line)
            return method, "%s:%d: %s" % (SPECULATIVE, line, source_line(module, test))
    return None, "%s: no branch of its detection chain is taken" % SPECULATIVE


def decide_methods(root, servers):
    """Each server whose speculative config names a drafter and no method gets the method
    this install's detection chain decides (method_from says where); where the chain
    cannot be read, the name-based guess stands, saying why."""
    conversions = None
    for server in servers:
        if server.get("method_from") not in (None, NAME_GUESS) or not server.get("drafter"):
            continue
        conversions = conversions or Conversions(root)
        config = ((server.get("drafter_model") or {}).get("config") or {}).get("data")
        method, how = decide_method(conversions, server["drafter"], config or {})
        if method is not None:
            server["method"], server["method_from"] = method, how
        elif server.get("method") is not None:
            server["method_from"] = "%s (this install's chain: %s)" % (NAME_GUESS, how)


NAME_GUESS = "the drafter's name (vLLM detects it)"


def compare(op, left, right):
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    if isinstance(op, ast.Is):
        return left is right
    if isinstance(op, ast.IsNot):
        return left is not right
    if isinstance(op, ast.In):
        return left in right
    if isinstance(op, ast.NotIn):
        return left not in right
    if isinstance(op, ast.Lt):
        return left < right
    if isinstance(op, ast.LtE):
        return left <= right
    if isinstance(op, ast.Gt):
        return left > right
    if isinstance(op, ast.GtE):
        return left >= right
    raise TypeError("comparison %s" % type(op).__name__)


def subscript_of(node):
    index = node.slice
    return index.value if isinstance(index, ast.Index) else index  # ast.Index: Python 3.8


def source_line(module, node):
    text = getattr(module, "text", None)
    if text is None:
        return ""
    lines = text.split("\n")
    line = getattr(node, "lineno", 0)
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""


def parse(root, rel, imports=None):
    """The Module of one install file, or raise ProbeFileError / SyntaxError."""
    text = read_bytes(os.path.join(root, rel)).decode("utf-8", "replace")
    module = Module(rel, ast.parse(text), imports)
    module.text = text
    return module


def speculators_key(root):
    """The key whose presence makes vLLM read a config as speculators-format: the test of
    `"speculators" if config_dict.get(KEY) is not None` in transformers_utils/config.py."""
    module = parse(root, CONFIG)
    for node in ast.walk(module.tree):
        if isinstance(node, ast.IfExp) and isinstance(node.body, ast.Constant) and \
                node.body.value == "speculators" and isinstance(node.test, ast.Compare):
            call = node.test.left
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    call.func.attr == "get" and call.args and \
                    isinstance(call.args[0], ast.Constant):
                return call.args[0].value, node.lineno
    return None, None


class Conversions:
    """The install's conversions, parsed once per probe run."""

    def __init__(self, root):
        self.root = root
        self.cache = {}

    def module(self, name, loader):
        if name not in self.cache:
            try:
                self.cache[name] = loader()
            except (ProbeFileError, SyntaxError, ValueError) as exc:
                self.cache[name] = exc
        return self.cache[name]

    def speculators(self, data):
        """(converted, conversion) for a speculators-format config, or (None, None)."""
        found = self.module("key", lambda: speculators_key(self.root))
        if isinstance(found, Exception):
            return None, {"error": "%s: %s" % (CONFIG, found)}
        key, key_line = found
        if key is None or data.get(key) is None:
            return None, None
        algos = self.module("algos", lambda: parse(self.root, ALGOS))
        if isinstance(algos, Exception):
            return None, {"error": "%s: %s" % (ALGOS, algos)}
        module_name = ALGOS[:-3].replace("/", ".")
        imports = dict(((module_name, name), value) for name, value in algos.names.items())
        base = self.module("base", lambda: parse(self.root, BASE, imports))
        if isinstance(base, Exception):
            return None, {"error": "%s: %s" % (BASE, base)}
        extract = None
        for node in base.tree.body:
            if isinstance(node, ast.ClassDef):
                extract = extract or base.method(node.name, EXTRACT)
        if extract is None:
            return None, {"error": "%s: no %s" % (BASE, EXTRACT)}
        kind = data.get("speculators_model_type")
        algorithm = None
        for table in algos.registered.values():
            if isinstance(kind, str) and kind in table:
                algorithm = table[kind]
        conversion = {"name": "speculators %s" % kind, "file": ALGOS, "stage": "loader",
                      "line": algorithm.node.lineno if algorithm else None,
                      "text": "def %s (registered for %r), from %s's %s; %s:%d tests %s" % (
                          algorithm.node.name if algorithm else "?", kind, BASE, EXTRACT,
                          CONFIG, key_line, key)}
        import copy
        try:
            converted = Interpreter().call(extract, [None, copy.deepcopy(data)], {})
        except Raised as exc:
            conversion["error"] = "this install's conversion raises: %s" % exc
            return None, conversion
        except Unknown as exc:
            conversion["error"] = "the conversion was not run: %s" % exc
            return None, conversion
        except RecursionError:
            conversion["error"] = "the conversion was not run: recursion too deep"
            return None, conversion
        if not isinstance(converted, dict):
            conversion["error"] = "the conversion returned no dict"
            return None, conversion
        return converted, conversion

    def architectures(self, data, method):
        """(architectures, conversion) as EAGLEConfig rewrites them for `method`."""
        archs = data.get("architectures")
        if not isinstance(archs, list):
            return archs, None
        eagle = self.module("eagle", lambda: parse(self.root, EAGLE))
        if isinstance(eagle, Exception):
            return archs, {"error": "%s: %s" % (EAGLE, eagle)}
        for node in ast.walk(eagle.tree):
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and
                    isinstance(node.test.left, ast.Name) and
                    len(node.test.comparators) == 1 and
                    isinstance(node.test.ops[0], ast.Eq) and
                    isinstance(node.test.comparators[0], ast.Constant) and
                    node.test.comparators[0].value == method):
                continue
            for statement in node.body:
                value = architectures_comprehension(statement)
                if value is None:
                    continue
                generator = value.generators[0]
                try:
                    rewritten = []
                    for arch in archs:
                        scope = {}
                        Interpreter().assign(generator.target, arch, scope, eagle)
                        if all(Interpreter().expr(t, scope, eagle) for t in generator.ifs):
                            rewritten.append(Interpreter().expr(value.elt, scope, eagle))
                except (Raised, Unknown) as exc:
                    return archs, {"error": "%s:%d: %s" % (EAGLE, statement.lineno, exc)}
                if rewritten == archs:
                    return archs, None
                return rewritten, {"name": "EAGLEConfig's architecture rewrite for method %s"
                                   % method, "file": EAGLE, "line": statement.lineno,
                                   "stage": "engine",
                                   "text": "%s -> %s" % (", ".join(map(str, archs)),
                                                         ", ".join(map(str, rewritten)))}
        return archs, None


def architectures_comprehension(statement):
    """The comprehension of `X["architectures"] = [... for arch in ...]`, or None."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return None
    target = statement.targets[0]
    if not (isinstance(target, ast.Subscript) and
            isinstance(subscript_of(target), ast.Constant) and
            subscript_of(target).value == "architectures"):
        return None
    value = statement.value
    if isinstance(value, ast.ListComp) and len(value.generators) == 1:
        return value
    return None


def drafter_reading(conversions, data, method="dflash"):
    """The config vLLM's model code reads for this config.json, and how it got there."""
    out = {"conversions": []}
    converted, conversion = conversions.speculators(data)
    if conversion is not None:
        out["conversions"].append(conversion)
        if conversion.get("error"):
            out["error"] = conversion["error"]
            return out
    config = converted if converted is not None else data
    archs, rewrite = conversions.architectures(config, method)
    if rewrite is not None:
        out["conversions"].append(rewrite)
        if not rewrite.get("error"):
            config = dict(config, architectures=archs)
    if config is not data:
        out["data"] = config
    return out
