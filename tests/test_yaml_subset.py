"""The probe's reader of vLLM `--config` files (probe/yaml_subset.py) against PyYAML's
safe_load, the reader vLLM itself uses: the same value for every document it reads, and
a refusal naming the line for what it does not read."""

from __future__ import annotations

import math
import random

import pytest
import yaml

from fleetcheck.probe.yaml_subset import YamlError, load

pytestmark = pytest.mark.unit

SCALARS = ["8001", "-3", "+4", "1_000", "0x1f", "0", "0b101", "017", "-1:30", "1:30.5", ".5", "-.inf", ".NaN", "1.5", "-.5", "1e3", "1.0e+3", "3.",
           "yes", "No", "ON", "off", "true", "False", "y", "n", "~", "null", "Null", "",
           "Qwen/Qwen3-8B", "z-lab/Qwen3.6-27B-DFlash", "http://h:8/x#frag", "a b c",
           "'it''s'", "'#not a comment'", '"tab\\tand \\"quote\\""', '"\\u00e9"', "0.0.0.0",
           "1.2.3", ".inf", "-.inf", "auto", "bfloat16", "/models/target", "12:30",
           "-flag", "a: b".replace(": ", ":"),
           # quotes inside plain scalars are characters, not quotes
           "/m/o'brien", "it's", "a 'b' c", "don't", 'say "hi"', "x'#'y", "o'brien'",
           "'a''b' ", '"a\\"b"', "a#b", "a# b"]
# what may follow a value on its line: nothing, or a comment (whose text may hold quotes)
TAILS = ["", "", "", "  # note", " # it's", ' # "quoted"', " #", " # a\tb"]
FLOWS = ["{method: dflash, model: z-lab/D, num_speculative_tokens: 7}", "[1, 2, 'a,b']",
         "[]", "{}", '{"method": "eagle3", "model": "/d"}', "[x, {e: f}, [1, [2]]]",
         "{a: [1, 2], b: {c: yes}}"]
KEYS = ["port", "model", "speculative-config", "speculative_config", "served-model-name",
        "max-num-seqs", "enforce-eager", "dtype", "'quoted key'", "key with space", "1"]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def document(rng: random.Random, indent: int = 0, depth: int = 0) -> str:
    lines = []
    for key in rng.sample(KEYS, rng.randint(1, 5)):
        pad = " " * indent
        roll = rng.random()
        if roll < 0.5 or depth > 1:
            lines.append("%s%s: %s%s" % (pad, key, rng.choice(SCALARS), rng.choice(TAILS)))
        elif roll < 0.65:
            lines.append("%s%s: %s%s" % (pad, key, rng.choice(FLOWS), rng.choice(TAILS)))
        elif roll < 0.8:
            lines.append("%s%s:" % (pad, key))
            step = rng.choice([0, 2, 4])
            for _ in range(rng.randint(1, 3)):
                lines.append("%s- %s%s" % (" " * (indent + step), rng.choice(SCALARS + FLOWS),
                                           rng.choice(TAILS)))
        else:
            lines.append("%s%s:  # nested" % (pad, key))
            lines.append(document(rng, indent + rng.choice([2, 4]), depth + 1))
    return "\n".join(lines)


def test_every_generated_document_reads_as_pyyaml_reads_it():
    rng = random.Random(40898)
    compared = 0
    for _ in range(3000):
        text = document(rng) + "\n"
        try:
            expected = yaml.safe_load(text)
        except yaml.YAMLError:
            with pytest.raises(YamlError):
                load(text)
            continue
        got = load(text)
        assert got.keys() == expected.keys(), text
        for key in expected:
            assert repr(got[key]) == repr(expected[key]), (text, key)
        compared += 1
    assert compared > 2000


def test_an_apostrophe_in_a_plain_scalar_opens_no_quote():
    """`model: /m/o'brien  # note` is the path, its comment dropped, as PyYAML reads it."""
    for text in ("model: /m/o'brien  # note\n", "model: it's # a 'note'\n",
                 "- a 'b' c # x\n", "k: x'#'y # z\n"):
        assert load(text) == yaml.safe_load(text), text
    assert load("model: /m/o'brien  # note\n") == {"model": "/m/o'brien"}


def test_a_vllm_config_with_a_nested_speculative_config():
    text = ("# served by the DFlash pair\nmodel: Qwen/Qwen3.6-27B\nport: 8001\n"
            "speculative-config:\n  method: dflash\n  model: z-lab/Qwen3.6-27B-DFlash\n"
            "  num_speculative_tokens: 15\nserved-model-name:\n- qwen\n- qwen-27b\n")
    assert load(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text, words", [
    ("a: &x 1\nb: *x\n", "line 1: '&'"), ("a: |\n  text\n", "line 1: '|'"),
    ("a: 1\n---\nb: 2\n", "line 2: several documents"), ("a: [1, 2\n", "line 1: a flow"),
    ("a: !!str 1\n", "line 1: '!'"), ("a: 1\na: 2\n", "line 2: key 'a' given twice"),
    ("a:\n\tb: 1\n", "line 2: a tab"), ("a: 1\n  b: 2\n", "line 2: indentation"),
    ("a: 1\nmodel: /m\t# tab\n", "line 2: a tab outside quotes"),
    ("a: x\ty\n", "line 1: a tab outside quotes"),
    ("- a: 1\n", "line 1: a mapping inside a sequence"), ("a: 'open\n", "line 1: a quoted")])
def test_what_it_does_not_read_is_refused_with_its_line(text, words):
    with pytest.raises(YamlError) as caught:
        load(text)
    assert str(caught.value).startswith(words)
