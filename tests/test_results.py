"""The result model (results.py) as values: a run survives its JSON file unchanged, a
host's status is the worst of its checks, the exit code follows the documented table,
the summary counts what is there, the writer leaves no temporary file, and merged runs
keep each host once, in order, with its later result."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from fleetcheck.build_details import BuildDetails, ExpectedValue, FoundBuild, SameBuild
from fleetcheck.results import (NOT_RUN, SCHEMA_VERSION, CheckResult, Evidence, HostError,
                                HostResult, RunResult, VllmInfo, dump_json, host_status,
                                load_json, merge_runs)
from fleetcheck.status import Status
from results_factory import make_run

pytestmark = pytest.mark.unit


def check(status: str, cid: str = "c") -> CheckResult:
    return CheckResult(id=cid, title=cid, status=status, message=status)


def host(name: str, status: str, error: HostError | None = None) -> HostResult:
    return HostResult(name=name, address=name, groups=[], status=status, error=error,
                      checks=[check(status if status in ("pass", "fail", "warn") else "skip")])


def run_of(*hosts: HostResult, complete: bool = True, started: str = "2026-01-01T00:00:00",
           finished: str | None = "2026-01-01T00:01:00") -> RunResult:
    return RunResult(started_at=started, inventory="inv.yaml", playbook="pb.yaml",
                     finished_at=finished, complete=complete, hosts=list(hosts))


def test_a_run_survives_its_json_file_unchanged(tmp_path):
    run = make_run(30)  # unreachable, failing and passing hosts, hostile strings
    hosts = list(run.hosts)
    two = hosts[2]
    read = replace(two.checks[0], evidence=(*two.checks[0].evidence,
                                            Evidence("vllm/a.py", None, "no line", "read")))
    hosts[2] = replace(two, checks=(read, *two.checks[1:]))
    hosts[3] = replace(hosts[3], analysis="shared with gpu000.dc1")
    hosts[4] = replace(hosts[4], vllm=replace(hosts[4].vllm, other_installs=[
        {"site_packages": "/usr/lib/python3/dist-packages"}]))
    run = replace(run, hosts=hosts, not_finished=["gpu999"])
    path = str(tmp_path / "out" / "results.json")
    dump_json(run, path)
    loaded = load_json(path)
    assert loaded.hosts == run.hosts
    assert (loaded.started_at, loaded.finished_at, loaded.inventory, loaded.playbook,
            loaded.complete, loaded.not_finished, loaded.duration_s) == \
        (run.started_at, run.finished_at, run.inventory, run.playbook, run.complete,
         run.not_finished, run.duration_s)
    assert os.listdir(tmp_path / "out") == ["results.json"]  # no temporary file is left


def test_the_file_is_one_host_per_line_and_carries_its_summary(tmp_path):
    run = make_run(5, hostile=False)
    path = str(tmp_path / "results.json")
    dump_json(run, path)
    lines = open(path, encoding="utf-8").read().splitlines()
    assert len(lines) == 1 + 5 + 1 and lines[-1] == "]}"
    data = json.loads("\n".join(lines))
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["summary"] == run.summary() and data["summary"]["hosts"] == 5
    assert [h["name"] for h in data["hosts"]] == [h.name for h in run.hosts]


def test_a_file_of_another_schema_is_refused_with_its_name(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema_version": 0, "started_at": "x", "hosts": []}))
    with pytest.raises(ValueError) as caught:
        load_json(str(path))
    assert str(path) in str(caught.value) and "schema_version 0" in str(caught.value)


@pytest.mark.parametrize("statuses, error, expected", [
    (["pass", "skip"], None, "pass"),
    (["skip", "skip"], None, "pass"),
    (["pass", "warn"], None, "warn"),
    (["warn", "error", "pass"], None, "error"),
    (["error", "fail", "warn"], None, "fail"),
    ([], None, "error"),  # a host with no verdict at all passed nothing
    (["skip"], HostError("unreachable", "refused"), "unreachable"),
    (["skip"], HostError("timeout", "deadline"), "error"),
])
def test_a_host_takes_the_worst_status_of_its_checks(statuses, error, expected):
    assert host_status([check(s) for s in statuses], error) == expected


@pytest.mark.parametrize("statuses, complete, code", [
    (["pass", "warn"], True, 0),
    (["pass", "fail", "unreachable"], True, 1),  # a failure outranks an unreachable host
    (["pass", "unreachable"], True, 3),
    (["pass", "error"], True, 3),
    (["pass"], False, 3),  # an interrupted run proves nothing about the hosts left
])
def test_exit_codes(statuses, complete, code):
    hosts = [host("h%d" % i, s) for i, s in enumerate(statuses)]
    assert run_of(*hosts, complete=complete).exit_code() == code


def test_summary_counts_hosts_and_checks_and_says_when_the_fleet_is_ready():
    hosts = [host("a", "pass"), host("b", "warn"),
             host("c", "unreachable", HostError("unreachable", "refused"))]
    summary = run_of(*hosts).summary()
    assert summary["hosts"] == 3
    assert summary["by_status"] == {"pass": 1, "fail": 0, "warn": 1, "error": 0,
                                    "unreachable": 1}
    assert summary["checks"] == {"c": {"pass": 1, "fail": 0, "warn": 1, "error": 0, "skip": 1,
                                       "waived": 0, "not_run": 0}}
    never = host("d", "unreachable", HostError("unreachable", "refused"))
    never = replace(never, checks=[replace(never.checks[0], details={NOT_RUN: True})])
    assert run_of(*hosts, never).summary()["checks"]["c"] == {
        "pass": 1, "fail": 0, "warn": 1, "error": 0, "skip": 1, "waived": 0, "not_run": 1}
    assert summary["ready"] is False
    assert run_of(*hosts[:2]).summary()["ready"] is True
    assert run_of(*hosts[:2], complete=False).summary()["ready"] is False
    assert run_of().summary()["ready"] is False  # no host: nothing is ready


def test_merge_keeps_every_host_once_in_order_with_its_later_result():
    first = replace(run_of(host("a", "fail"), host("b", "pass"), started="2026-01-01T00:00:05",
                           finished="2026-01-01T00:02:00"), duration_s=10.0)
    second = replace(run_of(host("c", "pass"), host("a", "pass"), complete=False,
                            started="2026-01-01T00:00:01", finished="2026-01-01T00:01:00"),
                     duration_s=20.0, not_finished=["d"])
    merged = merge_runs([first, second], ["dc1.json", "dc2.json"])
    assert [(h.name, h.status) for h in merged.hosts] == [("b", "pass"), ("c", "pass"),
                                                          ("a", "pass")]
    assert merged.inventory == "dc1.json + dc2.json"
    assert (merged.started_at, merged.finished_at) == ("2026-01-01T00:00:01",
                                                       "2026-01-01T00:02:00")
    assert merged.complete is False and merged.not_finished == ("d",)
    assert merged.duration_s == 20.0 and merged.exit_code() == 3


def test_merged_runs_without_a_finish_time_have_none():
    merged = merge_runs([run_of(host("a", "pass"), finished=None)], ["one"])
    assert merged.finished_at is None and merged.exit_code() == 0


def test_the_writer_reuses_a_hosts_line_only_while_it_is_the_same_object(tmp_path):
    from fleetcheck.results import ResultsWriter
    run = run_of(host("a", "pass"))
    writer = ResultsWriter(str(tmp_path / "r.json"))
    writer.write(run)
    writer.write(replace(run, hosts=[replace(run.hosts[0], status="fail",
                                             checks=[check("fail")])]))
    assert load_json(str(tmp_path / "r.json")).hosts[0].status == "fail"


def test_vllm_info_and_errors_round_trip_as_json_objects(tmp_path):
    info = VllmInfo(version="0.33.0+cu129", metadata_version="0.33.0", commit="4ba787ec9",
                    commit_source="_version.py", found_by="running server (port 8000)")
    broken = HostResult(name="x", address="10.0.0.1", groups=["dc1"], status="error",
                        error=HostError("protocol", "answer is not the probe's JSON"),
                        vllm=info, checks=[check("skip")])
    dump_json(run_of(broken), str(tmp_path / "r.json"))
    data = json.load(open(tmp_path / "r.json", encoding="utf-8"))["hosts"][0]
    assert data["error"] == {"kind": "protocol", "message": "answer is not the probe's JSON"}
    assert data["vllm"]["found_by"] == "running server (port 8000)"
    assert load_json(str(tmp_path / "r.json")).hosts == (broken,)


def test_the_container_object_is_written_only_for_a_container_and_read_back(tmp_path):
    placed = {"engine": "ctr", "id": "vllm-0-main", "containerd_namespace": "k8s.io",
              "containerd_address": "/run/containerd/containerd.sock", "k8s_pod": "vllm-0",
              "k8s_container": "vllm"}
    inside = HostResult(name="node/vllm-0/vllm", address="10.0.0.2", groups=[], status="pass",
                        checks=[check("pass")], container=placed)
    outside = HostResult(name="box", address="10.0.0.3", groups=[], status="pass",
                         checks=[check("pass")])
    dump_json(run_of(inside, outside), str(tmp_path / "r.json"))
    data = json.load(open(tmp_path / "r.json", encoding="utf-8"))["hosts"]
    assert data[0]["container"] == placed and "container" not in data[1]
    assert load_json(str(tmp_path / "r.json")).hosts == (inside, outside)


def test_evidence_says_where_it_was_found_the_same_way_everywhere():
    from fleetcheck.results import Evidence
    assert Evidence("vllm/a.py", 12, "x = 1", "read").as_line() == "vllm/a.py:12: [read] x = 1"
    assert Evidence("vllm/_C.abi3.so", None, "missing").as_line() == "vllm/_C.abi3.so: missing"
    assert Evidence(None, None, "version: expected ==0.33.0").as_line() == \
        "version: expected ==0.33.0"
    assert Evidence("vllm/a.py", 0, "t").location() == "vllm/a.py:0: "


def test_results_are_values_a_change_is_a_new_result():
    """The results writer reuses a host's encoded line while the host is the same object:
    a result that could change in place would be written stale."""
    one = host("a", "pass")
    with pytest.raises(AttributeError):
        one.status = "fail"
    with pytest.raises(AttributeError):
        one.checks[0].message = "changed"
    with pytest.raises(AttributeError):
        one.checks.append(check("fail"))  # the sequences are tuples
    assert one.checks[0].status is Status.PASS and one.groups == ()


def test_build_expected_details_are_typed_and_survive_the_json_file(tmp_path):
    details = BuildDetails(found=FoundBuild("0.33.0", "vllm/_version.py", "4ba787ec9",
                                            "vllm/_version.py"),
                           version=ExpectedValue("==0.33.0", "--expect-version"),
                           same_build_expected=ExpectedValue(True, "playbook expect:"),
                           version_ok=True, matched=("version 0.33.0 matches ==0.33.0",),
                           same_build=SameBuild(compared=True, group="the fleet", hosts=2,
                                                differing=("b",), majority="x", ok=True))
    built = CheckResult("build-expected", "Expected build", "pass", "ok", details=details)
    dump_json(run_of(replace(host("a", "pass"), checks=[built])), str(tmp_path / "r.json"))
    written = json.load(open(tmp_path / "r.json", encoding="utf-8"))["hosts"][0]["checks"][0]
    assert list(written["details"]) == ["expected", "found", "problems", "matched",
                                        "version_ok", "same_build"]
    assert written["details"]["same_build"] == {"group": "the fleet", "hosts": 2,
                                                "differing": ["b"], "majority": "x",
                                                "compared": True, "ok": True}
    loaded = load_json(str(tmp_path / "r.json")).hosts[0].checks[0]
    assert loaded.details == details and loaded.details.label() == \
        "version ==0.33.0, same build as its group"
