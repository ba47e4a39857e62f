"""smoke_settings.py: smoke settings and their errors, the launch command template with
every inventory value quoted, the prompt set."""

from __future__ import annotations

import shlex

import pytest

from fleetcheck.input_error import InputError
from fleetcheck.inventory import Host
from fleetcheck.smoke_settings import SmokeSettings, prompt_set, smoke_plan, validate_smoke

pytestmark = pytest.mark.unit


def test_prompt_set_is_versioned_and_has_a_long_prompt():
    prompts = prompt_set()
    assert prompts["version"] == "smoke-v1"
    kinds = {p["kind"] for p in prompts["prompts"]}
    assert {"code", "math", "chat", "long"} <= kinds
    long = [p for p in prompts["prompts"] if p["kind"] == "long"][0]
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
    ({"min_acceptance_rate": "high"}, "smoke.min_acceptance_rate"),
    ({"command": "{{ venv "}, "smoke.command"), ({"colour": 1}, "smoke.colour"),
])
def test_bad_smoke_settings_name_the_field(raw, field):
    with pytest.raises(InputError) as info:
        validate_smoke("inv.yaml", "host 'gpu1'", raw, SmokeSettings())
    assert "host 'gpu1'" in str(info.value) and field in str(info.value)
