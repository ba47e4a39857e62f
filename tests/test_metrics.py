"""Verdicts as Prometheus metrics (report/metrics.py), read back with prometheus_client's
own parser: the text node_exporter's textfile collector and Prometheus read."""

from __future__ import annotations

import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.report.metrics import metrics_text, write_metrics
from fleetcheck.results import RunResult
from fleetcheck.status import CHECK_STATUSES
from probe_helpers import ENV
from results_factory import HOSTILE_SERVED, make_run

pytestmark = pytest.mark.unit


def samples(text: str) -> dict[str, list]:
    """Every sample by metric name (a counter's or gauge's sample name)."""
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def value(found: dict[str, list], name: str, **labels: str) -> float:
    matching = [s.value for s in found.get(name, [])
                if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matching) == 1, (name, labels, matching)
    return matching[0]


def test_one_series_per_status_and_hostile_labels_round_trip():
    run = make_run(10)
    found = samples(metrics_text(run))
    broken = run.hosts[4]  # broken_every=9: host 4 misses the fixes
    assert broken.checks[0].status == "fail"
    for status in CHECK_STATUSES:
        assert value(found, "fleetcheck_check_status", host=broken.name,
                     check="dflash-layer-offset", status=status) == (status == "fail")
    assert value(found, "fleetcheck_check_status", host=run.hosts[0].name,
                 check="dflash-swa", status="pass") == 1
    statuses = [s for s in found["fleetcheck_check_status"] if s.labels["host"] == broken.name]
    assert len(statuses) == len(CHECK_STATUSES) * len(broken.checks)
    assert set(CHECK_STATUSES) == {"pass", "fail", "warn", "error", "skip", "waived"}
    assert value(found, "fleetcheck_host_status", host=broken.name, status="fail") == 1
    unreachable = run.hosts[7]
    assert value(found, "fleetcheck_host_status", host=unreachable.name,
                 status="unreachable") == 1
    assert not [s for s in found["fleetcheck_vllm_build_info"]
                if s.labels["host"] == unreachable.name]
    assert value(found, "fleetcheck_vllm_build_info", host=broken.name, version="0.20.1",
                 commit="4ba787ec9",
                 install="/root/ml-env/lib/python3.12/site-packages") == 1
    # host 1 serves names with markup and quotes: escaped by the writer, read back whole
    assert value(found, "fleetcheck_served_info", host=run.hosts[1].name, pid="7",
                 model=HOSTILE_SERVED, drafter=HOSTILE_SERVED, method="dflash") == 1
    assert value(found, "fleetcheck_smoke_acceptance_rate", host=broken.name) == \
        pytest.approx(0.011)
    assert "fleetcheck_smoke_acceptance_rate_lower" not in found  # no interval measured


def test_label_values_with_quotes_backslashes_and_newlines():
    run = make_run(2, hostile=False)
    host = run.hosts[0]
    odd = 'a"b\\c\nd'
    from dataclasses import replace
    run = replace(run, hosts=[replace(host, served=[{"pid": 3, "target": {"spec": odd},
                                                     "drafter": None, "method": None},
                                                    {"pid": 4, "judged": False,
                                                     "target": {"spec": "other-install"}}],
                                      smoke=dict(host.smoke, intervals={
                                          "acceptance_rate": {"low": 0.2, "high": 0.4}}))])
    text = metrics_text(run)
    assert '\\"' in text and "\\n" in text  # escaped as the format requires
    found = samples(text)
    assert value(found, "fleetcheck_served_info", pid="3", model=odd, drafter="",
                 method="") == 1
    # a server of another install on the host is named in the results, not judged here
    assert [s.labels["pid"] for s in found["fleetcheck_served_info"]] == ["3"]
    assert value(found, "fleetcheck_smoke_acceptance_rate_lower", host=host.name) == 0.2
    assert value(found, "fleetcheck_smoke_acceptance_rate_upper", host=host.name) == 0.4


def test_run_timestamp_and_duration():
    run = RunResult(started_at="2026-12-04T10:00:00+00:00", inventory="i", playbook="p",
                    finished_at="2026-12-04T10:00:07+00:00", complete=True, duration_s=7.25)
    found = samples(metrics_text(run))
    assert value(found, "fleetcheck_last_run_timestamp_seconds") == 1796378407.0
    assert value(found, "fleetcheck_run_duration_seconds") == 7.25
    assert value(found, "fleetcheck_run_complete") == 1


def test_written_atomically_and_replaced_whole(tmp_path):
    path = tmp_path / "textfile" / "fleetcheck.prom"
    write_metrics(make_run(3), str(path))
    first = path.read_text()
    write_metrics(make_run(1, hostile=False), str(path))
    second = path.read_text()
    assert first != second and "gpu002" in first and "gpu002" not in second
    assert os.listdir(path.parent) == ["fleetcheck.prom"]  # no temp file left behind


def test_run_metrics_on_the_sshd_fleet(tmp_path, fleet, real_venvs):
    old = fleet.add("gpu-old", mounts={ENV: real_venvs["0.20.1"]})
    new = fleet.add("gpu-new", mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, [old, new])}}
    metrics = tmp_path / "out" / "fleetcheck.prom"
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--metrics", str(metrics))
    assert run.code == 1, run.stderr
    assert "metrics: %s" % metrics in run.stdout
    found = samples(metrics.read_text())
    for check in ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop"):
        assert value(found, "fleetcheck_check_status", host="gpu-old", check=check,
                     status="fail") == 1
        assert value(found, "fleetcheck_check_status", host="gpu-old", check=check,
                     status="pass") == 0
        assert value(found, "fleetcheck_check_status", host="gpu-new", check=check,
                     status="pass") == 1
    site = run.host("gpu-new")["vllm"]["site_packages"]
    assert value(found, "fleetcheck_vllm_build_info", host="gpu-new", install=site,
                 version="0.33.0", commit="4ba787ec9") == 1
    assert value(found, "fleetcheck_vllm_build_info", host="gpu-old", version="0.20.1",
                 commit="132765e35") == 1
    assert value(found, "fleetcheck_run_duration_seconds") == run.results["duration_s"]
    assert value(found, "fleetcheck_last_run_timestamp_seconds") > 1.7e9


def test_metrics_cannot_go_to_stdout(tmp_path):
    from fleetcheck.cli import main
    assert main(["judge", "--metrics", "-", "--json", str(tmp_path / "r.json"),
                 str(tmp_path / "none.json")]) == 2


def test_judge_metrics_hold_every_host_even_unreachable(tmp_path):
    """`judge --metrics`: an Ansible --tree result for an unreachable host is that host's
    result, and its metrics say so."""
    from fleetcheck.cli import main
    tree = tmp_path / "gpu-7.json"
    tree.write_text('{"unreachable": true, "msg": "ssh: connect to host gpu-7: refused"}')
    metrics = tmp_path / "judged.prom"
    code = main(["judge", str(tree), "--json", str(tmp_path / "r.json"), "--no-html",
                 "--metrics", str(metrics)])
    assert code == 3
    found = samples(metrics.read_text())
    assert value(found, "fleetcheck_host_status", host="gpu-7", status="unreachable") == 1
    assert value(found, "fleetcheck_check_status", host="gpu-7", check="dflash-swa",
                 status="skip") == 1
    assert "fleetcheck_vllm_build_info" not in found
