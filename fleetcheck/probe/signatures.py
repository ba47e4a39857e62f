"""Fix signatures: run each check's finders over the files it names and return findings
with evidence. Files are read once per probe (shared by every check), searched for a
needle on raw bytes first, and only the windows around a needle are lexed or parsed."""

import os
import re

from fleetcheck.probe.codebase import Codebase
from fleetcheck.probe.decision import Evaluator, decide
from fleetcheck.probe.files import MissingFile, ProbeFileError, expand_globs, read_bytes
from fleetcheck.probe.lexer import compile_pattern
from fleetcheck.probe.patterns import MAX_GAP_TOKENS, find_pattern, find_string
from fleetcheck.probe.source import SourceFile
from fleetcheck.probe.trace import trace
from fleetcheck.probe.trace.key_offset import KeyOffset
from fleetcheck.probe.trace.value_source import ValueSource

MAX_EVIDENCE_PER_FINDING = 5
EVALUATORS = []  # (the file cache, the decision evaluator over it): shared by its finders
WINDOW_BACK_LINES = 60
STRING_BACK_LINES = 20


def resolve_registry_module(root, spec, cache):
    """The module file that vLLM's model registry maps an architecture name to: the
    `"Arch": ("module", "Class")` entry, found with the lexer around the name."""
    registry = spec["registry"]
    source = load_source(root, registry, cache)
    if isinstance(source, ProbeFileError):
        raise source
    package = registry.rsplit("/", 1)[0]
    arch = spec["arch"]
    for line in source.hit_lines(arch):
        tokens = source.tokens_from(source.safe_start(line, STRING_BACK_LINES), line, 6)
        for i in range(len(tokens) - 3):
            if tokens[i][:2] == ("S", arch) and tokens[i + 1][1] == ":" and \
                    tokens[i + 2][1] in ("(", "[") and tokens[i + 3][0] == "S":
                module = tokens[i + 3][1]
                rel = module.replace(".", "/") + ".py" if "." in module else \
                    package + "/" + module + ".py"
                return rel, tokens[i][2]
    return None, None


def pattern_needle(pattern):
    """The longest word a file must contain for the pattern to match: a name if the
    pattern has one, else a word inside one of its strings (a single word is never split
    across implicitly joined literals)."""
    names = names_in(pattern)
    if not names:
        names = [w for kind, value in pattern if kind == "S" for w in re.findall(r"\w+", value)]
    return max(names, key=len) if names else None


def names_in(pattern):
    return [value for kind, value in pattern if kind == "N"]


def finder_whole_words(finder):
    """Per needle: does the pattern match it only as a whole name token? (A name token
    must equal the needle; a string matches by containment, so its words may be parts.)"""
    if finder["kind"] == "pattern":
        return [bool(names_in(p)) for p in finder["compiled"]]
    return [False] * len(finder["needles"])


def finder_needles(finder):
    if finder["kind"] == "pattern":
        return [pattern_needle(p) for p in finder["compiled"]]
    if finder["kind"] == "string":
        words = re.findall(r"\w+", finder["text"])
        return [max(words, key=len) if words else None]
    if finder["kind"] == "value-source":
        return [finder["argument"]]
    if finder["kind"] == "decision":
        return [finder["function"]]
    return [finder["key"]]


def offset_label(name, offset):
    """The finding a key-offset hit is filed under: NAME:0, :1, :2+, :<0 or :?."""
    if offset == "?":
        return name + ":?"
    if offset < 0:
        return name + ":<0"
    return "%s:%d" % (name, offset) if offset < 2 else name + ":2+"


def pattern_reach(pattern, needle):
    """(lines to lex before the needle's line, tokens to lex after it) so that any match
    of the pattern around the needle is inside the window. Without a gap, each token
    before the needle takes at most a line (plus slack for blank and comment lines);
    a gap may span up to MAX_GAP_TOKENS tokens."""
    index = next((i for i, (kind, value) in enumerate(pattern)
                  if kind == "N" and value == needle), None)
    if index is None:
        index = next((i for i, (kind, value) in enumerate(pattern)
                      if kind == "S" and needle in value), 0)
    before, after = pattern[:index], pattern[index + 1:]
    gaps_before = sum(1 for kind, _ in before if kind == "gap")
    back = WINDOW_BACK_LINES if gaps_before else len(before) + 3
    ahead = sum(MAX_GAP_TOKENS if kind == "gap" else 1 for kind, _ in after) + 2
    return back, ahead


def finder_reach(finder):
    if finder["kind"] == "pattern":
        return [pattern_reach(p, n) for p, n in zip(finder["compiled"], finder["needles"])]
    # a string literal may be joined from pieces on earlier lines
    return [(STRING_BACK_LINES, 4)]


def load_source(root, rel, cache):
    entry = cache.get(rel)
    if entry is None:
        try:
            entry = SourceFile(rel, read_bytes(os.path.join(root, rel)))
        except MissingFile:
            entry = MissingFile(rel)  # shipped as "absent", proved absent by followers
        except ProbeFileError as exc:
            entry = exc
        cache[rel] = entry
    return entry


def readable(root, files, cache, errors):
    """(rel, SourceFile) of each file that could be read; why the others could not goes
    to `errors`."""
    for rel in files:
        source = load_source(root, rel, cache)
        if isinstance(source, ProbeFileError):
            errors.append(str(source))
        else:
            yield rel, source


def run_dataflow(root, finder, files, cache):
    """key-offset and value-source: flows from the functions around the needle, through
    helpers read (and cached, so they ship) only when a flow reaches them."""
    codebase = Codebase(lambda rel: load_source(root, rel, cache))
    if finder["kind"] == "key-offset":
        question = KeyOffset(finder["key"], finder.get("container"))
    else:
        sources = {}
        for label, names in sorted(finder["sources"].items()):
            for name in names:
                sources.setdefault(name, label)
        constants = dict((value, label) for label, values in
                         sorted(finder.get("constants", {}).items()) for value in values)
        question = ValueSource(finder["call"], finder["argument"], sources, constants)
    errors = []
    hits, examined = trace(codebase, needle_files(root, finder, files, cache, errors),
                           question, files, errors)
    for rel in examined:
        entry = cache.get(rel)
        if entry is not None and not isinstance(entry, ProbeFileError):
            entry.examined = True
    return hits, errors


def needle_files(root, finder, files, cache, errors):
    """The finder's files holding its needle (value-source: or a call of its callee,
    which may pass the argument by position), marked examined as they are met."""
    for rel, source in readable(root, files, cache, errors):
        if not source.contains(finder["needles"][0]) and not (
                finder["kind"] == "value-source" and source.contains(finder["call"] + "(")):
            continue
        source.examined = True
        yield source


def run_decision(root, finder, files, cache):
    """decision: what each def of the function returns for DFlash (decision.py), with
    the helpers it calls read (and cached, so they ship) only as the evaluation reaches
    them."""
    if not (EVALUATORS and EVALUATORS[0][0] is cache):  # one per probe run's file cache
        codebase = Codebase(lambda rel: load_source(root, rel, cache))
        EVALUATORS[:] = [(cache, Evaluator(codebase))]
    evaluator = EVALUATORS[0][1]
    errors = []
    sources = []
    for rel, source in readable(root, files, cache, errors):
        if source.contains(finder["function"]):
            source.examined = True
            sources.append(source)
    try:
        hits, examined = decide(evaluator.codebase, sources, finder["function"], evaluator)
    except (SyntaxError, ValueError, RecursionError) as exc:
        return [], errors + ["cannot parse: %s" % exc]
    except Exception as exc:  # a tree the evaluator does not expect: an error, never a pass
        return [], errors + ["evaluation failed (%s: %s)" % (type(exc).__name__, exc)]
    for rel in examined:
        entry = cache.get(rel)
        if entry is not None and not isinstance(entry, ProbeFileError):
            entry.examined = True
    return hits, errors


def run_finder(root, finder, files, cache):
    """Evidence hits for one finder over its files, and the errors that kept it from
    reading some of them."""
    kind = finder["kind"]
    if kind == "decision":
        return run_decision(root, finder, files, cache)
    if kind in ("key-offset", "value-source"):
        return run_dataflow(root, finder, files, cache)
    hits = []
    errors = []
    for rel, source in readable(root, files, cache, errors):
        wanted = [needle for needle in finder["needles"] if source.contains(needle)]
        if not wanted:
            continue
        source.examined = True
        for index, needle in enumerate(finder["needles"]):
            if needle not in wanted:
                continue
            pattern = finder["compiled"][index] if kind == "pattern" else None
            back, ahead = finder["reach"][index]
            for line in source.hit_lines(needle, finder["whole_words"][index]):
                tokens = source.tokens_from(source.safe_start(line, back), line, ahead)
                if kind == "pattern":
                    hits.extend(find_pattern(rel, source.lines, tokens, pattern))
                else:
                    hits.extend(find_string(rel, source.lines, tokens, finder["text"]))
    unique = []
    for hit in hits:
        if hit not in unique:
            unique.append(hit)
    return unique, errors


def run_signature(root, signature, cache, walks):
    """Facts for one check: each finder's evidence (or why it could not run). `cache`
    holds the files read so far, `walks` the directory listings, both shared by checks."""
    facts = {"modules": {}, "findings": {}, "errors": [], "files_searched": {}}
    substitutions = {}
    for name, spec in sorted(signature.get("modules", {}).items()):
        try:
            rel, line = resolve_registry_module(root, spec, cache)
        except ProbeFileError as exc:
            facts["errors"].append("module %s: %s" % (name, exc))
            continue
        facts["modules"][name] = {"file": rel, "registry": spec["registry"], "line": line}
        if rel:
            substitutions[name] = rel
    for name, finder in sorted(signature.get("find", {}).items()):
        if finder["kind"] == "run":  # answered by running the code (executor.py), per host
            continue
        patterns = []
        for pattern in finder["files"]:
            for key, value in substitutions.items():
                pattern = pattern.replace("{" + key + "}", value)
            if "{" in pattern:
                facts["errors"].append("finder %s: unresolved file %s" % (name, pattern))
                continue
            patterns.append(pattern)
        if finder["kind"] == "pattern":
            finder["compiled"] = [compile_pattern(p) for p in finder["patterns"]]
        finder["needles"] = finder_needles(finder)
        finder["whole_words"] = finder_whole_words(finder)
        if finder["kind"] in ("pattern", "string"):
            finder["reach"] = finder_reach(finder)
        files = expand_globs(root, patterns, walks)
        # a count and a few names: the full lists (hundreds of paths per finder) cost
        # every host and the controller more than they tell
        facts["files_searched"][name] = {"count": len(files), "first": files[:6]}
        hits, errors = run_finder(root, finder, files, cache)
        if finder["kind"] in ("key-offset", "value-source", "decision"):
            by_label = {}
            for hit in hits:
                label = offset_label(name, hit["offset"]) if "offset" in hit else \
                    "%s:%s" % (name, hit["source"])
                by_label.setdefault(label, []).append(hit)
            for label, label_hits in sorted(by_label.items()):
                facts["findings"][label] = label_hits[:MAX_EVIDENCE_PER_FINDING]
        elif hits:
            facts["findings"][name] = hits[:MAX_EVIDENCE_PER_FINDING]
        facts["errors"].extend("finder %s: %s" % (name, e) for e in errors)
    return facts
