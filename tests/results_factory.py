"""Recorded-style results for report tests: a mixed fleet of any size, with the hostile
strings a host could send (markup in versions, paths, evidence and messages)."""

from __future__ import annotations

from dataclasses import replace

from fleetcheck.results import (NOT_RUN, CheckResult, Evidence, HostError, HostResult,
                                RunResult, VllmInfo, host_status)

HOSTILE_VERSION = '0.33.0"><script>window.pwned=1</script>'
HOSTILE_PATH = "vllm/v1/<img src=x onerror=window.pwned=2>.py"
HOSTILE_MESSAGE = "<iframe src=https://example.invalid/></iframe>"
HOSTILE_SERVED = "org/<img src=x onerror=window.pwned=3>"  # a served name, model, drafter
CHECKS = ["dflash-layer-offset", "dflash-swa", "dflash-cache-drop", "install-record",
          "install-leftovers", "install-metadata", "install-import", "install-in-progress",
          "smoke-acceptance"]


def make_host(i: int, broken_every: int = 9) -> HostResult:
    name = "gpu%03d.dc%d" % (i, 1 + i % 3)
    groups = ["dc%d" % (1 + i % 3)] + (["canary"] if i % 10 == 0 else [])
    if i % 25 == 7:
        error = HostError("unreachable", "%s:22: connection refused" % name)
        checks = [CheckResult(c, c, "skip", "not run: unreachable", details={NOT_RUN: True})
                  for c in CHECKS]
        return HostResult(name, "10.%d.0.%d" % (i // 250, i % 250), groups,
                          host_status([], error), error, 0.2, None, checks)
    broken = i % broken_every == broken_every // 2
    checks = []
    for c in CHECKS:
        status = "fail" if broken and c.startswith("dflash") else "pass"
        evidence = [Evidence("vllm/v1/worker/gpu_model_runner.py", 5214 + i,
                             "layer_ids = [i + 1 for i in (dflash_config.get(\"target_layer_ids\") or [])]")]
        checks.append(CheckResult(c, c, status, "message for %s on %s" % (c, name), evidence))
    smoke = {"acceptance_rate": 0.011 if broken else 0.3 + (i % 5) / 100,
             "mean_acceptance_length": 1.17 if broken else 5.5 + (i % 7) / 10,
             "per_position": [max(0.0, 0.8 - p * 0.05) for p in range(15)],
             "drafts": 100, "draft_tokens": 1500, "accepted_tokens": 450,
             "requests": {"ok": 8, "failed": 0, "planned": 8}, "tokens_per_s": 80.0,
             "latency_p50_s": 0.8, "latency_p95_s": 1.3, "model": "Qwen/Qwen3.6-27B",
             "mode": "attach", "url": "http://127.0.0.1:8000"}
    commit = "4ba787ec9" if i % 50 else "deadbeef1"  # same version, another commit
    vllm = VllmInfo("0.33.0" if not broken else "0.20.1", "0.33.0", commit, "_version.py",
                    "index (pip)", "/root/ml-env/lib/python3.12/site-packages")
    return HostResult(name, "10.%d.0.%d" % (i // 250, i % 250), groups,
                      host_status(checks, None), None, 0.4, vllm, checks, smoke)


def make_run(hosts: int, hostile: bool = True, broken_every: int = 9) -> RunResult:
    """`broken_every`: one host in that many misses the fixes (2: half the fleet)."""
    results = [make_host(i, broken_every) for i in range(hosts)]
    if hostile:
        host = results[1]
        hostile_check = replace(host.checks[0], message=HOSTILE_MESSAGE,
                                evidence=[Evidence(HOSTILE_PATH, 3, "x = 1  # <b>bold</b>")])
        served = [{"pid": 7, "port": 8000, "serving": True, "served_names": [HOSTILE_SERVED],
                   "target": {"spec": HOSTILE_SERVED}, "method": "dflash",
                   "drafter": {"spec": HOSTILE_SERVED, "revision": "ab" * 20},
                   "num_speculative_tokens": 15,
                   "env": {"VLLM_USE_V2_MODEL_RUNNER": HOSTILE_SERVED},
                   "notes": [HOSTILE_MESSAGE]}]
        results[1] = replace(host, vllm=replace(host.vllm, version=HOSTILE_VERSION),
                             checks=(hostile_check, *host.checks[1:]), served=served)
    return RunResult(started_at="2026-11-29T12:00:00+00:00", inventory="inventories/prod.yaml",
                     playbook="playbooks/dflash.yaml", finished_at="2026-11-29T12:00:09+00:00",
                     complete=True, fleetcheck_version="0.1.0", duration_s=9.0, hosts=results)
