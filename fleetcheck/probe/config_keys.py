"""Which drafter config keys this install's DFlash code reads, taken from its own code:
the module vLLM's model registry maps `DFlashDraftModel` to (the registry entry found as
the fix checks find it), parsed with ast. A read is `config.X` / `self.config.X` /
`hf_config.X` (no default: the loaded config must have it), `getattr(config, "X", d)`,
and `C.get("X", d)` / `C["X"]` where C is the drafter's `dflash_config` (a name bound to
a read of it, or the read itself). A read whose default is another read is one read
with alternatives (`dflash_config.get("swa_window_size", getattr(config,
"sliding_window", None))`). Also the V2 model runner requirement for mixed drafters (its
error text in the module) and VLLM_USE_V2_MODEL_RUNNER's default (vllm/envs.py), and
every architecture the registry maps to a DFlash module. Run only when a drafter is
found: a host without one pays nothing."""

import ast
import os

from fleetcheck.probe.codebase import callee_name  # signatures loads it anyway
from fleetcheck.probe.files import ProbeFileError, read_bytes
from fleetcheck.probe.signatures import resolve_registry_module

REGISTRY = "vllm/model_executor/models/registry.py"
ENVS = "vllm/envs.py"
ARCH = "DFlashDraftModel"
CONFIG_NAMES = ("config", "hf_config")  # what a drafter's HF config is called
CONTAINER = "dflash_config"
V2_NEEDLE = "V2 model runner"
V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"


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
        index = node.slice.value if isinstance(node.slice, ast.Index) else node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, str):
            return CONTAINER + "." + index.value, False, None
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
            callee_name(node.value) in CONFIG_NAMES and node.attr != CONTAINER:
        parent = parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            return None  # a method of the config (to_dict, get_text_config)
        return node.attr, False, None
    return None


def config_reads(text, rel):
    """Every read, with the alternatives its default reads; one entry per (key, line)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        return None, "%s: cannot parse (%s)" % (rel, exc)
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
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
                    inside_default.add((inner[0], getattr(sub, "lineno", 0)))
        line = getattr(node, "lineno", 0)
        entry = found.setdefault((key, line), {
            "key": key, "line": line, "file": rel, "default": has_default,
            "text": lines[line - 1].strip()[:200] if 0 < line <= len(lines) else "",
            "alternatives": []})
        for alt in alternatives:
            if alt not in entry["alternatives"]:
                entry["alternatives"].append(alt)
    stored = set(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and
                 isinstance(n.ctx, ast.Store) and callee_name(n.value) in CONFIG_NAMES)
    by_key = {}  # one entry per key: required when no read has a default and none assigns it
    for (key, line), entry in sorted(found.items(), key=lambda i: (i[0][1], i[0][0])):
        if (key, line) in inside_default and not entry["alternatives"]:
            continue
        first = by_key.get(key)
        if first is None:
            entry["required"] = not entry.pop("default") and key not in stored
            entry["reads"] = 1
            by_key[key] = entry
            continue
        first["reads"] += 1
        if entry["default"]:
            first["required"] = False
        for alt in entry["alternatives"]:
            if alt not in first["alternatives"]:
                first["alternatives"].append(alt)
    return list(by_key.values()), None


def v2_requirement(text, rel):
    """The line where the DFlash module demands the V2 model runner, if it does."""
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if V2_NEEDLE in line:
            return {"file": rel, "line": number, "text": line.strip()[:200]}
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


def dflash_architectures(root, module_rel):
    """Every architecture the registry maps to the DFlash drafter module."""
    import re  # only when a drafter is found
    try:
        text = read_bytes(os.path.join(root, REGISTRY)).decode("utf-8", "replace")
    except ProbeFileError:
        return []
    module = os.path.basename(module_rel)[:-3]
    pattern = re.compile(r'"(\w+)"\s*:\s*\(\s*"%s"' % re.escape(module))
    return sorted(set(pattern.findall(text)))


def install_config_keys(root):
    """The facts: the drafter module, its reads, the runner requirement and default."""
    out = {}
    try:
        rel, line = resolve_registry_module(root, {"registry": REGISTRY, "arch": ARCH}, {})
    except ProbeFileError as exc:
        out["error"] = str(exc)
        return out
    if rel is None:
        out["error"] = "%s maps no module to %s" % (REGISTRY, ARCH)
        return out
    out["module"], out["registry_line"] = rel, line
    try:
        text = read_bytes(os.path.join(root, rel)).decode("utf-8", "replace")
    except ProbeFileError as exc:
        out["error"] = str(exc)
        return out
    reads, error = config_reads(text, rel)
    if error:
        out["error"] = error
        return out
    out["reads"] = reads
    out["architectures"] = dflash_architectures(root, rel)
    out["v2_required"] = v2_requirement(text, rel)
    out["v2_default"] = v2_default(root)
    return out
