"""The probe's answer decoded into the typed facts (facts.py), once, where it arrives
(wire_protocol.py; judge.py through it): every field the checks read has the type they
expect, no number is NaN or infinite, no text is absurdly long and nothing nests deeper
than a probe ever writes. A host whose answer does not fit is a `protocol` error naming
the field, so past this seam a check that trips is a fleetcheck bug, never a host's doing.
The decoder of each class is built from its annotations on first use.

Unknown keys: the probe and the controller ship together, so a key the description does
not know means they drifted. At run time it is ignored (only the generic limits apply): a
host is never failed for it. `decode_facts(..., unknown=[])` lists them, and the tests
decode every real probe output they have and assert the list is empty, so a renamed field
fails one test here instead of turning a check into `error`.
"""

from __future__ import annotations

import math
import re
import sys
import types
from dataclasses import MISSING, fields
from typing import Any, Callable, NamedTuple, TypeVar, Union, get_args, get_origin, get_type_hints

from fleetcheck.facts import MAX_TEXT, Facts
from fleetcheck.text import is_int, is_number

MAX_DEPTH = 32  # the probe's facts nest 8 deep


class FactsError(ValueError):
    """The answer does not fit the facts' shape; `path` names the field."""

    def __init__(self, path: str, problem: str):
        super().__init__("field %s: %s" % (short_path(path) or "(top level)", problem))
        self.path = path


def short_path(path: str) -> str:
    """A field's path for a message: a long run of list indices (deep nesting) shown once."""
    return re.sub(r"(?:\[\d+\]){6,}", "[...]", path)


NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true or false",
         int: "an integer", float: "a number", type(None): "null"}

# (value, path, depth, unknown keys or None) -> the decoded value
Decoder = Callable[[Any, str, int, Union[list, None]], Any]


def kind_of(value: Any) -> str:
    return NAMES.get(type(value), type(value).__name__)


def join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    text = str(key)
    if len(text) > 80:
        text = text[:80] + "..."
    return "%s.%s" % (path, text) if path else text


def misfit(value: Any, path: str, expected: str) -> FactsError:
    """Why a value is not what was expected (a non-finite number first: its type is
    beside the point)."""
    if isinstance(value, float) and not math.isfinite(value):
        return FactsError(path, "%r is not a number a probe sends" % value)
    return FactsError(path, "expected %s or null, got %s" % (expected, kind_of(value)))


def generic(value: Any, path: str, depth: int, unknown: list | None = None) -> Any:
    """A value only the generic limits apply to: nesting, finite numbers, text length."""
    if depth > MAX_DEPTH:
        raise FactsError(path, "nested deeper than %d levels" % MAX_DEPTH)
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if len(key) > MAX_TEXT:
                raise FactsError(path, "a key of %d characters" % len(key))
            generic(item, join(path, key), depth + 1)
    elif kind is list:
        for index, item in enumerate(value):
            generic(item, "%s[%d]" % (path, index), depth + 1)
    elif kind is str:
        if len(value) > MAX_TEXT:
            raise FactsError(path, "a text of %d characters (at most %d)"
                             % (len(value), MAX_TEXT))
    elif kind is float and not math.isfinite(value):
        raise FactsError(path, "%r is not a number a probe sends" % value)
    return value


def text_decoder(limit: int) -> Decoder:
    def decode(value: Any, path: str, depth: int, unknown: list | None) -> Any:
        if type(value) is str:
            if len(value) > limit:
                raise FactsError(path, "a text of %d characters (at most %d)"
                                 % (len(value), limit))
            return value
        if value is None:
            return None
        raise misfit(value, path, "a string")
    return decode


def decode_int(value: Any, path: str, depth: int, unknown: list | None) -> Any:
    if value is None or is_int(value):
        return value
    raise misfit(value, path, "an integer")


def decode_number(value: Any, path: str, depth: int, unknown: list | None) -> Any:
    if value is None or (is_number(value) and
                         (type(value) is not float or math.isfinite(value))):
        return value
    raise misfit(value, path, "a number")


def decode_bool(value: Any, path: str, depth: int, unknown: list | None) -> Any:
    if value is None or type(value) is bool:
        return value
    raise misfit(value, path, "true or false")


def null_entry(path: str, expects: str) -> FactsError:
    """A list or map entry the probe never leaves null: reading it as empty would turn a
    broken answer into a verdict (an empty signature fails its check)."""
    return FactsError(path, "null where %s belongs" % expects)


def list_decoder(item: Decoder, empty: Callable[[], Any], item_expects: str | None) -> Decoder:
    """item_expects: what an entry must be, or None when a null entry is a value (Any)."""
    def decode(value: Any, path: str, depth: int, unknown: list | None) -> Any:
        if type(value) is list:
            out = []
            for index, entry in enumerate(value):
                where = "%s[%d]" % (path, index)
                if entry is None and item_expects:
                    raise null_entry(where, item_expects)
                out.append(item(entry, where, depth + 1, unknown))
            return out
        if value is None:
            return empty()
        raise misfit(value, path, "a list")
    return decode


def map_decoder(item: Decoder, empty: Callable[[], Any], item_expects: str | None) -> Decoder:
    def decode(value: Any, path: str, depth: int, unknown: list | None) -> Any:
        if type(value) is dict:
            out = {}
            for key, entry in value.items():
                if len(key) > MAX_TEXT:
                    raise FactsError(path, "a key of %d characters" % len(key))
                if entry is None and item_expects:
                    raise null_entry(join(path, key), item_expects)
                out[key] = item(entry, join(path, key), depth + 1, unknown)
            return out
        if value is None:
            return empty()
        raise misfit(value, path, "an object")
    return decode


class Rule(NamedTuple):
    """How one annotation is decoded: the decoder, what a missing field reads as, and
    the words for what belongs there (in messages)."""
    decode: Decoder
    empty: Callable[[], Any]
    expects: str


NO_RULES = {"required": False, "always": False, "present": False, "limit": MAX_TEXT,
            "key": None}


class ClassDecoder:
    """Decodes one facts class (a generic one with its type arguments); built once per
    class, on first use."""

    def __init__(self, cls: type, arguments: tuple[Any, ...] = ()):
        self.cls = cls
        self.open = getattr(cls, "OPEN", False)
        hints = get_type_hints(cls, vars(sys.modules[cls.__module__]))
        if arguments:
            bound = dict(zip(cls.__parameters__, arguments))  # type: ignore[attr-defined]
            hints = {name: bound[hint] if isinstance(hint, TypeVar) else
                     hint[tuple(bound[p] for p in hint.__parameters__)]
                     if getattr(hint, "__parameters__", ()) else hint
                     for name, hint in hints.items()}
        self.keys: list[str] = []
        self.decoders: list[Decoder] = []
        self.empties: list[Callable[[], Any]] = []
        self.checks: list[tuple[str, bool, bool, bool, str]] = []  # required / present
        for item in fields(cls):
            meta = item.metadata or NO_RULES
            key = meta["key"] or item.name
            rule = rule_for(hints[item.name], meta["limit"])
            self.keys.append(key)
            self.decoders.append(rule.decode)
            self.empties.append(rule.empty)
            if meta["required"] or meta["present"]:
                self.checks.append((key, meta["required"], meta["always"], meta["present"],
                                    rule.expects))
        self.index = {key: slot for slot, key in enumerate(self.keys)}

    def empty(self) -> Any:
        return self.cls(*[make() for make in self.empties])

    def decode(self, value: Any, path: str, depth: int, unknown: list | None) -> Any:
        if type(value) is not dict:
            raise misfit(value, path, "an object")
        if self.checks:
            reports_error = value.get("error") is not None
            for key, required, always, present, expected in self.checks:
                if value.get(key) is None:
                    if required and (always or not reports_error):
                        raise FactsError(join(path, key), "missing")
                    if present and key in value:
                        raise FactsError(join(path, key), "null where %s belongs" % expected)
        out: list[Any] = [MISSING] * len(self.keys)
        index = self.index
        for key, item in value.items():
            if len(key) > MAX_TEXT:
                raise FactsError(path, "a key of %d characters" % len(key))
            slot = index.get(key)
            if slot is None:
                where = join(path, key)
                generic(item, where, depth + 1)
                if unknown is not None and not self.open:
                    unknown.append(where)
            else:
                out[slot] = self.decoders[slot](item, "%s.%s" % (path, key) if path else key,
                                                depth + 1, unknown)
        for slot, decoded in enumerate(out):
            if decoded is MISSING:
                out[slot] = self.empties[slot]()
        return self.cls(*out)


CLASS_DECODERS: dict[tuple[type, tuple[Any, ...]], ClassDecoder] = {}


def class_decoder(cls: type, arguments: tuple[Any, ...] = ()) -> ClassDecoder:
    found = CLASS_DECODERS.get((cls, arguments))
    if found is None:
        found = CLASS_DECODERS[cls, arguments] = ClassDecoder(cls, arguments)
    return found


def none() -> None:
    return None


SCALARS = {int: (decode_int, "an integer"), float: (decode_number, "a number"),
           bool: (decode_bool, "true or false")}


def rule_for(annotation: Any, limit: int = MAX_TEXT) -> Rule:
    """The rule of one annotation of the description."""
    optional = False
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError("facts fields are one type or None, not %r" % annotation)
        annotation, optional = args[0], True
    origin = get_origin(annotation)
    if annotation is Any:
        return Rule(generic, none, "a value")
    if annotation is str:
        return Rule(text_decoder(limit), none, "a string")
    if annotation in SCALARS:
        return Rule(SCALARS[annotation][0], none, SCALARS[annotation][1])
    if origin in (list, dict):
        empty = none if optional else origin
        inner = get_args(annotation)[-1]  # list[X], dict[str, X]: the entries are X
        item = rule_for(inner)
        container = list_decoder if origin is list else map_decoder
        return Rule(container(item.decode, empty, None if inner is Any else item.expects),
                    empty, "a list" if origin is list else "an object")
    cls, arguments = (origin, get_args(annotation)) if origin else (annotation, ())
    if isinstance(cls, type) and hasattr(cls, "__dataclass_fields__"):

        def decode_object(value: Any, path: str, depth: int, unknown: list | None) -> Any:
            if value is None:
                return empty()
            return class_decoder(cls, arguments).decode(value, path, depth, unknown)

        def empty() -> Any:
            return None if optional else class_decoder(cls, arguments).empty()

        return Rule(decode_object, empty, "an object")
    raise TypeError("no rule for the facts annotation %r" % annotation)


def decode(annotation: Any, value: Any, path: str = "", unknown: list | None = None) -> Any:
    """A part of the facts (e.g. `Signatures`, as the shared analysis holds it), decoded
    as the field of that type would be."""
    return rule_for(annotation).decode(value, path, 0, unknown)


def decode_facts(raw: Any, unknown: list[str] | None = None) -> Facts:
    """The probe's whole answer (parsed JSON) as Facts; `unknown`, when given, receives the
    path of every key the description does not know. (Which families a host's plan needs
    is the check plan's to say: wire_protocol.decode_answer requires them.)"""
    if not isinstance(raw, dict):
        raise FactsError("", "expected an object, got %s" % kind_of(raw))
    return class_decoder(Facts).decode(raw, "", 0, unknown)


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
