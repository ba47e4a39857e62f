"""Patch presence: which of a pull request's hunks the installed code has.

The controller parses the diff once and sends, per file, the blob ids of the index line
and, per hunk, token signatures (significant_tokens below, which the controller imports
so both sides read code the same way): the removed and added lines of each change group
with the context around them and the names of the def/class they sit in. Here each file
is mapped into the install (through the dist's top-level packages), its git blob id
compared with the diff's pre and post ids (an exact answer for every hunk of the file),
and otherwise each group's old and new side looked for: anchored by its context, then
by half of it, then alone inside its enclosing def (in the whole package when the def
has moved). The better-anchored side decides; neither found means the code has since
been rewritten (superseded). Standard library only, Python 3.8+.
"""

import ast
import bisect
import hashlib
import os
import re
import time

from fleetcheck.probe.files import ProbeFileError, read_bytes

APPLIED, NOT_APPLIED, AMBIGUOUS, SUPERSEDED = "applied", "not applied", "ambiguous", "superseded"
TOKEN = re.compile(r"""
    (?P<string>[rRbBuUfF]{0,3}(?:'''|\"\"\"|'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?))
  | (?P<comment>\#[^\n]*)
  | (?P<word>[^\W\d]\w*)
  | (?P<number>\.?\d(?:[eE][-+]|[\w.])*)
  | (?P<space>\s+|\\)
  | (?P<op>\*\*=?|//=?|->|:=|<<=?|>>=?|\.\.\.|[-+*/%&|^@<>=!]=|\S)
""", re.VERBOSE)
KEYWORDS = frozenset("""False None True and as assert async await break class continue def
del elif else except finally for from global if import in is lambda nonlocal not or pass
raise return try while with yield self""".split())
DISTINCTIVE_TOKENS = 4
MAX_EVIDENCE_LINES = 3
MAX_PACKAGE_FILES = 20000  # a package walked for a moved def: bounded
MAX_MOVED_CANDIDATES = 30  # files holding the def's name, searched in full
MAX_EVIDENCE_PER_PATCH = 400  # evidence lines one diff's answer carries (states: all)


def significant_tokens(lines):
    """[(token, index of the line)] of source lines, with what layout does not change
    dropped: comments, blank lines, spaces and line breaks, backslash continuations,
    commas (black's magic trailing comma comes and goes with a line join, and a hunk's
    last line cannot tell which bracket follows it), and quote style ('a' and "a" are one
    token). Lines are read one by one, the same way for a hunk's fragment and for a whole
    installed file, so both sides always agree."""
    out = []
    for index, line in enumerate(lines):
        for match in TOKEN.finditer(line):
            kind = match.lastgroup
            text = match.group()
            if kind in ("comment", "space") or text == ",":
                continue
            if kind == "string":
                text = normal_string(text)
            out.append((text, index))
    return out


def normal_string(text):
    start = 0
    while text[start] not in "'\"":
        start += 1
    prefix, body = text[:start].lower(), text[start:]
    if body[:3] in ("'''", '"""'):
        return prefix + "'''" + body[3:]
    quote = body[0]
    inner = body[1:-1] if len(body) > 1 and body.endswith(quote) else body[1:]
    return prefix + "'" + inner.replace("\\'", "'").replace('\\"', '"')


def distinctive(tokens):
    """Enough to be looked for without its context: several tokens, one of them a name,
    string or number of the code's own."""
    return len(tokens) >= DISTINCTIVE_TOKENS and any(
        t not in KEYWORDS and (t[:1].isalnum() or t[:1] in "_'" or "'" in t[:4])
        for t in tokens)


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class SourceFile(object):
    """One installed .py file, tokenized once, with the line range of each def/class."""

    def __init__(self, rel, data):
        self.rel = rel
        self.data = data
        self.lines = data.decode("utf-8", "replace").split("\n")
        pairs = significant_tokens(self.lines)
        self.tokens = [t for t, _ in pairs]
        self.token_lines = [i + 1 for _, i in pairs]
        self.positions = {}
        for position, token in enumerate(self.tokens):
            self.positions.setdefault(token, []).append(position)
        self._defs = None

    def find(self, seq, lo=0, hi=None):
        """Start positions of the token sequence inside [lo, hi)."""
        if not seq:
            return []
        hi = len(self.tokens) if hi is None else hi
        pivot = min(range(len(seq)), key=lambda i: len(self.positions.get(seq[i], ())))
        found = []
        for at in self.positions.get(seq[pivot], ()):
            start = at - pivot
            if start < lo or start + len(seq) > hi:
                continue
            if self.tokens[start:start + len(seq)] == seq:
                found.append(start)
        return found

    def defs(self):
        """name -> [(first line, last line)] of every def and class, from ast; by
        indentation where this Python cannot parse the file (newer syntax)."""
        if self._defs is None:
            try:
                self._defs = ast_defs(ast.parse(self.data))
            except (SyntaxError, ValueError):
                self._defs = indented_defs(self.lines)
        return self._defs

    def token_range(self, first_line, last_line):
        return (bisect.bisect_left(self.token_lines, first_line),
                bisect.bisect_right(self.token_lines, last_line))

    def evidence(self, start, end):
        """`file:line: text` of the installed lines tokens start..end sit on."""
        if start >= len(self.token_lines):
            return []
        first = self.token_lines[start]
        last = self.token_lines[max(start, min(end, len(self.token_lines)) - 1)]
        out = []
        for line in range(first, last + 1):
            text = self.lines[line - 1].strip()
            if text:
                out.append({"file": self.rel, "line": line, "text": text[:300]})
            if len(out) >= MAX_EVIDENCE_LINES:
                break
        return out


def ast_defs(tree):
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            last = getattr(node, "end_lineno", None) or node.lineno
            found.setdefault(node.name, []).append((first, last))
    return found


DEF_LINE = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")


def indented_defs(lines):
    found = {}
    for index, line in enumerate(lines):
        match = DEF_LINE.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        last = index
        for later in range(index + 1, len(lines)):
            text = lines[later]
            if text.strip() and not text.lstrip().startswith("#") and \
                    len(text) - len(text.lstrip()) <= indent and not text.lstrip()[:1] in ")]}":
                break
            last = later
        found.setdefault(match.group(2), []).append((index + 1, last + 1))
    return found


def side_matches(source, body, before, after, regions):
    """(level, [(start, end)] of the body's tokens, whether they lie in the enclosing
    def) where one side of a change group is found: level 1 with its context on both
    sides (an empty body: the context joined), 2 with the context on one side, 3 alone
    (distinctive) inside its enclosing def, or anywhere in a file with no def to anchor
    it (a new module); None. Matches inside the enclosing def are preferred."""
    def preferred(level, spans):
        spans = sorted(set(spans))
        local = [s for s in spans if any(lo <= s[0] and s[1] <= hi for lo, hi in regions)]
        return (level, local or spans, bool(local)) if spans else None

    if body and (before or after):
        seq = before + body + after
        found = preferred(1, [(s + len(before), s + len(before) + len(body))
                              for s in source.find(seq)])
        if found:
            return found
    elif not body and before and after:
        found = preferred(1, [(s + len(before) - 1, s + len(before) + 1)
                              for s in source.find(before + after)])
        if found:
            return found
    if not body:
        return None
    spans = []
    if before:
        spans += [(s + len(before), s + len(before) + len(body))
                  for s in source.find(before + body)]
    if after:
        spans += [(s, s + len(body)) for s in source.find(body + after)]
    found = preferred(2, spans)
    if found:
        return found
    if distinctive(body):
        for lo, hi in regions or ([(0, len(source.tokens))] if not (before or after) else []):
            spans += [(s, s + len(body)) for s in source.find(body, lo, hi)]
        return preferred(3, spans)
    return None


def inside(span, others):
    return any(lo <= span[0] and span[1] <= hi and (lo, hi) != span for lo, hi in others)


def judge_group(source, group, regions):
    """(state, level, evidence) of one change group in one file: the side found nearer
    (inside the enclosing def, then better anchored) decides; found alike, ambiguous."""
    new = side_matches(source, group["added"], group["before"], group["after"], regions)
    old = side_matches(source, group["removed"], group["before"], group["after"], regions)
    # a side found only inside the other side's match (removed tokens that are part of
    # what was added) is not found
    if new and old:
        old_spans = [s for s in old[1] if not inside(s, new[1])]
        new_spans = [s for s in new[1] if not inside(s, old[1])]
        old = (old[0], old_spans, old[2]) if old_spans else None
        new = (new[0], new_spans, new[2]) if new_spans else None
    # weak: a side found only alone (level 3) when the other side is empty, so its
    # absence says nothing (a pure addition's or deletion's other side is a join)
    if new and new[0] == 3 and not group["removed"]:
        new = None
    if old and old[0] == 3 and not group["added"]:
        old = None
    rank_new = (not new[2], new[0], not group["added"]) if new else None
    rank_old = (not old[2], old[0], not group["removed"]) if old else None
    if new and (not old or rank_new < rank_old):
        return APPLIED, new[0], source.evidence(*new[1][0])
    if old and (not new or rank_old < rank_new):
        return NOT_APPLIED, old[0], source.evidence(*old[1][0])
    if new and old:
        return AMBIGUOUS, new[0], source.evidence(*new[1][0]) + source.evidence(*old[1][0])
    return SUPERSEDED, None, []


def whole_hunk(source, hunk):
    """The hunk's whole new side found and its whole old side not (or the reverse): the
    strongest anchor there is, which also tells duplicated boilerplate apart."""
    new = source.find(hunk.get("new") or [])
    old = source.find(hunk.get("old") or [])
    if new and not old:
        return APPLIED, new[0], len(hunk["new"])
    if old and not new:
        return NOT_APPLIED, old[0], len(hunk["old"])
    return None


def def_regions(source, names):
    """Token ranges of the first of `names` (innermost first) this file defines."""
    defs = source.defs()
    for name in names:
        if name in defs:
            return [source.token_range(first, last) for first, last in defs[name]]
    return []


def needle(hunk):
    """The longest name the hunk's changed lines hold: what a file must contain to hold
    the hunk's code when it has moved (searched as bytes before any file is lexed)."""
    words = [t for g in hunk["groups"] for t in g["added"] + g["removed"]
             if t[:1].isalpha() or t[:1] == "_"]
    words = [w for w in words if w not in KEYWORDS]
    best = max(words, key=len) if words else ""
    return best if len(best) >= 6 else None


def combine(states):
    kinds = set(states)
    if len(kinds) == 1:
        return states[0]
    if AMBIGUOUS in kinds or {APPLIED, NOT_APPLIED} <= kinds:
        return AMBIGUOUS
    return SUPERSEDED


def judge_hunk(source, hunk, moved):
    """A hunk's state over its change groups, with the evidence; `moved(names, word)`:
    the package's other files defining one of those names or holding that word (where
    the hunk's code may have moved)."""
    names = hunk.get("defs") or []
    results = []
    if source is not None:
        whole = whole_hunk(source, hunk)
        if whole is not None:
            state, start, length = whole
            end = start + length
            # the changed lines only (a pure addition's not applied: where it would go)
            first = min(start + (hunk.get("lead") or 0), end - 1)
            last = max(end - (hunk.get("trail") or 0), first + 1)
            return {"state": state, "how": "the whole hunk",
                    "evidence": source.evidence(first, last)}
        regions = def_regions(source, names)
        results = [judge_group(source, group, regions) for group in hunk["groups"]]
    how = "in place"
    if source is None or all(r[0] == SUPERSEDED for r in results):
        for other in moved(names, needle(hunk)):
            regions = def_regions(other, names)
            tried = [judge_group(other, group, regions) for group in hunk["groups"]]
            if any(r[0] != SUPERSEDED and r[1] in (1, 2) for r in tried):  # anchored there
                results, how = tried, "moved to %s" % other.rel
                break
    if not results:
        return {"state": SUPERSEDED, "how": "file not installed", "evidence": []}
    state = combine([r[0] for r in results])
    levels = [r[1] for r in results if r[1] is not None]
    if state != SUPERSEDED and how == "in place":
        how = ("with its context", "with half its context", "inside its def")[max(levels) - 1]
    evidence = []
    for result in results:
        for item in result[2]:
            if item not in evidence:
                evidence.append(item)
    return {"state": state, "how": how, "evidence": evidence[:2 * MAX_EVIDENCE_LINES]}


class Package(object):
    """The installed package's files, read once per run and only when a def has moved."""

    def __init__(self, code_root, top_level, reader):
        self.code_root, self.top_level, self.read = code_root, top_level, reader
        self._files = None
        self.sources = {}

    def files(self):
        if self._files is None:
            self._files = []
            for top in self.top_level:
                base = os.path.join(self.code_root, top)
                for directory, dirs, names in os.walk(base):
                    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                    for name in sorted(names):
                        if name.endswith(".py") and len(self._files) < MAX_PACKAGE_FILES:
                            path = os.path.join(directory, name)
                            self._files.append(os.path.relpath(path, self.code_root))
        return self._files

    def source(self, rel):
        if rel not in self.sources:
            data = self.read(rel)
            self.sources[rel] = SourceFile(rel, data) if data is not None else None
        return self.sources[rel]

    def defining(self, names, word, skip):
        """Other files of the package that define one of `names` or hold `word`."""
        needles = [b"def " + n.encode() + b"(" for n in names] + \
            [b"class " + n.encode() for n in names] + ([word.encode()] if word else [])
        if not needles:
            return []
        found = []
        for rel in self.files():
            if rel == skip:
                continue
            data = self.read(rel)
            if data is not None and any(n in data for n in needles):
                source = self.source(rel)
                if source is not None:
                    found.append(source)
                    if len(found) >= MAX_MOVED_CANDIDATES:
                        break
        return found


def top_level_packages(dist_info, record_paths):
    """The import names the dist installs: top_level.txt, else RECORD's first parts."""
    try:
        text = read_bytes(os.path.join(dist_info, "top_level.txt")).decode("utf-8", "replace")
        names = [n.strip() for n in text.splitlines() if n.strip()]
        if names:
            return names
    except ProbeFileError:
        pass
    return sorted({p.split("/")[0] for p in record_paths if "/" in p and
                   not p.split("/")[0].endswith((".dist-info", ".data")) and p[:2] != ".."})


# the directories a repository keeps its importable packages under (`src/pkg/...`), and
# an installed tree's own (a diff between two site-packages)
SOURCE_ROOTS = ("src", "python", "lib", "site-packages", "dist-packages")


def installed_path(repo_path, top_level):
    """The repository path relative to site-packages (`src/pkg/a.py` -> `pkg/a.py`), or
    None when no part of it is a package the dist installs (tests/, docs/, csrc/)."""
    parts = repo_path.split("/")
    for index, part in enumerate(parts[:-1]):
        if part in top_level and (index == 0 or parts[index - 1] in SOURCE_ROOTS):
            return "/".join(parts[index:])
    return None


def check_patches(code_root, dist_info, patches, deadline=None):
    """{check id: {files: [...], hunks: [...]}} for every patch of the plan; a diff not
    finished by `deadline` (time.monotonic()) says so as its error."""
    from fleetcheck.probe.integrity import record_rows
    try:
        record = set(row[0] for row in record_rows(dist_info)) if dist_info else set()
    except ProbeFileError:
        record = set()
    top_level = top_level_packages(dist_info, record) if dist_info else \
        sorted(n for n in os.listdir(code_root) if os.path.isfile(
            os.path.join(code_root, n, "__init__.py")))
    cache = {}

    def read(rel):
        if rel not in cache:
            try:
                cache[rel] = read_bytes(os.path.join(code_root, rel))
            except ProbeFileError:
                cache[rel] = None
        return cache[rel]

    package = Package(code_root, top_level, read)
    out = {}
    for patch in patches:
        try:
            out[patch["id"]] = check_patch(patch, record, top_level, read, package, deadline)
        except OutOfTime as exc:
            out[patch["id"]] = {"files": [], "hunks": [], "error": str(exc)}
        except Exception as exc:  # a bug here costs this patch's verdict, not the host's facts
            out[patch["id"]] = {"files": [], "hunks": [],
                                "error": "%s: %s" % (type(exc).__name__, exc)}
    return out


class OutOfTime(Exception):
    pass


def check_patch(patch, record, top_level, read, package, deadline=None):
    files, hunks = [], []
    total = sum(len(entry["hunks"]) for entry in patch["files"])
    evidence_left = MAX_EVIDENCE_PER_PATCH
    for entry in patch["files"]:
        rel = installed_path(entry["path"], top_level)
        data = read(rel) if rel else None
        shipped = rel is not None and (data is not None or rel in record or
                                       rel.endswith(".py"))
        info = {"path": entry["path"], "installed": rel if shipped else None,
                "shipped": shipped, "present": data is not None, "blob": None,
                "blob_match": None}
        files.append(info)
        if not shipped:
            continue
        states = None
        if data is not None:
            info["blob"] = git_blob_id(data)
            for side, state in (("post", APPLIED), ("pre", NOT_APPLIED)):
                abbreviated = entry.get(side)
                if abbreviated and abbreviated.strip("0") and \
                        info["blob"].startswith(abbreviated):
                    info["blob_match"] = side
                    states = state
                    break
        elif entry.get("deleted"):
            states = APPLIED
        elif entry.get("new_file"):
            states = NOT_APPLIED
        source = package.source(rel) if data is not None else None
        for hunk in entry["hunks"]:
            if deadline is not None and time.monotonic() > deadline:
                raise OutOfTime("the probe's time budget ran out after %d of this diff's %d "
                                "hunks (a smaller diff, or a longer --timeout)"
                                % (len(hunks), total))
            if states is not None:
                judged = {"state": states, "how": "blob %s == %s id" % (
                    (info["blob"] or "")[:12], info["blob_match"]) if info["blob_match"] else
                    ("file deleted" if states == APPLIED else "file not installed"),
                    "evidence": [{"file": rel, "line": None, "text": "git blob %s"
                                  % info["blob"]}] if info["blob"] else []}
            else:
                judged = judge_hunk(source, hunk,
                                    lambda names, word: package.defining(names, word, rel))
            judged.update({"file": entry["path"], "hunk": hunk["n"], "header": hunk["header"]})
            judged["evidence"] = judged["evidence"][:max(0, evidence_left)]
            evidence_left -= len(judged["evidence"])
            hunks.append(judged)
    return {"files": files, "hunks": hunks}
