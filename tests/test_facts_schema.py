"""The facts' shape on recorded answers: real probes' facts fit, each kind of misfit is
named by its field (the same cases over real sshd are in test_hostile.py)."""

from __future__ import annotations

import copy
import json
import os

import pytest

from fleetcheck.facts_schema import FactsError, open_field, validate_facts

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "facts")


def recorded(name: str) -> dict:
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)["facts"]


@pytest.mark.parametrize("name", sorted(os.listdir(FIXTURES)))
def test_real_probe_answers_fit(name):
    validate_facts(recorded(name))


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("change, words", [
    (lambda f: f["install"]["dist_infos"][0].update(version=3), "install.dist_infos[0].version: "
     "expected a string or null, got an integer"),
    (lambda f: f["install"]["dist_infos"][0].pop("path"), "install.dist_infos[0].path: missing"),
    (lambda f: f["install"]["dist_infos"][0].update(direct_url={"dir_info": None}),
     "direct_url.dir_info: null where an object belongs"),
    (lambda f: f.update(errors=[float("inf")]), "errors[0]: inf is not a number"),
    (lambda f: f["version_file"].update(version_tuple=nested(100)),
     "version_file.version_tuple[...]: nested deeper than 32 levels"),
    (lambda f: f.update(integrity={"record": {"dist_info": "x", "rows": 1}}),
     "integrity.record.checked: missing"),
    (lambda f: f.update(smoke={"error": {"kind": "stalled"}}), "smoke.error.detail: missing"),
    (lambda f: f.update(python=["x"]), "python: expected an object or null, got a list"),
])
def test_a_misfit_is_named_by_its_field(change, words):
    facts = copy.deepcopy(recorded("vllm-0.33.0.json"))
    change(facts)
    with pytest.raises(FactsError) as info:
        validate_facts(facts)
    assert words in str(info.value)


def test_an_object_with_an_error_needs_only_what_was_learned():
    facts = copy.deepcopy(recorded("vllm-0.33.0.json"))
    facts["integrity"] = {"record": {"dist_info": "vllm-0.33.0.dist-info", "error": "EACCES"}}
    facts["smoke"] = {"mode": "attach", "url": "http://127.0.0.1:8000",
                      "error": {"kind": "unreachable", "detail": "refused"}}
    validate_facts(facts)
    with pytest.raises(FactsError, match="smoke: missing"):
        validate_facts(recorded("vllm-0.33.0.json"), required=("smoke",))


def test_open_field_names_where_a_cut_answer_stopped():
    text = json.dumps({"probe_version": 1, "signatures": {"dflash-swa": {"findings": {
        "attention_call": [{"file": "a.py", "line": 1}, {"text": "x" * 100}]}}}})
    assert open_field(text[:-20]) == "signatures.dflash-swa.findings.attention_call[1].text"
    assert open_field('{"a": [1, 2], "b": {"c": [[[[[', 4) == "b.c[0][0][0]"
    assert open_field('{"a": [[1]]}', 4) is None
