"""The facts' one description (facts.py) and its decoder (facts_decoder.py): real probes'
answers (recorded, run here on a real wheel, a real smoke load) decode whole, with no
field the description does not know; each kind of misfit is named by its field (the same
cases over real sshd are in test_hostile.py)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from fleetcheck.facts import Facts
from fleetcheck.facts_decoder import FactsError, decode_facts, open_field
from fleetcheck.inventory import Host
from fleetcheck.smoke_settings import SmokeSettings, prompt_set, smoke_plan
from fleetcheck.lab.local_probe import probe_answer
from probe_helpers import STANDIN, assert_holds, wait_listening

pytestmark = pytest.mark.unit

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "facts")


def recorded(name: str) -> dict:
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)["facts"]


@pytest.mark.parametrize("name", sorted(os.listdir(FIXTURES)))
def test_real_probe_answers_fit(name):
    decode_facts(recorded(name))


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
    (lambda f: f.update(servers={"servers": [{"pid": "1"}]}),
     "servers.servers[0].pid: expected an integer or null, got a string"),
    (lambda f: f.update(integrity={"record": dict(
        {k: 0 for k in ("rows", "checked", "hashed", "hashed_bytes")}, dist_info="x",
        missing={"count": 0, "files": []}, hash={"count": 0, "files": []},
        unreadable={"count": 0, "files": []}, size={"count": 1, "files": [{"file": "a"}]})}),
     "integrity.record.size.files[0].expected: missing"),
    (lambda f: f.update(integrity={"import": {"interpreter": "/p", "expected": [],
                                              "modules": [{"module": "m", "ok": 1}]}}),
     "integrity.import.modules[0].ok: expected true or false or null, got an integer"),
])
def test_a_misfit_is_named_by_its_field(change, words):
    facts = copy.deepcopy(recorded("vllm-0.33.0.json"))
    change(facts)
    with pytest.raises(FactsError) as info:
        decode_facts(facts)
    assert words in str(info.value)


def test_an_object_with_an_error_needs_only_what_was_learned():
    facts = copy.deepcopy(recorded("vllm-0.33.0.json"))
    facts["integrity"] = {"record": {"dist_info": "vllm-0.33.0.dist-info", "error": "EACCES"}}
    facts["smoke"] = {"mode": "attach", "url": "http://127.0.0.1:8000",
                      "error": {"kind": "unreachable", "detail": "refused"}}
    decode_facts(facts)


def test_open_field_names_where_a_cut_answer_stopped():
    text = json.dumps({"probe_version": 1, "signatures": {"dflash-swa": {"findings": {
        "attention_call": [{"file": "a.py", "line": 1}, {"text": "x" * 100}]}}}})
    assert open_field(text[:-20]) == "signatures.dflash-swa.findings.attention_call[1].text"
    assert open_field('{"a": [1, 2], "b": {"c": [[[[[', 4) == "b.c[0][0][0]"
    assert open_field('{"a": [[1]]}', 4) is None


# --- one description: every real probe output the suite has decodes whole -------------

@pytest.mark.parametrize("name", sorted(os.listdir(FIXTURES)))
def test_recorded_answers_have_no_field_the_description_does_not_know(name):
    unknown: list = []
    facts = decode_facts(recorded(name), unknown=unknown)
    assert unknown == []
    assert_holds(facts, recorded(name))


def test_a_renamed_field_is_reported_at_the_boundary_and_ignored_at_run_time():
    raw = copy.deepcopy(recorded("vllm-0.33.0.json"))
    dist = raw["install"]["dist_infos"][0]
    dist["versoin"] = dist.pop("version")
    unknown: list = []
    facts = decode_facts(raw, unknown=unknown)
    assert unknown == ["install.dist_infos[0].versoin"]
    assert facts.install.dist_infos[0].version is None  # a host is not failed for it
    raw["install"]["dist_infos"][0]["direct_url"]["subdirectory"] = "x"  # the host's file
    unknown.clear()
    decode_facts(raw, unknown=unknown)
    assert unknown == ["install.dist_infos[0].versoin"]


def real_answer(host: Host, **plan) -> dict:
    """A real probe's answer on this machine, decoded without the description."""
    result = probe_answer(host, **plan)
    assert result.exit_status == 0, result.stderr
    return json.loads(result.stdout)


def assert_described(raw: dict) -> Facts:
    unknown: list = []
    facts = decode_facts(raw, unknown=unknown)
    assert unknown == []
    assert_holds(facts, raw)
    return facts


def test_a_real_probe_on_a_real_wheel_sends_only_described_fields(real_venvs):
    host = Host(name="local", address="local", connection="local",
                venv=real_venvs["0.33.0"])
    raw = real_answer(host, integrity={"deep": False, "import_check": True,
                                       "import_timeout": 20})
    facts = assert_described(raw)
    assert facts.integrity.record.rows > 1000 and facts.integrity.imports.expected
    assert facts.install.dist_infos[0].version == "0.33.0" and facts.signatures


def test_a_real_smoke_load_sends_only_described_fields(tmp_path, loopback_address):
    address = loopback_address
    server = subprocess.Popen([sys.executable, STANDIN, "--bind", address, "--port", "8000",
                               "--scenario", "healthy", "--state", str(tmp_path / "state")])
    try:
        wait_listening(address, 8000)
        host = Host(name="local", address="local", connection="local",
                    vllm_url="http://%s:8000" % address)
        options = SmokeSettings(enabled=True, requests=4, max_tokens=16)
        raw = real_answer(host, smoke=smoke_plan(host, options),
                          prompts=prompt_set()["prompts"])
    finally:
        server.kill()
        server.wait()
    facts = assert_described(raw)
    assert facts.smoke is not None and facts.smoke.error is None and len(facts.smoke.load.results) == 4
