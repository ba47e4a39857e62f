"""Fix signatures: token patterns that survive restyling, string literals, and the
key-offset dataflow, run over the files a check names; results are findings with evidence."""

import ast
import hashlib
import io
import os
import re
import sys
import tokenize

from fleetcheck.probe.files import ProbeFileError, expand_globs, read_bytes, read_text

MAX_EVIDENCE_CHARS = 300
MAX_GAP_TOKENS = 60
MAX_EVIDENCE_PER_FINDING = 5


def resolve_registry_module(root, spec):
    """The module file that vLLM's model registry maps an architecture name to."""
    registry = spec["registry"]
    text = read_text(os.path.join(root, registry))
    package = registry.rsplit("/", 1)[0]
    tree = ast.parse(text, registry)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if (isinstance(key, ast.Constant) and key.value == spec["arch"]
                    and isinstance(value, (ast.Tuple, ast.List)) and value.elts
                    and isinstance(value.elts[0], ast.Constant)):
                module = value.elts[0].value
                if "." in module:
                    rel = module.replace(".", "/") + ".py"
                else:
                    rel = package + "/" + module + ".py"
                return rel, key.lineno
    return None, None


# ---------------------------------------------------------------------------------------
# Token patterns: formatting, quotes and line breaks do not matter


SKIPPED_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                  tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
FSTRING_TOKENS = {getattr(tokenize, name) for name in
                  ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)}
VAR_PREFIX = "__fleetcheck_var_"


def string_value(text):
    try:
        value = ast.literal_eval(text)
        return value if isinstance(value, str) else repr(value)
    except (ValueError, SyntaxError):
        return text


def normalize_tokens(source):
    """Tokens as (kind, value, line): comments and layout dropped, adjacent string literals
    joined and compared by value, so a restyled file yields the same sequence."""
    out = []
    pending = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in SKIPPED_TOKENS:
                continue
            if tok.type == tokenize.STRING or tok.type in FSTRING_TOKENS:
                piece = string_value(tok.string) if tok.type == tokenize.STRING else tok.string
                if pending is None:
                    pending = ["S", piece, tok.start[0], tok.end[0]]
                else:
                    pending[1] += piece
                    pending[3] = tok.end[0]
                continue
            if pending is not None:
                out.append(tuple(pending))
                pending = None
            kind = "N" if tok.type == tokenize.NAME else "O"
            if tok.type == tokenize.NUMBER:
                kind = "#"
            out.append((kind, tok.string, tok.start[0], tok.end[0]))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    if pending is not None:
        out.append(tuple(pending))
    return out


def compile_pattern(pattern):
    prepared = re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", VAR_PREFIX + r"\1", pattern)
    compiled = []
    for kind, value, _, _ in normalize_tokens(prepared):
        if kind == "N" and value.startswith(VAR_PREFIX):
            compiled.append(("var", value[len(VAR_PREFIX):]))
        elif kind == "O" and value == "...":
            compiled.append(("gap", None))
        else:
            compiled.append((kind, value))
    return compiled


SCOPE_BARRIERS = {"def", "class"}


def match_at(pattern, tokens, pi, ti, bindings):
    """Backtracking match; a gap never crosses a def/class, so a pattern stays inside
    the function it starts in."""
    if pi == len(pattern):
        return ti
    kind, value = pattern[pi]
    if kind == "gap":
        limit = min(len(tokens), ti + MAX_GAP_TOKENS + 1)
        for skip in range(ti, limit):
            end = match_at(pattern, tokens, pi + 1, skip, bindings)
            if end is not None:
                return end
            if tokens[skip][0] == "N" and tokens[skip][1] in SCOPE_BARRIERS:
                return None
        return None
    if ti >= len(tokens):
        return None
    tkind, tvalue = tokens[ti][0], tokens[ti][1]
    if kind == "var":
        if tkind != "N":
            return None
        bound = bindings.get(value)
        if bound is not None and bound != tvalue:
            return None
        fresh = bound is None
        bindings[value] = tvalue
        end = match_at(pattern, tokens, pi + 1, ti + 1, bindings)
        if end is None and fresh:
            del bindings[value]
        return end
    if tkind != kind:
        return None
    if tvalue != value and not (kind == "S" and value in tvalue):
        return None
    return match_at(pattern, tokens, pi + 1, ti + 1, bindings)


def evidence_text(lines, first, last):
    """The matched code on one line; a long match shows its first and last line."""
    picked = [line.strip() for line in lines[first - 1:last]]
    picked = [part for part in picked if part]
    if len(picked) > 5:
        picked = picked[:2] + ["..."] + picked[-2:]
    text = " ".join(picked)
    if len(text) > MAX_EVIDENCE_CHARS:
        text = text[:MAX_EVIDENCE_CHARS - 3] + "..."
    return text


def find_pattern(rel, source, tokens, pattern):
    lines = source.splitlines()
    hits = []
    if not pattern:
        return hits
    first_kind, first_value = pattern[0]
    for ti, tok in enumerate(tokens):
        if first_kind not in ("var", "gap") and (tok[0] != first_kind or tok[1] != first_value):
            continue
        end = match_at(pattern, tokens, 0, ti, {})
        if end is not None:
            start_line = tok[2]
            end_line = tokens[end - 1][3]
            hits.append({"file": rel, "line": start_line,
                         "text": evidence_text(lines, start_line, end_line)})
    return hits


def find_string(rel, source, tokens, text):
    lines = source.splitlines()
    return [{"file": rel, "line": tok[2], "text": evidence_text(lines, tok[2], tok[3])}
            for tok in tokens if tok[0] == "S" and text in tok[1]]


# ---------------------------------------------------------------------------------------
# Key offset: how much is added to ids read under a given config key


PASS_THROUGH_CALLS = {"tuple", "list", "sorted"}


class OffsetTracker(object):
    """Follows values read under `key` through one function: names they are assigned to,
    comprehensions that add a constant to each element. Reports the total offset each
    value carries, so `+1` once, `+1` twice and no offset are told apart."""

    def __init__(self, key):
        self.key = key

    def is_source(self, node):
        if isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Index):  # Python 3.8
                index = index.value
            return isinstance(index, ast.Constant) and index.value == self.key
        if isinstance(node, ast.Call):
            return any(isinstance(arg, ast.Constant) and arg.value == self.key
                       for arg in node.args)
        return False

    def offset(self, node, env):
        """(offset, first line, last line of the transform), or None when the value does
        not carry the ids."""
        if self.is_source(node):
            return (0, node.lineno, getattr(node, "end_lineno", node.lineno))
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.BoolOp):
            found = [self.offset(value, env) for value in node.values]
            found = [f for f in found if f is not None]
            return max(found) if found else None
        if isinstance(node, ast.IfExp):
            found = [self.offset(value, env) for value in (node.body, node.orelse)]
            found = [f for f in found if f is not None]
            return max(found) if found else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in PASS_THROUGH_CALLS and len(node.args) == 1:
            return self.offset(node.args[0], env)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and \
                len(node.generators) == 1:
            gen = node.generators[0]
            inner = self.offset(gen.iter, env)
            if inner is None or not isinstance(gen.target, ast.Name):
                return None
            added = self.added_constant(node.elt, gen.target.id)
            if added is None:
                return inner
            return (inner[0] + added, node.lineno, getattr(node, "end_lineno", node.lineno))
        return None

    @staticmethod
    def added_constant(elt, var):
        if isinstance(elt, ast.BinOp) and isinstance(elt.op, (ast.Add, ast.Sub)):
            pairs = ((elt.left, elt.right), (elt.right, elt.left))
            for name_side, const_side in pairs:
                if isinstance(name_side, ast.Name) and name_side.id == var and \
                        isinstance(const_side, ast.Constant) and \
                        isinstance(const_side.value, int):
                    if isinstance(elt.op, ast.Sub):
                        return -const_side.value if name_side is elt.left else None
                    return const_side.value
        return None

    def function_offsets(self, func):
        """Offsets of every value derived from the key inside one function."""
        env = {}
        seen = []
        statements = sorted((n for n in ast.walk(func) if isinstance(n, ast.stmt)),
                            key=lambda n: (n.lineno, n.col_offset))
        for node in statements:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return, ast.Expr)) and \
                    getattr(node, "value", None) is not None:
                found = self.offset(node.value, env)
                if found is None:
                    continue
                seen.append(found)
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [getattr(node, "target", None)]
                for target in targets:
                    if isinstance(target, ast.Name):
                        env[target.id] = found
        return seen

    def scan(self, rel, source):
        tree = ast.parse(source, rel)
        lines = source.splitlines()
        results = []
        ordered = sorted((n for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                         key=lambda n: n.lineno)
        for func in ordered:
            offsets = self.function_offsets(func)
            if not offsets:
                continue
            total, line, end = min(offsets, key=lambda item: (-item[0], item[1]))
            results.append({"file": rel, "line": line, "function": func.name,
                            "offset": total, "text": evidence_text(lines, line, end)})
        return results


# ---------------------------------------------------------------------------------------
# Running the plan's signatures


def run_finder(root, finder, files, cache):
    """Evidence hits for one finder over its files."""
    kind = finder["kind"]
    needles = finder["needles"]
    hits = []
    errors = []
    for rel in files:
        path = os.path.join(root, rel)
        entry = cache.get(rel)
        if entry is None:
            try:
                data = read_bytes(path)
            except ProbeFileError as exc:
                entry = {"error": str(exc)}
            else:
                # the digest lets the integrity check compare these files with RECORD
                # without reading them twice
                entry = {"source": data.decode("utf-8", "replace"),
                         "sha256": hashlib.sha256(data).digest()}
            cache[rel] = entry
        if "error" in entry:
            if os.path.lexists(path) or not finder.get("optional_files"):
                errors.append(entry["error"])
            continue
        source = entry["source"]
        present = [n is None or n in source for n in needles]
        if not any(present):
            continue
        if kind in ("pattern", "string"):
            if "tokens" not in entry:
                entry["tokens"] = normalize_tokens(source)
            if kind == "pattern":
                for pattern, wanted in zip(finder["compiled"], present):
                    if wanted:
                        hits.extend(find_pattern(rel, source, entry["tokens"], pattern))
            else:
                hits.extend(find_string(rel, source, entry["tokens"], finder["text"]))
        elif kind == "key-offset":
            try:
                hits.extend(OffsetTracker(finder["key"]).scan(rel, source))
            except (SyntaxError, ValueError) as exc:
                errors.append("%s: cannot parse with Python %s: %s" % (
                    rel, sys.version.split()[0], exc))
    return hits, errors


def pattern_needle(pattern):
    """The longest name a file must contain for a pattern to match: files without it are
    never tokenized. Only names count: string values may be split or escaped on disk."""
    names = [value for kind, value in pattern if kind == "N"]
    return max(names, key=len) if names else None


def choose_needles(finder):
    if finder["kind"] == "pattern":
        return [pattern_needle(p) for p in finder["compiled"]]
    if finder["kind"] == "string":
        words = re.findall(r"\w+", finder["text"])
        return [max(words, key=len) if words else None]
    return [finder["key"]]


def run_signature(root, signature, cache):
    """Facts for one check: each finder's evidence (or why it could not run)."""
    facts = {"modules": {}, "findings": {}, "errors": [], "files_searched": {}}
    substitutions = {}
    for name, spec in sorted(signature.get("modules", {}).items()):
        try:
            rel, line = resolve_registry_module(root, spec)
        except (ProbeFileError, SyntaxError, ValueError) as exc:
            facts["errors"].append("module %s: %s" % (name, exc))
            continue
        facts["modules"][name] = {"file": rel, "registry": spec["registry"], "line": line}
        if rel:
            substitutions[name] = rel
    for name, finder in sorted(signature.get("find", {}).items()):
        patterns = []
        missing_module = None
        for pattern in finder["files"]:
            for key, value in substitutions.items():
                pattern = pattern.replace("{" + key + "}", value)
            if "{" in pattern:
                missing_module = pattern
                continue
            patterns.append(pattern)
        if missing_module:
            facts["errors"].append("finder %s: unresolved file %s" % (name, missing_module))
        if finder["kind"] == "pattern":
            finder["compiled"] = [compile_pattern(p) for p in finder["patterns"]]
        finder["needles"] = choose_needles(finder)
        files = expand_globs(root, patterns)
        facts["files_searched"][name] = files
        hits, errors = run_finder(root, finder, files, cache)
        if finder["kind"] == "key-offset":
            by_offset = {}
            for hit in hits:
                label = "%s:%d" % (name, hit["offset"]) if hit["offset"] < 2 else name + ":2+"
                by_offset.setdefault(label, []).append(hit)
            for label, label_hits in by_offset.items():
                facts["findings"][label] = label_hits[:MAX_EVIDENCE_PER_FINDING]
        elif hits:
            facts["findings"][name] = hits[:MAX_EVIDENCE_PER_FINDING]
        facts["errors"].extend("finder %s: %s" % (name, e) for e in errors)
    return facts


