"""A small regex lexer for Python source: tokens as (kind, value, first line, last line),
layout and comments dropped, adjacent string literals joined and compared by value.

Faster than the tokenize module by an order of magnitude and indifferent to indentation,
so it can lex a window of a file (starting at a def/class line) instead of the whole file.
Kinds: N name, O operator, # number, S string."""

import ast
import re

TOKEN = re.compile(r"""
  (?P<nl>\r?\n)
| (?P<ws>[ \t\f]+|\\\r?\n)
| (?P<comment>\#[^\r\n]*)
| (?P<string>(?:[rRbBuUfF]{1,2})?(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"
              |'(?:\\.|[^\\'\r\n])*'|"(?:\\.|[^\\"\r\n])*"))
| (?P<number>0[xXoObB][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?)
| (?P<name>[^\W\d]\w*)
| (?P<op>\.\.\.|->|:=|\*\*=?|//=?|>>=?|<<=?|[-+*/%&|^@=!<>]=|[-+*/%&|^~@<>=.,:;()\[\]{}])
| (?P<other>.)
""", re.VERBOSE)
VAR_PREFIX = "__fleetcheck_var_"


def string_value(text):
    """The value of a string literal; f-strings (and anything odd) keep their source.
    Literals without backslashes (nearly all) are sliced, not evaluated."""
    prefix = len(text) - len(text.lstrip("rRbBuUfF"))
    if "f" in text[:prefix].lower():
        return text
    body = text[prefix:]
    if "\\" not in body or "r" in text[:prefix].lower():
        quote = 3 if body[:3] in ('"""', "'''") else 1
        return body[quote:-quote]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value if isinstance(value, str) else text


def lex(source, first_line=1, position=0, stop_line=None, extra=0):
    """Tokens of `source` from `position` (which is on `first_line`); with `stop_line`,
    lexing ends `extra` tokens after that line, so a window costs what it covers."""
    out = []
    line = first_line
    pending = None
    after = 0
    for match in TOKEN.finditer(source, position):
        if stop_line is not None and line > stop_line:
            after += 1
            if after > extra:
                break
        kind = match.lastgroup
        text = match.group()
        if kind == "nl":
            line += 1
            continue
        if kind in ("ws", "comment"):
            line += text.count("\n")
            continue
        end_line = line + text.count("\n")
        if kind == "string":
            value = string_value(text)
            if pending is None:
                pending = ["S", value, line, end_line]
            else:
                pending[1] += value
                pending[3] = end_line
            line = end_line
            continue
        if pending is not None:
            out.append(tuple(pending))
            pending = None
        out.append(({"name": "N", "number": "#"}.get(kind, "O"), text, line, end_line))
        line = end_line
    if pending is not None:
        out.append(tuple(pending))
    return out


def compile_pattern(pattern):
    """A pattern as tokens: `$x` binds a name, `...` is a gap, the rest must match."""
    prepared = re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", VAR_PREFIX + r"\1", pattern)
    compiled = []
    for kind, value, _, _ in lex(prepared):
        if kind == "N" and value.startswith(VAR_PREFIX):
            compiled.append(("var", value[len(VAR_PREFIX):]))
        elif kind == "O" and value == "...":
            compiled.append(("gap", None))
        else:
            compiled.append((kind, value))
    return compiled
