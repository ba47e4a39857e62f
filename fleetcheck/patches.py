"""Pull-request diffs as checks: a unified diff (git's, with `index <pre>..<post>`), a
`git format-patch` series or a plain `diff -u`, parsed once on the controller with
unidiff into what the probe looks for (probe/patch_presence.py): per file its repository
path and blob ids, per hunk the token signatures of each change group with its context
and the def/class it sits in. A series is composed per file in commit order, so a later
commit that reverts part of an earlier one leaves only the net change to look for."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from fleetcheck.input_error import InputError
from fleetcheck.probe.patch_presence import significant_tokens

CONTEXT_LINES = 3  # of a change group's context sent as its anchor, each side
INDEX_LINE = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)", re.MULTILINE)
SUBJECT_LINE = re.compile(r"^Subject: (?:\[[^\]]*\] )?(.+)$", re.MULTILINE)
DEF_NAME = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
CHECK_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
NO_BLOB = "0000000"


@dataclass(frozen=True)
class Hunk:
    old_start: int
    new_start: int
    lines: tuple[tuple[str, str], ...]  # (" " | "-" | "+", the line without its newline)
    section: str = ""

    @property
    def old_side(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "+"]

    @property
    def new_side(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "-"]

    @property
    def header(self) -> str:
        head = "@@ -%d,%d +%d,%d @@" % (self.old_start, len(self.old_side), self.new_start,
                                         len(self.new_side))
        return head + (" " + self.section if self.section else "")

    def changes(self) -> bool:
        return any(kind != " " for kind, _ in self.lines)


@dataclass
class PatchedFile:
    path: str  # the repository path (the post side's, or the pre side's for a deletion)
    pre: str | None  # abbreviated git blob ids from the index line; None in a plain diff
    post: str | None
    hunks: list[Hunk] = field(default_factory=list)
    created: bool = False  # `--- /dev/null`: the diff adds the file
    removed: bool = False  # `+++ /dev/null`: the diff deletes it

    @property
    def new_file(self) -> bool:
        return self.created or (self.pre is not None and not self.pre.strip("0"))

    @property
    def deleted(self) -> bool:
        return self.removed or (self.post is not None and not self.post.strip("0"))


@dataclass(frozen=True)
class PatchCheck:
    """One pull request's diff: one check."""
    id: str
    title: str
    source: str
    files: tuple[PatchedFile, ...]
    reference: str | None = None
    commits: int = 1

    def signature(self) -> dict[str, Any]:
        """What the probe needs, as plain JSON data."""
        return {"id": self.id, "files": [file_signature(f) for f in self.files]}

    def cosmetic_hunks(self) -> list[str]:
        """`path#n` of the hunks that change only comments or layout (not looked for)."""
        return ["%s#%d" % (f.path, index + 1) for f in self.files
                for index, hunk in enumerate(f.hunks) if cosmetic(hunk)]


def cosmetic(hunk: Hunk) -> bool:
    """Only comments, blank lines or layout change: nothing the code could show."""
    return tokens(hunk.old_side) == tokens(hunk.new_side)


def file_signature(patched: PatchedFile) -> dict[str, Any]:
    return {"path": patched.path, "pre": patched.pre, "post": patched.post,
            "new_file": patched.new_file, "deleted": patched.deleted,
            "hunks": [hunk_signature(index + 1, hunk)
                      for index, hunk in enumerate(patched.hunks) if not cosmetic(hunk)]}


def tokens(lines: list[str]) -> list[str]:
    return [token for token, _ in significant_tokens(lines)]


def context(lines: Any) -> list[str]:
    """The context lines next to a change group, up to the next change, until
    CONTEXT_LINES of them hold code (blank lines anchor nothing)."""
    out: list[str] = []
    for kind, text in lines:
        if kind != " " or sum(1 for t in out if t.strip()) == CONTEXT_LINES:
            break
        out.append(text)
    return out


def hunk_signature(number: int, hunk: Hunk) -> dict[str, Any]:
    """Each change group (a run of removed and added lines) with the context around it,
    as tokens, and the names of the defs it may sit in, innermost first."""
    groups = []
    lines = list(hunk.lines)
    index = 0
    names: list[str] = []
    while index < len(lines):
        if lines[index][0] == " ":
            index += 1
            continue
        end = index
        while end < len(lines) and lines[end][0] != " ":
            end += 1
        before = context(reversed(lines[:index]))[::-1]
        after_lines = context(lines[end:])
        groups.append({"before": tokens(before),
                       "removed": tokens([t for k, t in lines[index:end] if k == "-"]),
                       "added": tokens([t for k, t in lines[index:end] if k == "+"]),
                       "after": tokens(after_lines)})
        for kind, text in lines[:index]:
            match = DEF_NAME.match(text)
            if match and match.group(1) not in names:
                names.insert(0, match.group(1))
        index = end
    first = next((i for i, (kind, _) in enumerate(lines) if kind != " "), len(lines))
    last = max((i for i, (kind, _) in enumerate(lines) if kind != " "), default=-1)
    lead = len(tokens([text for _, text in lines[:first]]))  # tokens before the change
    trail = len(tokens([text for _, text in lines[last + 1:]]))  # and after it
    section = DEF_NAME.match(hunk.section)
    if section and section.group(1) not in names:
        names.append(section.group(1))
    return {"n": number, "header": hunk.header, "defs": names, "groups": groups,
            "old": tokens(hunk.old_side), "new": tokens(hunk.new_side), "lead": lead,
            "trail": trail}


def read_patch(path: str, check_id: str | None = None, title: str | None = None,
               reference: str | None = None, where: str | None = None) -> PatchCheck:
    """The diff at `path` as one check; an InputError naming the file when it is not one."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            text = handle.read()
    except OSError as exc:
        raise InputError(path, where, None, "cannot read the diff: %s" % (exc.strerror or exc))
    chosen = check_id if check_id is not None else default_id(path)
    if not CHECK_ID.match(chosen):
        raise InputError(path, where, "id", "%r: a check id is lowercase letters, digits "
                         "and '-'" % chosen)
    files, commits = parse_diff(text, path, where)
    subject = SUBJECT_LINE.search(text)
    return PatchCheck(id=chosen, title=title or (subject.group(1).strip() if subject else
                                                 "pull request %s" % os.path.basename(path)),
                      source=path, files=tuple(files), reference=reference, commits=commits)


def default_id(path: str) -> str:
    """The file's stem as a check id: `PR-40727.diff` -> `pr-40727`."""
    stem = os.path.basename(path).split(".")[0] or "patch"
    return re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-") or "patch"


def parse_diff(text: str, source: str, where: str | None = None) -> tuple[list[PatchedFile], int]:
    """The files of a diff or a series, each file's commits composed in order; the
    number of commits (file sections that repeat a path start a new one)."""
    try:
        patch_set = PatchSet(text)
    except UnidiffParseError as exc:
        raise InputError(source, where, None, "not a unified diff: %s" % exc)
    if not len(patch_set):
        raise InputError(source, where, None, "not a unified diff: no `---`/`+++` file "
                         "section with a hunk in it (give the output of `git diff`, "
                         "`git format-patch` or `diff -u`)")
    composed: dict[str, PatchedFile] = {}
    commits = max(1, text.count("\nFrom ") + text.startswith("From "))
    for section in patch_set:
        path = repository_path(section.target_file if not section.is_removed_file
                               else section.source_file)
        ids = INDEX_LINE.search(str(section.patch_info or ""))
        pre, post = (ids.group(1), ids.group(2)) if ids else (None, None)
        hunks = [Hunk(h.source_start, h.target_start,
                      tuple((line.line_type, line.value.rstrip("\n").rstrip("\r"))
                            for line in h if line.line_type in (" ", "-", "+")),
                      (h.section_header or "").strip()) for h in section]
        if path in composed:
            compose(composed[path], post, hunks)
            composed[path].removed = bool(section.is_removed_file)
        else:
            composed[path] = PatchedFile(path, pre, post, [h for h in hunks if h.changes()],
                                         bool(section.is_added_file),
                                         bool(section.is_removed_file))
    files = [f for f in composed.values() if f.hunks or f.pre != f.post]
    return files, commits


def repository_path(name: str) -> str:
    """`b/vllm/x.py` (git) or `vllm/x.py` (diff -u between two trees) -> `vllm/x.py`."""
    name = name.split("\t")[0]
    if name.startswith(("a/", "b/")):
        name = name[2:]
    return name.lstrip("./") if name.startswith("./") else name


def compose(earlier: PatchedFile, post: str | None, later: list[Hunk]) -> None:
    """A later commit's hunks applied over an earlier one's, in place: a later hunk whose
    old lines overlap an earlier hunk's new lines is merged into it (and the net change
    recomputed, so a revert cancels); the others are kept as hunks of their own."""
    earlier.post = post if post is not None else earlier.post
    hunks = list(earlier.hunks)
    kept: list[Hunk] = []
    for hunk in later:
        for index, base in enumerate(hunks):
            merged = merge(base, hunk)
            if merged is not None:
                hunks[index] = merged
                break
        else:
            kept.append(hunk)
    earlier.hunks = sorted([h for h in hunks if h.changes()] +
                           [h for h in kept if h.changes()], key=lambda h: h.old_start)


def merge(base: Hunk, later: Hunk) -> Hunk | None:
    """`later` (numbered in `base`'s post-image) applied to `base`'s new side where their
    lines overlap and agree; None when they do not overlap."""
    old, new = base.old_side, base.new_side
    first, later_old = later.old_start, later.old_side
    if first > base.new_start + len(new) - 1 or first + len(later_old) - 1 < base.new_start:
        return None
    offset = first - base.new_start
    lead = max(0, -offset)
    tail = max(0, offset + len(later_old) - len(new))
    for k, text in enumerate(later_old):
        at = offset + k
        if 0 <= at < len(new) and new[at] != text:
            return None
    prefix, suffix = later_old[:lead], later_old[len(later_old) - tail:] if tail else []
    old, new = prefix + old + suffix, prefix + new + suffix
    start = offset + lead
    new = new[:start] + later.new_side + new[start + len(later_old):]
    lines: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False) \
            .get_opcodes():
        if tag == "equal":
            lines += [(" ", t) for t in old[i1:i2]]
        else:
            lines += [("-", t) for t in old[i1:i2]] + [("+", t) for t in new[j1:j2]]
    return Hunk(base.old_start - lead, base.new_start - lead, tuple(lines), base.section)


def patch_from_entry(entry: Any, playbook: str, where: str) -> PatchCheck:
    """One item of a playbook's `patches:` list: a path, or {file, id, title, reference};
    paths are relative to the playbook."""
    base = os.path.dirname(os.path.abspath(playbook))
    if isinstance(entry, str):
        return read_patch(os.path.join(base, entry), where="%s (in %s)" % (where, playbook))
    if not isinstance(entry, dict):
        raise InputError(playbook, where, None, "must be a path or {file, id, title, reference}")
    for key in entry:
        if key not in ("file", "id", "title", "reference"):
            raise InputError(playbook, where, str(key), "unknown key")
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise InputError(playbook, where, str(key), "must be a non-empty string")
    if "file" not in entry:
        raise InputError(playbook, where, "file", "missing: the diff's path")
    return read_patch(os.path.join(base, entry["file"]), entry.get("id"), entry.get("title"),
                      entry.get("reference"), where="%s (in %s)" % (where, playbook))
