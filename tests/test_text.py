"""text.py: one set of rules for text a host sent (terminal, HTML, XML), the number
guard, and the words for counts and sizes."""

from __future__ import annotations

import pytest

from fleetcheck.text import (byte_size, counted, is_int, is_number, neutral, printable,
                             visible_controls, xml_safe)

pytestmark = pytest.mark.unit

HOSTILE = "ok\x1b[2J\x07\u202eevil\x00"


def test_a_host_cannot_move_the_cursor_or_hide_text_anywhere_it_is_shown():
    assert neutral(HOSTILE) == "ok?[2J??evil?"
    assert neutral(None) == ""
    assert printable(HOSTILE.encode() + b"\xff", 200) == "ok?[2J??evil?\ufffd"
    assert visible_controls(HOSTILE) == "ok\\x1b[2J\\x07\\x202eevil\\x00"
    assert visible_controls(7) == 7
    assert "\x00" not in xml_safe(HOSTILE) and "\x1b" not in xml_safe(HOSTILE)


@pytest.mark.parametrize("value, integer, number", [
    (True, False, False), (False, False, False), (3, True, True), (2.5, False, True),
    ("3", False, False), (None, False, False),
])
def test_a_bool_is_not_a_number(value, integer, number):
    assert is_int(value) is integer and is_number(value) is number


@pytest.mark.parametrize("count, noun, plural, words", [
    (0, "host", None, "0 hosts"), (1, "host", None, "1 host"), (2, "host", None, "2 hosts"),
    (1, "dist-info", None, "1 dist-info"), (3, "entry", "entries", "3 entries"),
])
def test_counts_in_words(count, noun, plural, words):
    assert counted(count, noun, plural) == words


@pytest.mark.parametrize("size, words", [
    (0, "0 bytes"), (1, "1 byte"), (1023, "1023 bytes"), (1536, "1.5 KiB"),
    (3 * 2**20 // 2, "1.5 MiB"), (5 * 2**30, "5.0 GiB"),
])
def test_sizes_in_words(size, words):
    assert byte_size(size) == words
