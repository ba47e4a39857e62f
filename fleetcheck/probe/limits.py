"""Bounds on every byte another process gives the probe, in one place: JSON parsed with a
nesting bound (a port that answers 5,000 nested brackets is a refusal, never a
RecursionError that takes the host's facts down), text cut before it leaves the probe,
a child's output read line by line with each line bounded, and values from config files
and children kept to a depth, a length and a count the controller's decoder accepts."""

MAX_TEXT = 4096  # a value, message or line as it leaves the probe
MAX_LINE = 1024 * 1024  # one line of a child's output (a loaded config is a few KB)
MAX_JSON_DEPTH = 64  # real configs and answers nest a few levels
MAX_VALUE_DEPTH = 8
MAX_VALUE_ITEMS = 4096


class Refused(ValueError):
    """Input refused by a bound (a ValueError: every reader already handles those)."""


def cut(text, limit=MAX_TEXT):
    """`text` (any value, as text) at most `limit` characters, marked when cut."""
    if not isinstance(text, str):
        text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def nesting(text, bound):
    """Whether brackets in `text` open deeper than `bound` (strings skipped): a linear
    scan run only on text that holds more brackets than the bound."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > bound:
                return True
        elif char in "]}":
            depth -= 1
    return False


def loads(text, max_depth=MAX_JSON_DEPTH):
    """JSON another process gave: a value, or Refused (a ValueError) when it is not JSON
    or nests deeper than `max_depth`."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") > max_depth and nesting(text, max_depth):
        raise Refused("JSON nested deeper than %d levels" % max_depth)
    import json  # the json package, not jsonlite: its errors say where a cut or hostile
    try:         # text breaks, where _json's bare scanner may fail without saying why
        return json.loads(text)
    except RecursionError:
        raise Refused("JSON nested too deep to read")


def lines(data, limit=MAX_LINE):
    """A child's output (bytes) as text lines, each cut to `limit` characters."""
    return [line if len(line) <= limit else line[:limit]
            for line in data.decode("utf-8", "replace").splitlines()]


def bounded(value, depth=0):
    """A value as it may travel in the facts: text cut to MAX_TEXT characters, nesting
    cut at MAX_VALUE_DEPTH levels, at most MAX_VALUE_ITEMS entries per list or map,
    non-finite numbers as text (the decoder refuses NaN, and a host's whole answer with
    it)."""
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, (dict, list)) and depth >= MAX_VALUE_DEPTH:
        return "(nested deeper than %d levels)" % MAX_VALUE_DEPTH
    if isinstance(value, dict):
        return dict((bounded(str(k)), bounded(v, depth + 1))
                    for k, v in list(value.items())[:MAX_VALUE_ITEMS])
    if isinstance(value, list):
        return [bounded(v, depth + 1) for v in value[:MAX_VALUE_ITEMS]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return cut(repr(value))
