"""Which drafter config keys this install's code reads, for the drafter at hand, taken from
its own code with ast (never imported):

- **the config**: the drafter's config.json as vLLM converts it before any model code
  reads it (config_conversion.py: a speculators-format checkpoint, EAGLEConfig's
  architecture rewrite), with the conversions that applied;
- **the module and class**: the first of its `architectures` that
  `model_executor/models/registry.py` maps (`"Arch": ("module", "Class")` in one of its
  tables), then that class, its bases and the classes its body names, followed across
  modules among those the same registry table maps (a DFlash2 drafter's module subclasses
  the DFlash module's classes; the target models' modules are not followed);
- **the reads** in those modules: `config.X` / `self.config.X` / `hf_config.X`,
  `getattr(config, "X"[, d])`, and `C.get("X"[, d])` / `C["X"]` where C is the drafter's
  `dflash_config` (a name bound to a read of it, or updated with it). A read whose default
  is another read is one read with alternatives. A read is required only when no default
  and no guard protects it: `hasattr(config, "X")`, `"X" in C`, a `getattr`/`.get` test,
  or a `try` that catches KeyError or AttributeError around it;
- **the V2 model runner requirement**: a `raise NotImplementedError` under a condition
  that reads `use_v2_model_runner` (read from the AST: comments and strings elsewhere never
  count), with that condition; and VLLM_USE_V2_MODEL_RUNNER's default (vllm/envs.py).

Nothing here names an architecture. Run only when a drafter is found."""

import ast
import os

from fleetcheck.probe.codebase import callee_name  # signatures loads it anyway
from fleetcheck.probe.config_conversion import Conversions, drafter_reading
from fleetcheck.probe.files import ProbeFileError, read_bytes

REGISTRY = "vllm/model_executor/models/registry.py"
MODELS = "vllm/model_executor/models"
ENVS = "vllm/envs.py"
CONFIG_NAMES = ("config", "hf_config")  # what a drafter's HF config is called
CONTAINER = "dflash_config"
V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"
V2_FLAG = V2_ENV[len("VLLM_"):].lower()  # the VllmConfig attribute the env var sets
CAUGHT = ("KeyError", "AttributeError", "LookupError", "Exception", "BaseException")


def string_arg(call, index):
    args = call.args
    if len(args) > index and isinstance(args[index], ast.Constant) and \
            isinstance(args[index].value, str):
        return args[index].value
    return None


def reads_container(node, containers):
    """Does this expression hold the drafter's dflash_config?"""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and callee_name(sub.func) == "getattr" and \
                string_arg(sub, 1) == CONTAINER:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == CONTAINER and \
                isinstance(sub.ctx, ast.Load):
            return True
        if isinstance(sub, ast.Name) and sub.id in containers:
            return True
    return False


def container_names(tree):
    """Names bound to the dflash_config (assigned from a read of it, or updated with it)."""
    names = set()
    for _ in range(2):  # a name bound from another container name
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and reads_container(node.value, names):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "update" and isinstance(node.func.value, ast.Name) and \
                    any(reads_container(a, names) for a in node.args):
                names.add(node.func.value.id)
    return names


def subscript_index(node):
    index = node.slice
    return index.value if isinstance(index, ast.Index) else index  # ast.Index: Python 3.8


def read_of(node, containers, parents):
    """(key, has default, default expression) when `node` reads a drafter config key."""
    if isinstance(node, ast.Call):
        name = callee_name(node.func)
        if name == "getattr" and len(node.args) >= 2 and \
                callee_name(node.args[0]) in CONFIG_NAMES:
            key = string_arg(node, 1)
            if key and key != CONTAINER:
                default = node.args[2] if len(node.args) > 2 else None
                return key, default is not None, default
        if name == "get" and isinstance(node.func, ast.Attribute) and \
                reads_container(node.func.value, containers):
            key = string_arg(node, 0)
            if key:
                default = node.args[1] if len(node.args) > 1 else None
                return CONTAINER + "." + key, True, default
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
            reads_container(node.value, containers):
        index = subscript_index(node)
        if isinstance(index, ast.Constant) and isinstance(index.value, str):
            return CONTAINER + "." + index.value, False, None
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
            callee_name(node.value) in CONFIG_NAMES and node.attr != CONTAINER:
        parent = parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            return None  # a method of the config (to_dict, get_text_config)
        return node.attr, False, None
    return None


def guard_polarity(test, key):
    """+1 when `test` being true means `key` is there (hasattr(c, "key"), "key" in c,
    getattr(c, "key", None) is not None, c.get("key")), -1 when its being false does,
    0 when it says nothing of the key."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -guard_polarity(test.operand, key)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return 1 if any(guard_polarity(v, key) > 0 for v in test.values) else 0
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return -1 if any(guard_polarity(v, key) < 0 for v in test.values) else 0
    if isinstance(test, ast.Call):
        name = callee_name(test.func)
        if name in ("hasattr", "getattr") and string_arg(test, 1) == key:
            return 1
        if name == "get" and string_arg(test, 0) == key:
            return 1
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(left, ast.Constant) and left.value == key:
            if isinstance(op, ast.In):
                return 1
            if isinstance(op, ast.NotIn):
                return -1
        if isinstance(right, ast.Constant) and right.value is None:
            inner = guard_polarity(left, key)
            if isinstance(op, ast.IsNot):
                return inner
            if isinstance(op, ast.Is):
                return -inner
    return 0


def catches(handler):
    kinds = handler.type
    if kinds is None:
        return True
    names = [callee_name(k) for k in (kinds.elts if isinstance(kinds, ast.Tuple) else [kinds])]
    return any(n in CAUGHT for n in names)


def guarded(node, key, parents):
    """Is this read protected: under a test that the key is there, or inside a try that
    catches its absence?"""
    name = key.rsplit(".", 1)[-1]
    child, parent = node, parents.get(id(node))
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.Lambda,
                                                         ast.AsyncFunctionDef)):
        if isinstance(parent, (ast.If, ast.IfExp, ast.While)):
            in_body = child in (parent.body if isinstance(parent.body, list) else [parent.body])
            in_else = child in (parent.orelse if isinstance(parent.orelse, list)
                                else [parent.orelse])
            polarity = guard_polarity(parent.test, name)
            if (in_body and polarity > 0) or (in_else and polarity < 0):
                return True
        if isinstance(parent, ast.BoolOp) and child in parent.values:
            before = parent.values[:parent.values.index(child)]
            wanted = 1 if isinstance(parent.op, ast.And) else -1
            if any(guard_polarity(v, name) == wanted for v in before):
                return True
        if isinstance(parent, ast.Try) and child in parent.body and \
                any(catches(h) for h in parent.handlers):
            return True
        child, parent = parent, parents.get(id(parent))
    return False


def parents_of(tree):
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def module_reads(tree, text, rel):
    """Every read of one module, one entry per (key, line)."""
    parents = parents_of(tree)
    containers = container_names(tree)
    lines = text.split("\n")
    found = {}
    inside_default = set()
    for node in ast.walk(tree):
        read = read_of(node, containers, parents)
        if read is None:
            continue
        key, has_default, default = read
        alternatives = []
        if default is not None:
            for sub in ast.walk(default):
                inner = read_of(sub, containers, parents)
                if inner is not None:
                    alternatives.append(inner[0])
                    inside_default.add((inner[0], getattr(sub, "lineno", 0), rel))
        line = getattr(node, "lineno", 0)
        entry = found.setdefault((key, line), {
            "key": key, "line": line, "file": rel, "default": True,
            "text": lines[line - 1].strip()[:200] if 0 < line <= len(lines) else "",
            "alternatives": []})
        if not has_default and not guarded(node, key, parents):
            entry["default"] = False  # one unprotected read on this line is enough
        for alt in alternatives:
            if alt not in entry["alternatives"]:
                entry["alternatives"].append(alt)
    stored = set(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and
                 isinstance(n.ctx, ast.Store) and callee_name(n.value) in CONFIG_NAMES)
    return found, inside_default, stored


def merged_reads(parsed):
    """One entry per key over the modules read (in the order given): required when some
    read has neither default nor guard and no module assigns the key."""
    found, inside, stored = {}, set(), set()
    for rel, tree, text in parsed:
        reads, defaults, stores = module_reads(tree, text, rel)
        for (key, line), entry in reads.items():
            found[(key, rel, line)] = entry
        inside |= defaults
        stored |= stores
    order = dict((rel, i) for i, (rel, _, _) in enumerate(parsed))
    by_key = {}
    for (key, rel, line), entry in sorted(found.items(),
                                          key=lambda i: (order[i[0][1]], i[0][2], i[0][0])):
        if (key, line, rel) in inside and not entry["alternatives"]:
            continue
        first = by_key.get(key)
        required = not entry.pop("default") and key not in stored
        if first is None:
            entry["required"] = required
            entry["reads"] = 1
            by_key[key] = entry
            continue
        first["reads"] += 1
        if required and not first["required"]:  # point at the read that needs the key
            for name in ("line", "file", "text"):
                first[name] = entry[name]
            first["required"] = True
        for alt in entry["alternatives"]:
            if alt not in first["alternatives"]:
                first["alternatives"].append(alt)
    return list(by_key.values())


def joined_strings(node):
    return "".join(s.value for s in ast.walk(node)
                   if isinstance(s, ast.Constant) and isinstance(s.value, str))


def v2_requirement(tree, text, rel):
    """The `raise NotImplementedError` guarded by a test of the V2 model runner flag:
    {file, line, text (the error's words), condition (the guarding test)}, or None."""
    parents = parents_of(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if callee_name(exc) != "NotImplementedError":
            continue
        parent = parents.get(id(node))
        while parent is not None and not isinstance(parent, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef)):
            if isinstance(parent, ast.If) and any(
                    (isinstance(n, ast.Attribute) and n.attr == V2_FLAG) or
                    (isinstance(n, ast.Name) and n.id == V2_FLAG) or
                    (isinstance(n, ast.Constant) and n.value == V2_ENV)
                    for n in ast.walk(parent.test)):
                condition = ast.get_source_segment(text, parent.test) or ""
                return {"file": rel, "line": node.lineno,
                        "text": joined_strings(node.exc)[:300],
                        "condition": " ".join(condition.split())[:300]}
            parent = parents.get(id(parent))
    return None


def v2_default(root):
    """VLLM_USE_V2_MODEL_RUNNER's default as vllm/envs.py reads it: the second argument
    of its os.getenv (None: vLLM decides; "0"/"False": off; "1"/"True": on), wherever
    the formatter wrapped the call."""
    import re  # only when a drafter is found
    path = os.path.join(root, ENVS)
    try:
        text = read_bytes(path).decode("utf-8", "replace")
    except ProbeFileError as exc:
        return {"error": str(exc)}
    match = re.search(r'os\.getenv\(\s*"%s"\s*(?:,\s*([^)]*?))?\s*\)' % V2_ENV, text)
    if match is None:
        return {"error": "%s: %s is not read there" % (ENVS, V2_ENV)}
    line = text.count("\n", 0, match.start()) + 1
    default = (match.group(1) or "None").strip().rstrip(",").strip()
    return {"file": ENVS, "line": line, "text": " ".join(match.group(0).split())[:200],
            "default": None if default == "None" else default.strip("'\"")}


def module_rel(name):
    """The file of a registry module name: `vllm.x.y` as written, else one of models/."""
    if name.startswith("vllm."):
        return name.replace(".", "/") + ".py"
    return MODELS + "/" + name + ".py"


def registry_tables(root):
    """{arch: (table, module file, class, line, text)} for every `"Arch": ("module",
    "Class")` entry of the registry's dict literals, and {table: set of module files}."""
    text = read_bytes(os.path.join(root, REGISTRY)).decode("utf-8", "replace")
    tree = ast.parse(text)
    lines = text.split("\n")
    entries, tables = {}, {}
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if not isinstance(value, ast.Dict) or not targets or \
                not isinstance(targets[0], ast.Name):
            continue
        table = targets[0].id
        for key, item in zip(value.keys, value.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and \
                    isinstance(item, ast.Tuple) and len(item.elts) == 2 and \
                    all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                        for e in item.elts):
                rel = module_rel(item.elts[0].value)
                tables.setdefault(table, set()).add(rel)
                entries.setdefault(key.value, (table, rel, item.elts[1].value, key.lineno,
                                               lines[key.lineno - 1].strip()[:200]))
    return entries, tables


class Sources:
    """The install's module files, parsed once."""

    def __init__(self, root):
        self.root = root
        self.parsed = {}

    def resolve(self, rel):
        """The file of a module: `a/b.py`, else the package `a/b/__init__.py`. Told by
        the files being there, not by parsing them: the modules a registry allows are
        resolved by the hundred, and only the few a class closure reaches are parsed
        (benchmarks/probe_cost.py, the row with a named drafter)."""
        if not rel.endswith(".py") or self.exists(rel):
            return rel
        package = rel[:-3] + "/__init__.py"
        return package if self.exists(package) else rel

    def exists(self, rel):
        parsed = self.parsed.get(rel)
        if parsed is not None:
            return not isinstance(parsed, Exception)
        return os.path.isfile(os.path.join(self.root, rel))

    def get(self, rel):
        if rel not in self.parsed:
            try:
                text = read_bytes(os.path.join(self.root, rel)).decode("utf-8", "replace")
                self.parsed[rel] = (ast.parse(text), text)
            except (ProbeFileError, SyntaxError, ValueError) as exc:
                self.parsed[rel] = exc
        return self.parsed[rel]


def imported_module(rel, node):
    """The file an ImportFrom in `rel` names, for relative and `vllm.` imports."""
    if node.level:
        package = rel.rsplit("/", 1)[0].split("/")
        package = package[:len(package) - (node.level - 1)]
        return "/".join(package + (node.module.split(".") if node.module else [])) + ".py"
    if node.module and node.module.startswith("vllm."):
        return node.module.replace(".", "/") + ".py"
    return None


def class_closure(sources, rel, cls, allowed):
    """The classes vLLM builds for (rel, cls): the class, its bases and the classes its
    body names, followed across the `allowed` modules; [(rel, class)] in the order found,
    and the modules they are in."""
    allowed = set(sources.resolve(a) for a in allowed)
    seen, queue, modules = [], [(sources.resolve(rel), cls)], []
    while queue:
        here, name = queue.pop(0)
        here = sources.resolve(here)
        if (here, name) in seen or here not in allowed:
            continue
        parsed = sources.get(here)
        if isinstance(parsed, Exception):
            continue
        tree = parsed[0]
        local = dict((n.name, n) for n in tree.body if isinstance(n, ast.ClassDef))
        imports = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                source = imported_module(here, node)
                for alias in node.names:
                    if source is not None:
                        imports[alias.asname or alias.name] = (source, alias.name)
        node = local.get(name)
        if node is None:  # a name the module imports (a re-export): where it is defined
            if name in imports:
                allowed.add(sources.resolve(imports[name][0]))
                queue.append(imports[name])
            continue
        seen.append((here, name))
        if here not in modules:
            modules.append(here)
        named = [b for b in node.bases] + [n for n in ast.walk(node) if isinstance(n, ast.Name)]
        for ref in named:
            ident = ref.id if isinstance(ref, ast.Name) else None
            if ident is None or ident == name:
                continue
            if ident in local:
                queue.append((here, ident))
            elif ident in imports:
                queue.append(imports[ident])
    return seen, modules


def code_for(root, sources, entry, tables):
    """The facts of one architecture: its module, class, the classes followed, the keys
    they read, the runner requirement."""
    table, rel, cls, line, text = entry
    out = {"module": rel, "cls": cls, "registry_line": line, "registry_text": text,
           "registry_table": table}
    classes, modules = class_closure(sources, rel, cls, tables.get(table, set()))
    rel = sources.resolve(rel)
    out["module"] = rel
    parsed = sources.get(rel)
    if isinstance(parsed, Exception):
        out["error"] = "%s: %s" % (rel, parsed)
        return out
    if not classes:
        out["error"] = "%s defines no class %s" % (rel, cls)
        return out
    out["classes"] = ["%s:%s" % (r.rsplit("/", 1)[-1][:-3], c) for r, c in classes]
    out["modules"] = modules
    trees = []
    for module in modules:
        got = sources.get(module)
        if not isinstance(got, Exception):
            trees.append((module, got[0], got[1]))
    out["reads"] = merged_reads(trees)
    for module, tree, source in trees:
        need = v2_requirement(tree, source, module)
        if need is not None:
            out["v2_required"] = need
            break
    out["v2_default"] = v2_default(root)
    return out


def read_drafters(root, models):
    """For each drafter model dict (with a parsed config): `reading` (the config vLLM
    reads, the conversions that applied, the architecture its registry maps); and the
    code facts of each architecture chosen, by name."""
    codes = {}
    try:
        entries, tables = registry_tables(root)
    except (ProbeFileError, SyntaxError, ValueError) as exc:
        for model in models:
            model["reading"] = {"error": "%s: %s" % (REGISTRY, exc)}
        return codes
    conversions = Conversions(root)
    sources = Sources(root)
    for model in models:
        data = (model.get("config") or {}).get("data")
        if not isinstance(data, dict):
            continue
        reading = drafter_reading(conversions, data)
        model["reading"] = reading
        if reading.get("error"):
            continue
        config = reading.get("data", data)
        archs = config.get("architectures")
        archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
        chosen = next((a for a in archs if a in entries), None)
        if chosen is None:
            reading["registry_error"] = "%s maps none of %s" % (
                REGISTRY, ", ".join(archs) if archs else "its architectures (none given)")
            continue
        reading["architecture"] = chosen
        if chosen not in codes:
            codes[chosen] = code_for(root, sources, entries[chosen], tables)
    return codes
