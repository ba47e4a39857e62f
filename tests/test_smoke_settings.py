"""smoke_settings.py: smoke settings and their errors, the launch command template with
every inventory value quoted, the prompt set."""

from __future__ import annotations

import json
import shlex

import pytest

from fleetcheck.input_error import InputError
from fleetcheck.inventory import Host
from fleetcheck.smoke_settings import SmokeSettings, prompt_set, smoke_plan, validate_smoke

pytestmark = pytest.mark.unit


def test_prompt_set_is_versioned_and_has_a_long_prompt():
    prompts = prompt_set()
    assert prompts["version"] == "smoke-v2"
    kinds = {p["kind"] for p in prompts["prompts"]}
    assert {"code", "math", "chat", "long"} <= kinds
    # each prompt is one independent request: the default load sends every one once
    ids = [p["id"] for p in prompts["prompts"]]
    assert len(set(ids)) == len(ids) == SmokeSettings().requests
    long = [p for p in prompts["prompts"] if p["kind"] == "long"][0]
    assert prompts["prompts"].index(long) == 6  # the 7th: the first six stay short
    # every whitespace-separated word is at least one token: > 3,000 tokens for sure
    assert len(long["content"].split()) > 3000


def test_launch_command_quotes_every_inventory_value():
    host = Host(name="gpu1", address="gpu1", venv="/opt/env; touch /tmp/pwned $(id)")
    options = validate_smoke("pb", None, {"mode": "launch", "port": 8123}, SmokeSettings())
    plan = smoke_plan(host, options)
    argv = shlex.split(plan["command"])
    assert argv[0] == "/opt/env; touch /tmp/pwned $(id)/bin/vllm"
    assert argv[1:5] == ["serve", "Qwen/Qwen3.6-27B", "--port", "8123"]
    assert argv[5] == "--speculative-config"
    assert '"method": "dflash"' in argv[6] and plan["url"] == "http://127.0.0.1:8123"
    assert plan["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "1"}


@pytest.mark.parametrize("raw, field", [
    ({"mode": "burst"}, "smoke.mode"), ({"requests": 0}, "smoke.requests"),
    ({"broken_acceptance_rate": "high"}, "smoke.broken_acceptance_rate"),
    ({"reference_fraction": 1.5}, "smoke.reference_fraction"),
    ({"reference": {"drafter": "org/d"}}, "smoke.reference.mean_acceptance_length"),
    ({"reference": [{"mean_acceptance_length": 4}, {"mean_acceptance_length": 5, "k": 3}]},
     "smoke.reference[1].k"),
    ({"prompt_set": "/nonexistent/prompts.json"}, "smoke.prompt_set"),
    ({"concurrency": 2}, "smoke.concurrency"),
    ({"command": "{{ venv "}, "smoke.command"), ({"colour": 1}, "smoke.colour"),
])
def test_bad_smoke_settings_name_the_field(raw, field):
    with pytest.raises(InputError) as info:
        validate_smoke("inv.yaml", "host 'gpu1'", raw, SmokeSettings())
    assert "host 'gpu1'" in str(info.value) and field in str(info.value)


def test_reference_forms_and_a_prompt_set_of_ones_own(tmp_path):
    options = validate_smoke("pb", None, {"reference": 5.2}, SmokeSettings())
    assert options.reference[0].mean_acceptance_length == 5.2
    assert options.reference[0].drafter is None
    options = validate_smoke("pb", None, {"reference": [
        {"mean_acceptance_length": 5, "drafter": "org/d", "num_speculative_tokens": 15,
         "prompt_set": "smoke-v2"}, {"mean_acceptance_length": 2.5, "method": "ngram"}]},
        SmokeSettings())
    assert [r.mean_acceptance_length for r in options.reference] == [5.0, 2.5]
    playbook = tmp_path / "pb.yaml"
    playbook.write_text("smoke: {}\n")
    (tmp_path / "mine.json").write_text(json.dumps({"version": "mine-1", "prompts": [
        {"id": "a", "content": "x"}, {"id": "b", "content": "y"}]}))
    options = validate_smoke(str(playbook), None, {"prompt_set": "mine.json"}, SmokeSettings())
    assert options.prompt_set == str(tmp_path / "mine.json")  # beside the playbook
    assert prompt_set(options.prompt_set)["version"] == "mine-1"
    (tmp_path / "twice.json").write_text(json.dumps({"version": "t", "prompts": [
        {"id": "a", "content": "x"}, {"id": "a", "content": "y"}]}))
    with pytest.raises(InputError, match="names a prompt id twice"):
        validate_smoke(str(playbook), None, {"prompt_set": "twice.json"}, SmokeSettings())
