"""Smoke settings, the launch command template, the prompt set, and counter parsing."""

from __future__ import annotations

import shlex

import pytest

from fleetcheck.checks.acceptance import counter_totals, measure
from fleetcheck.facts import Smoke
from fleetcheck.facts_decoder import decode
from fleetcheck.input_error import InputError
from fleetcheck.inventory import Host
from fleetcheck.smoke_settings import SmokeOptions, prompt_set, smoke_plan, validate_smoke


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
    options = validate_smoke("pb", None, {"mode": "launch", "port": 8123}, SmokeOptions())
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
        validate_smoke("inv.yaml", "host 'gpu1'", raw, SmokeOptions())
    assert "host 'gpu1'" in str(info.value) and field in str(info.value)


TEXT_BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 20.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 150.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 40.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 18.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 5.0
"""


def test_counters_summed_over_engines_created_ignored():
    totals, per_position, present = counter_totals(TEXT_BEFORE)
    assert totals["vllm:spec_decode_num_drafts"] == 30.0  # not 1.7e9 from _created
    assert totals["vllm:spec_decode_num_accepted_tokens"] == 90.0
    assert per_position == {0: 27.0, 1: 5.0}


def test_measure_takes_deltas():
    after = TEXT_BEFORE.replace("} 10.0", "} 14.0").replace("} 150.0", "} 210.0") \
        .replace("} 40.0", "} 58.0").replace('position="0"} 9.0', 'position="0"} 13.0') \
        .replace('position="1"} 5.0', 'position="1"} 7.0')
    numbers = measure(decode(Smoke, {"metrics_before": TEXT_BEFORE, "metrics_after": after,
                                     "load": {"results": [], "wall_s": 1.0, "planned": 0}}))
    assert numbers["drafts"] == 4 and numbers["draft_tokens"] == 60
    assert numbers["accepted_tokens"] == 18
    assert numbers["acceptance_rate"] == 18 / 60
    assert numbers["mean_acceptance_length"] == 1 + 18 / 4
    assert numbers["per_position"] == [4 / 4, 2 / 4]
