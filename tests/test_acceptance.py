"""checks/acceptance.py: vLLM's counters parsed with prometheus_client (summed over
engines, `_created` series ignored) and the load's numbers taken as deltas."""

from __future__ import annotations

import pytest

from fleetcheck.checks.acceptance import counter_totals, measure
from fleetcheck.facts import Smoke
from fleetcheck.facts_decoder import decode

pytestmark = pytest.mark.unit

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
