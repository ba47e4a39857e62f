"""The fix analysis against its golden (tests/findings_golden.py): the signature facts the
probe sends on the real 0.33.0 and 0.20.1 wheels and on every mutation of the corpus,
byte for byte. A refactor of the evaluator must keep them; a change meant to alter them
rewrites the golden (`python3 tests/findings_golden.py --write`) and says why."""

from __future__ import annotations

import json

import pytest

from findings_golden import GOLDEN, canonical, current

pytestmark = pytest.mark.downloads


def test_findings_are_byte_identical_to_the_golden_on_both_wheels_and_the_corpus():
    with open(GOLDEN, encoding="utf-8") as handle:
        want = json.load(handle)
    got = current()
    assert sorted(got) == sorted(want), "the corpus changed: rewrite the golden"
    differing = [key for key in sorted(want) if canonical(got[key]) != canonical(want[key])]
    assert differing == [], differing[:10]
    # the golden holds findings worth comparing: every release check and every case has some
    assert all(want["release 0.33.0"][check]["findings"] for check in want["release 0.33.0"])
