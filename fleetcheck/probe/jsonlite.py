"""JSON on the host without importing the json package: json imports re (and enum,
functools, ...), while its C scanner and encoder live in _json, which imports nothing.
What that saves a host is in benchmarks/probe_cost.py, rows "shared analysis, follower:
..." and "shared analysis, follower, the json package loaded too"; a host with nothing to
analyse and no server never imports json or re (tests/test_probe.py runs probe() and
lists its modules). Same output
and the same errors (ValueError) as json.loads / json.dumps; where _json is missing or
differs, the json package itself."""

try:
    import _json
except ImportError:  # a Python built without the accelerator
    _json = None

FLOAT_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
WHITESPACE = " \t\n\r"


class ScannerContext:
    """The attributes _json.make_scanner reads from a json.JSONDecoder."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = FLOAT_CONSTANTS.__getitem__


def unserializable(value):
    raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)


def make_codec():
    """(scanner, plain encoder, sorted encoder) from _json, or None."""
    if _json is None:
        return None
    try:
        encoders = [_json.make_encoder(None, unserializable, _json.encode_basestring_ascii, None,
                                       ": ", ", ", sort_keys, False, True)
                    for sort_keys in (False, True)]
        return _json.make_scanner(ScannerContext()), encoders[0], encoders[1]
    except (AttributeError, TypeError):  # another Python's private API
        return None


CODEC = make_codec()


def loads(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if CODEC is None:
        import json
        return json.loads(text)
    start = len(text) - len(text.lstrip(WHITESPACE))
    try:
        value, end = CODEC[0](text, start)
    except StopIteration as stop:
        raise ValueError("Expecting value: char %d" % stop.value)
    if text[end:].strip(WHITESPACE):
        raise ValueError("Extra data: char %d" % end)
    return value


def dumps(value, sort_keys=False):
    if CODEC is None:
        import json
        return json.dumps(value, sort_keys=sort_keys)
    return "".join(CODEC[2 if sort_keys else 1](value, 0))
