"""The shape of the probe's facts, checked once where the answer is decoded (wire_protocol.py):
every field the checks read has the type they expect, no number is NaN or infinite, no
text is absurdly long and nothing nests deeper than a probe ever writes. A host whose
answer does not fit is a `protocol` error naming the field, so past this seam a check
that trips is a fleetcheck bug, never a host's doing.

Notation: a dict is an object whose listed keys have these types (other keys are allowed
and only get the generic limits); Map(x) an object of any keys to x; List(x) a list of x;
Req(x) a key that must be present and not null, unless its object reports an `error`
(the probe's convention: an object with an error holds only what was learned before it;
Req(x, always=True): even then); Present(x) a key that may be missing but not null.
Any other key may be missing or null.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from fleetcheck.text import is_int, is_number

MAX_DEPTH = 32  # the probe's facts nest 8 deep
MAX_TEXT = 64 * 1024  # evidence lines, paths, messages
BIG_TEXT = 8 * 1024 * 1024  # the few fields that carry a payload (bounded by the answer cap)


class FactsError(ValueError):
    """The answer does not fit the facts' shape; `path` names the field."""

    def __init__(self, path: str, problem: str):
        super().__init__("field %s: %s" % (short_path(path) or "(top level)", problem))
        self.path = path


def short_path(path: str) -> str:
    """A field's path for a message: a long run of list indices (deep nesting) shown once."""
    return re.sub(r"(?:\[\d+\]){6,}", "[...]", path)


@dataclass(frozen=True)
class Req:
    type: Any
    always: bool = False


@dataclass(frozen=True)
class Present:
    type: Any


@dataclass(frozen=True)
class List:
    item: Any


@dataclass(frozen=True)
class Map:
    value: Any


@dataclass(frozen=True)
class Text:
    limit: int = MAX_TEXT


STR = Text()
BIG = Text(BIG_TEXT)
INT = "int"
NUM = "number"
BOOL = "bool"
ANY = "any"

FILES = lambda **more: {"count": Req(INT), "files": Req(List(dict({"file": Req(STR)}, **more)))}

FACTS = {
    "probe_version": Req(INT),
    "errors": List(STR),
    "python": {"executable": STR, "version": STR},
    "venv": STR,
    "install": {
        "site_packages": STR, "code_root": STR, "package_dir": STR, "editable_source": STR,
        "stash_dirs": List(STR), "site_packages_candidates": List(STR), "errors": List(STR),
        "dist_infos": List({
            "path": Req(STR), "version": STR, "installer": STR, "name": STR,
            "errors": List(STR),
            "direct_url": {"dir_info": Present({"editable": ANY}), "vcs_info": {"commit_id": ANY}}}),
    },
    # values as _version.py assigns them (any literal): the checks judge odd ones
    "version_file": {"path": STR, "exists": BOOL, "error": STR},
    "signatures": Map({
        # offset: the constant a key-offset path adds, or "?" (the probe files hits under
        # their label; the checks read labels, never the offset itself)
        "findings": Map(List({"file": STR, "line": INT, "text": STR, "function": STR,
                              "offset": ANY, "step": STR, "why": STR, "source": STR,
                              "trail": List({"file": STR, "line": INT, "step": STR,
                                             "text": STR})})),
        "files_searched": Map({"count": Req(INT), "first": Req(List(STR))}),
        "errors": List(STR),
    }),
    "shared_analysis": {"build": STR, "files": INT, "listings": INT},
    "shared_read": BIG,
    "integrity": {
        "record": {
            "dist_info": Req(STR, always=True), "error": STR, "rows": Req(INT), "checked": Req(INT),
            "hashed": Req(INT), "hashed_bytes": Req(INT), "deep": BOOL, "elapsed_s": NUM,
            "unverifiable_rows": INT, "missing": Req(FILES()),
            "size": Req(FILES(expected=Req(INT), actual=Req(INT))), "hash": Req(FILES()),
            "unreadable": Req(FILES(error=STR)),
        },
        "editable": {"source": Req(STR), "exists": Req(BOOL), "version_file": ANY,
                     "compiled": Req(List(STR))},
        "in_progress": {"error": STR, "processes": List({"pid": Req(INT), "cmdline": Req(STR),
                                                         "cwd": STR})},
        "import": {
            "interpreter": Req(STR, always=True), "error": STR, "expected": Req(List(STR)),
            "modules": Req(List({"module": Req(STR), "ok": Req(BOOL), "error": STR})),
            "torch": {"ok": BOOL, "detail": STR}, "torch_installed": BOOL,
            "crashed_in": STR, "timed_out": BOOL, "timeout_s": NUM, "returncode": INT,
            "stderr_tail": STR, "elapsed_s": NUM,
        },
    },
    "smoke": {
        "mode": STR, "url": STR, "model": STR, "log_file": STR, "log_tail": STR,
        "error": {"kind": Req(STR), "detail": Req(STR)},
        "metrics_before": Req(BIG), "metrics_after": Req(BIG), "startup_s": NUM,
        "server_exit": INT,
        "load": Req({"results": Req(List({"ok": BOOL, "latency_s": Req(NUM), "status": INT,
                                          "completion_tokens": INT, "error": STR,
                                          "prompt": STR})),
                     "wall_s": NUM, "planned": INT, "budget_exhausted": BOOL}),
    },
}

NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true or false",
         int: "an integer", float: "a number", type(None): "null"}


def kind_of(value: Any) -> str:
    return NAMES.get(type(value), type(value).__name__)


def join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    text = str(key)
    if len(text) > 80:
        text = text[:80] + "..."
    return "%s.%s" % (path, text) if path else text


def fits(value: Any, expected: Any) -> str | None:
    """Why value is not of the expected scalar type, or None."""
    if expected == ANY or isinstance(expected, (dict, List, Map)):
        return None
    if isinstance(expected, Text):
        if not isinstance(value, str):
            return "expected a string or null, got %s" % kind_of(value)
        if len(value) > expected.limit:
            return "a text of %d characters (at most %d)" % (len(value), expected.limit)
        return None
    ok = {INT: is_int(value), NUM: is_number(value),
          BOOL: isinstance(value, bool)}[expected]
    return None if ok else "expected %s or null, got %s" % (
        {INT: "an integer", NUM: "a number", BOOL: "true or false"}[expected], kind_of(value))


def validate_facts(facts: Any, required: tuple[str, ...] = ()) -> None:
    """The probe's whole answer; `required`: top-level keys this host's plan asked for."""
    if not isinstance(facts, dict):
        raise FactsError("", "expected an object, got %s" % kind_of(facts))
    for key in required:
        if facts.get(key) is None:
            raise FactsError(key, "missing (the plan asked for it)")
    validate(facts)


def validate(value: Any, expected: Any = FACTS, path: str = "", depth: int = 0) -> None:
    """Raise FactsError at the first field that does not fit."""
    if depth > MAX_DEPTH:
        raise FactsError(path, "nested deeper than %d levels" % MAX_DEPTH)
    if isinstance(expected, (Req, Present)):
        expected = expected.type
    if isinstance(value, float) and not math.isfinite(value):
        raise FactsError(path, "%r is not a number a probe sends" % value)
    if value is not None:
        problem = fits(value, expected)
        if problem:
            raise FactsError(path, problem)
    if isinstance(value, dict):
        if isinstance(expected, List):  # scalar expectations were refused by fits()
            raise FactsError(path, "expected a list or null, got an object")
        shape = expected if isinstance(expected, dict) else {}
        for key, rule in shape.items():
            if isinstance(rule, Req) and value.get(key) is None and \
                    (rule.always or value.get("error") is None):
                raise FactsError(join(path, key), "missing")
            if isinstance(rule, Present) and key in value and value[key] is None:
                raise FactsError(join(path, key), "null where %s belongs"
                                 % kind_of_expected(rule.type))
        for key, item in value.items():
            if len(key) > MAX_TEXT:
                raise FactsError(path, "a key of %d characters" % len(key))
            rule = expected.value if isinstance(expected, Map) else shape.get(key, ANY)
            validate(item, rule, join(path, key), depth + 1)
    elif isinstance(value, list):
        if isinstance(expected, (dict, Map)):
            raise FactsError(path, "expected an object or null, got a list")
        rule = expected.item if isinstance(expected, List) else ANY
        for index, item in enumerate(value):
            validate(item, rule, join(path, index), depth + 1)
    elif value is not None and isinstance(expected, (dict, Map, List)):
        raise FactsError(path, "expected %s or null, got %s"
                         % (kind_of_expected(expected), kind_of(value)))
    elif isinstance(value, str) and expected == ANY and len(value) > MAX_TEXT:
        raise FactsError(path, "a text of %d characters (at most %d)" % (len(value), MAX_TEXT))


def kind_of_expected(expected: Any) -> str:
    if isinstance(expected, (dict, Map)):
        return "an object"
    if isinstance(expected, List):
        return "a list"
    if isinstance(expected, Text):
        return "a string"
    return {INT: "an integer", NUM: "a number", BOOL: "true or false"}.get(expected, "a value")


TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}:,]|[^\s\[\]{}:,"]+')
MAX_SCANNED_TOKENS = 200_000


def open_field(text: str, max_depth: int | None = None) -> str | None:
    """The field a JSON text is inside where it stops (an answer cut at the output cap),
    or where it first nests deeper than max_depth: for messages only, None when it cannot
    tell. Cheap: regex tokens, at most MAX_SCANNED_TOKENS of them."""
    stack: list[Any] = []  # per open container: a key (object) or an index (list)
    expect_key = False
    for count, match in enumerate(TOKEN.finditer(text)):
        if count > MAX_SCANNED_TOKENS:
            return None
        token = match.group()
        if token in ("{", "["):
            stack.append(None if token == "{" else 0)
            expect_key = token == "{"
            if max_depth is not None and len(stack) > max_depth:
                break
        elif token in ("}", "]"):
            if not stack:
                return None
            stack.pop()
            expect_key = False
        elif token == ",":
            if stack and isinstance(stack[-1], int):
                stack[-1] += 1
            else:
                expect_key = True
        elif token == ":":
            expect_key = False
        elif expect_key and stack and token.startswith('"'):
            stack[-1] = token[1:-1] if token.endswith('"') and len(token) > 1 else token[1:]
    else:  # the text ended: with max_depth, it never nested that deep
        if max_depth is not None:
            return None
    path = ""
    for part in stack:
        if part is not None:
            path = join(path, part)
    return short_path(path) or None
