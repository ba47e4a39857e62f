"""Text a host sent, made safe where it is shown, by one set of rules: on a terminal or
in a log (control characters and bidi overrides become '?'), in HTML (they are shown as
\\xNN, never passed into the page), in XML (what XML 1.0 cannot hold is shown as \\xNN).
Also the words for counts and sizes, so no message says "1 host(s)" or "0.0 MiB"."""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
XML_INVALID = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def neutral(value: object) -> str:
    """For a terminal or a log: nothing a host sent can move the cursor or recolour."""
    return CONTROL.sub("?", "" if value is None else str(value))


def printable(data: bytes, limit: int = 200) -> str:
    """A short, terminal-safe rendering of bytes a host sent."""
    return neutral(data[:limit].decode("utf-8", "replace"))


def visible_controls(value: object) -> object:
    """For HTML: control characters a host sent are shown as \\xNN (strings only)."""
    if isinstance(value, str):
        return CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), value)
    return value


def xml_safe(text: object) -> str:
    return XML_INVALID.sub(lambda m: "\\x%02x" % ord(m.group()), "" if text is None else str(text))


def is_clean_name(value: str) -> bool:
    """A name or path the user gave (inventory, options) or a host named itself with:
    no control, bidi or other format character, no line or paragraph separator. Such
    values reach terminals, logs and ssh, where those characters would hide or rewrite
    text; refused where they come in rather than neutralised where they go out."""
    return value.isprintable()


def is_int(value: object) -> bool:
    """A JSON or YAML integer: True and False are bools, never numbers of a setting."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 host', '3 hosts' ('1 dist-info', '2 dist-infos'; an irregular plural given)."""
    return "%d %s" % (count, noun if count == 1 else plural or noun + "s")


def byte_size(count: int) -> str:
    """'700 bytes', '12.3 KiB', '1.5 MiB', '5.0 GiB'."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return "%.1f %s" % (count / size, unit)
    return counted(count, "byte")
