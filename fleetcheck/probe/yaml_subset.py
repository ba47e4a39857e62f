"""The YAML that vLLM's `--config FILE` takes, read with the standard library (the probe
cannot import PyYAML): block mappings and sequences, flow `{...}` and `[...]`, quoted and
plain scalars resolved as PyYAML's safe_load resolves them (YAML 1.1: `yes`/`on` are true,
`1e3` is text). Anything else (anchors, tags, block scalars, several documents) is refused
with its line, so a server's settings are never guessed from a file read wrongly."""

import json
import re

# PyYAML's implicit resolvers (yaml/resolver.py), so a plain scalar gets the type
# safe_load gives it, and so the text vLLM makes of it with str()
BOOL = re.compile(r"(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE"
                  r"|on|On|ON|off|Off|OFF)$")
FLOAT = re.compile(r"(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?"
                   r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
                   r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*"
                   r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
INT = re.compile(r"(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)"
                 r"|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$")
NULL = ("", "~", "null", "Null", "NULL")
MAX_DEPTH = 32


class YamlError(ValueError):
    def __init__(self, line, message):
        ValueError.__init__(self, "line %d: %s" % (line, message))


def plain(text):
    """A plain scalar as PyYAML's safe_load types it (its constructors' arithmetic)."""
    if text in NULL:
        return None
    if BOOL.match(text):
        return text.lower() in ("yes", "true", "on")
    if INT.match(text):
        return signed(text.replace("_", ""), int)
    if FLOAT.match(text):
        return signed(text.replace("_", "").lower(), float)
    return text


def signed(text, kind):
    sign = -1 if text[0] == "-" else 1
    digits = text[1:] if text[0] in "+-" else text
    if kind is float:
        if digits == ".inf":
            return sign * float("inf")
        if digits == ".nan":
            return float("nan")
    elif digits == "0":
        return 0
    elif digits.startswith(("0b", "0x")):
        return sign * int(digits[2:], 2 if digits[1] == "b" else 16)
    elif digits[0] == "0":
        return sign * int(digits, 8)
    if ":" in digits:  # YAML 1.1's base 60
        value = kind(0)
        for part in digits.split(":"):
            value = value * 60 + kind(part)
        return sign * value
    return sign * kind(digits)


def without_comment(line):
    """The line up to a ` #` comment outside quotes."""
    return scanned(line)[0]


def scanned(line):
    """(the line up to a ` #` comment outside quotes, whether a tab stands outside quotes
    before it: PyYAML refuses one there). A quote opens a quoted scalar only where a
    scalar starts (the line's start, or after `: `, `- `, `[`, `{`, `,`, `? `): inside a
    plain scalar (`/m/o'brien`) it is a character like any other."""
    quote = None
    tab = False
    i = 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            if c == "'" and line[i + 1:i + 2] == "'":
                i += 1  # '' is a quote inside a single-quoted scalar
            elif c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1  # an escaped character
            elif c == '"':
                quote = None
        elif c in "'\"" and scalar_starts(line, i):
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), tab
        elif c == "\t":
            tab = True
        i += 1
    return line.rstrip(), tab


def scalar_starts(line, i):
    """Does a scalar start at line[i]: nothing but spaces before it, or an indicator
    that ends a token (`:`/`-`/`?` followed by a space, `[`, `{`, `,`)?"""
    j = i
    while j > 0 and line[j - 1] in " \t":
        j -= 1
    if j == 0:
        return True
    before = line[j - 1]
    if before in "[{,":
        return True
    return before in ":-?" and j < i


class Flow:
    """A flow collection or a quoted scalar, read from one line."""

    def __init__(self, text, line):
        self.text, self.at, self.line = text, 0, line

    def fail(self, message):
        raise YamlError(self.line, message)

    def skip(self):
        while self.at < len(self.text) and self.text[self.at] in " \t":
            self.at += 1

    def value(self, depth=0, stops=""):
        if depth > MAX_DEPTH:
            self.fail("nested too deeply")
        self.skip()
        if self.at >= len(self.text):
            return None
        c = self.text[self.at]
        if c == "{":
            return self.collection("}", depth, mapping=True)
        if c == "[":
            return self.collection("]", depth, mapping=False)
        if c in "'\"":
            return self.quoted(c)
        if c in "&*!|>%@`":
            self.fail("%r (anchors, aliases, tags and block scalars) is not read" % c)
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in stops:
            if self.text[self.at] == ":" and stops and \
                    self.text[self.at + 1:self.at + 2] in (" ", ""):
                break
            self.at += 1
        return plain(self.text[start:self.at].strip())

    def quoted(self, quote):
        end = self.at + 1
        while end < len(self.text):
            c = self.text[end]
            if quote == '"' and c == "\\":
                end += 2
                continue
            if c == quote:
                if quote == "'" and self.text[end + 1:end + 2] == "'":
                    end += 2
                    continue
                break
            end += 1
        else:
            self.fail("a quoted scalar is not closed on its line")
        body = self.text[self.at + 1:end]
        self.at = end + 1
        if quote == "'":
            return body.replace("''", "'")
        try:
            return json.loads('"%s"' % body)
        except ValueError:
            self.fail("a double-quoted scalar has an escape JSON does not share")

    def collection(self, close, depth, mapping):
        self.at += 1
        out = {} if mapping else []
        while True:
            self.skip()
            if self.text[self.at:self.at + 1] == close:
                self.at += 1
                return out
            item = self.value(depth + 1, ",:" + close if mapping else "," + close)
            self.skip()
            if mapping:
                if self.text[self.at:self.at + 1] != ":":
                    self.fail("a flow mapping entry has no ':'")
                self.at += 1
                if not isinstance(item, (str, int, float, bool)) and item is not None:
                    self.fail("a flow mapping key must be a scalar")
                out[item] = self.value(depth + 1, "," + close)
            else:
                out.append(item)
            self.skip()
            c = self.text[self.at:self.at + 1]
            if c == ",":
                self.at += 1
            elif c != close:
                self.fail("a flow collection is not closed on its line")

    def whole(self):
        value = self.value()
        self.skip()
        if self.at != len(self.text):
            self.fail("unexpected text after a value: %r" % self.text[self.at:][:40])
        return value


def scalar_or_flow(text, line):
    text = text.strip()
    if text[:1] in "{['\"&*!|>%@`":
        return Flow(text, line).whole()
    return plain(text)


def load(text):
    """The document's value (a mapping for a vLLM config), or YamlError."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise YamlError(number, "a tab in indentation")
        line, tab = scanned(raw)
        if tab and line.strip():
            raise YamlError(number, "a tab outside quotes (PyYAML refuses it)")
        if not line.strip():
            continue
        if line.strip() in ("---", "...") and not lines:
            continue
        if line.startswith(("---", "...", "%")):
            raise YamlError(number, "several documents or directives are not read")
        lines.append((number, len(line) - len(line.lstrip(" ")), line.strip()))
    if not lines:
        return None
    value, at = block(lines, 0, lines[0][1], 0)
    if at != len(lines):
        raise YamlError(lines[at][0], "text outside the document's indentation")
    return value


def block(lines, at, indent, depth):
    """The block node at `lines[at]` with this indent: (value, next index)."""
    if depth > MAX_DEPTH:
        raise YamlError(lines[at][0], "nested too deeply")
    number, _, text = lines[at]
    if text == "-" or text.startswith("- "):
        return sequence(lines, at, indent, depth)
    if mapping_key(text) is not None:
        return mapping(lines, at, indent, depth)
    return scalar_or_flow(text, number), at + 1


def mapping_key(text):
    """(key, rest) when the line is `key: rest`, else None."""
    if text[:1] in "'\"":
        flow = Flow(text, 0)
        try:
            key = flow.quoted(text[0])
        except YamlError:
            return None
        rest = text[flow.at:]
        if rest.startswith(":") and rest[1:2] in (" ", ""):
            return key, rest[1:].strip()
        return None
    if text[:1] in "{[&*!|>%@`":
        return None
    match = re.match(r"([^:#]+?):( |$)", text)
    if not match:
        return None
    return plain(match.group(1).strip()), text[match.end():].strip()


def nested(lines, at, indent, depth, under_key=True):
    """The value under `key:` or `-` with nothing after it: a deeper block, or under a
    key a sequence at the key's own indent (`key:` then `- item`)."""
    if at < len(lines) and (lines[at][1] > indent or (
            under_key and lines[at][1] == indent and
            (lines[at][2] == "-" or lines[at][2].startswith("- ")))):
        return block(lines, at, lines[at][1], depth + 1)
    return None, at


def mapping(lines, at, indent, depth):
    out = {}
    while at < len(lines) and lines[at][1] == indent:
        number, _, text = lines[at]
        found = mapping_key(text)
        if found is None:
            raise YamlError(number, "expected `key: value`, got %r" % text[:60])
        key, rest = found
        if key in out:
            raise YamlError(number, "key %r given twice" % (key,))
        if rest:
            out[key], at = scalar_or_flow(rest, number), at + 1
        else:
            out[key], at = nested(lines, at + 1, indent, depth)
    if at < len(lines) and lines[at][1] > indent:
        raise YamlError(lines[at][0], "indentation that belongs to no key")
    return out, at


def sequence(lines, at, indent, depth):
    out = []
    while at < len(lines) and lines[at][1] == indent and \
            (lines[at][2] == "-" or lines[at][2].startswith("- ")):
        number, _, text = lines[at]
        rest = text[1:].strip()
        if not rest:
            value, at = nested(lines, at + 1, indent, depth, under_key=False)
            out.append(value)
            continue
        if mapping_key(rest) is not None:
            raise YamlError(number, "a mapping inside a sequence item is not read")
        out.append(scalar_or_flow(rest, number))
        at += 1
    return out, at
