"""One fix analysis per build, proved by sha256 on every other host of the build.

Over real SSH: hosts holding the same real vllm 0.33.0 install share the lead's analysis;
a host with the same RECORD but an edited fix file, or an extra file where the analysis
looks, analyses its own files; every host's checks are exactly those of a run with
--no-shared-analysis. Locally: the controller refuses what a lead cannot prove."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck import shared_analysis
from fleetcheck.playbook import load_playbook
from fleetcheck.probe.shared_bytes import shipment, verify
from fleetcheck.probe.signatures import run_signature
from fleetcheck.shared_analysis import (ALONE, QUESTION, SharedAnalysis, ShipmentError,
                                        analyse_shipment, unpack)
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.connectors.base import Deadline
from probe_helpers import (STATIC_PLAYBOOK, ENV, FIXED_LINE, RUNNER, UNFIXED_LINE, assert_holds, comparable,
                           facts_of, linked_copy, rewrite, site_packages)
from waits import wait_for

pytestmark = pytest.mark.unit

@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory, fleet_factory, real_venvs):
    base = tmp_path_factory.mktemp("shared")
    fixed = real_venvs["0.33.0"]
    edited = linked_copy(fixed, str(base / "edited"))
    path = os.path.join(site_packages(edited), RUNNER)
    with open(path, "rb") as handle:
        data = handle.read()
    assert FIXED_LINE in data
    rewrite(path, data.replace(FIXED_LINE, UNFIXED_LINE))
    extra = linked_copy(fixed, str(base / "extra"))
    with open(os.path.join(site_packages(extra), "vllm/v1/worker/extra_runner.py"), "w") as f:
        f.write("layer_ids = cfg.get('target_layer_ids')\n")
    fleet = fleet_factory(str(base / "fleet"))
    try:
        mounts = [("a1", fixed), ("a2", fixed), ("a3", fixed), ("edited", edited),
                  ("extra", extra), ("old", real_venvs["0.20.1"])]
        hosts = [fleet.add(name, mounts={ENV: source + ":ro"}) for name, source in mounts]
        fleet.start()
        inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, hosts)}}
        # the static finders: what a build shares (the executor's runs are every host's own)
        common = ("--known-hosts", fleet.known_hosts, "--no-smoke", "--playbook",
                  STATIC_PLAYBOOK)
        runs = {}
        for label, args in (("shared-j1", ("-j", "1")), ("own", ("-j", "1", "--no-shared-analysis")),
                            ("shared-j6", ("-j", "6"))):
            directory = base / label
            directory.mkdir()
            runs[label] = run_fleetcheck(directory, inventory, *common, *args)
            assert runs[label].results is not None, runs[label].stderr
        yield runs
    finally:
        fleet.stop()


def test_hosts_of_one_build_share_the_lead_analysis(shared_runs):
    run = shared_runs["shared-j1"]
    assert run.host("a1")["analysis"] is None  # the lead analyses its own files
    for name in ("a2", "a3"):
        note = run.host(name)["analysis"]
        assert note.startswith("fix analysis shared with a1: "), note
        assert "files and" in note
    assert run.host("old")["analysis"] is None  # another build: its own lead


def test_a_host_whose_bytes_differ_analyses_its_own(shared_runs):
    run = shared_runs["shared-j1"]
    assert RUNNER + " differs from the build's" in run.host("edited")["analysis"]
    assert "vllm/v1/worker" in run.host("extra")["analysis"]
    assert "not the build's" in run.host("extra")["analysis"]
    # and its own analysis sees its own edit: the unfixed line is the evidence
    texts = [e["text"] for e in run.check("edited", "dflash-layer-offset")["evidence"]]
    assert run.check("a1", "dflash-layer-offset")["status"] == "pass"
    assert run.check("edited", "dflash-layer-offset")["status"] != "pass", texts
    assert any("target_layer_ids" in t and "+ 1" not in t for t in texts), texts


@pytest.mark.parametrize("label", ["shared-j1", "shared-j6"])
def test_shared_results_equal_every_host_analysing_its_own(shared_runs, label):
    own = shared_runs["own"]
    run = shared_runs[label]
    assert {h["name"]: comparable(h) for h in run.results["hosts"]} == \
        {h["name"]: comparable(h) for h in own.results["hosts"]}
    assert all(h["analysis"] is None for h in own.results["hosts"])
    # in parallel any host may lead its build (an edited one too: then the others
    # analyse their own files); whichever did, the checks above are the same
    for host in run.results["hosts"]:
        assert host["analysis"] is None or host["analysis"].startswith(
            ("fix analysis shared with", "fix analysis run on this host: ")), host


# --- the controller's side, on a synthetic install ---------------------------------


def lead_answer(tmp_path, files=None):
    """What a lead's probe sends: its own analysis and the bytes it read."""
    root = write_install(str(tmp_path / "venv"), "0.33.0", files or FIXED)
    signatures = load_playbook(STATIC_PLAYBOOK).probe_signatures()
    cache, walks = {}, {}
    facts = {s["id"]: run_signature(root, s, cache, walks)
             for s in json.loads(json.dumps(signatures))}
    return root, signatures, {"signatures": facts, "shared_read": shipment(cache, walks)}


def question(build="ab" * 32, root="/opt/ml-env/site") -> bytes:
    return QUESTION + json.dumps({"build": build, "code_root": root}).encode()


def test_follower_verifies_against_the_controllers_own_analysis(tmp_path):
    root, signatures, answer = lead_answer(tmp_path)
    shared = SharedAnalysis(signatures)
    deadline = Deadline(60)
    assert shared.answer("lead", question(), deadline) == b'{"role": "lead"}\n'
    lead_facts = json.loads(json.dumps(answer["signatures"]))
    assert shared.complete("lead", facts_of(answer))[1] is None
    reply = json.loads(shared.answer("follower", question(), deadline))
    assert reply["role"] == "verify" and reply["files"] and reply["walks"]
    hashes, why = verify(root, reply)
    assert why is None and set(hashes) == set(reply["files"])
    follower = {"signatures": None, "shared_analysis": {"files": len(hashes), "listings": 1}}
    facts, note = shared.complete("follower", facts_of(follower))
    assert note.startswith("fix analysis shared with lead")
    assert_holds(facts.signatures, lead_facts, "signatures")
    # one byte changed in a file the analysis read: the proof fails, naming the file
    rel = sorted(reply["files"])[0]
    with open(os.path.join(root, rel), "ab") as handle:
        handle.write(b"#")
    assert verify(root, reply) == (None, "%s differs from the build's" % rel)


def test_a_lead_whose_analysis_disagrees_with_its_bytes_is_not_shared(tmp_path):
    _, signatures, answer = lead_answer(tmp_path)
    for check in answer["signatures"].values():
        check["findings"] = {}  # a lying (or broken) lead: "nothing found"
    shared = SharedAnalysis(signatures)
    shared.answer("lead", question(), Deadline(60))
    shared.complete("lead", facts_of(answer))
    assert shared.answer("follower", question(), Deadline(60)) == ALONE


def test_unsafe_or_inconsistent_shipments_are_refused(tmp_path):
    import base64
    import zlib

    def pack(header, body=b""):
        raw = json.dumps(header).encode() + b"\n" + body
        return base64.b64encode(zlib.compress(raw)).decode()

    for header, body in [({"files": [["../etc/passwd", 1]], "walks": {}}, b"x"),
                         ({"files": [["/etc/passwd", 1]], "walks": {}}, b"x"),
                         ({"files": [["vllm/a.py", 5]], "walks": {}}, b"x"),
                         ({"files": [["vllm/a.py", 1]], "walks": {}}, b"xy"),
                         ({"files": [], "walks": {"vllm": ["etc/passwd"]}}, b""),
                         ({"files": [], "walks": {"vllm": ["vllm/../../x"]}}, b""),
                         ({"walks": {}}, b"")]:
        with pytest.raises(ShipmentError):
            unpack(pack(header, body))
    for junk in ("not base64 !", base64.b64encode(b"not zlib").decode(), 42):
        with pytest.raises(ShipmentError):
            unpack(junk)
    bomb = base64.b64encode(zlib.compress(b"{}\n" + b"\0" * (65 << 20))).decode()
    with pytest.raises(ShipmentError):
        analyse_shipment(bomb, [], "ab" * 32)


def test_questions_are_checked_and_other_lines_are_not_questions(tmp_path):
    shared = SharedAnalysis([])
    deadline = Deadline(60)
    assert shared.answer("h", b"garbage", deadline) is None
    assert shared.answer("h", QUESTION + b"{not json", deadline) == ALONE
    assert shared.answer("h", question(build="xyz"), deadline) == ALONE
    assert shared.answer("h", question(root=""), deadline) == ALONE


def test_a_hung_lead_costs_its_build_one_wait(monkeypatch):
    monkeypatch.setattr(shared_analysis, "LEAD_WAIT_S", 2.0)
    shared = SharedAnalysis([])
    deadline = Deadline(60)
    assert shared.answer("lead", question(), deadline) == b'{"role": "lead"}\n'
    started = time.monotonic()
    assert shared.answer("first", question(), deadline) == ALONE  # waited, then alone
    assert time.monotonic() - started >= 1.9
    started = time.monotonic()
    assert shared.answer("second", question(), deadline) == ALONE  # sharing ended: no wait
    assert time.monotonic() - started < 1.0


def test_a_failed_lead_hands_over_and_wakes_its_waiters():
    shared = SharedAnalysis([])
    deadline = Deadline(60)
    shared.answer("lead", question(), deadline)
    replies = []
    waiter = threading.Thread(target=lambda: replies.append(
        shared.answer("waiting", question(), deadline)))
    waiter.start()
    # the waiter has asked (past the lock, so it waits on the lead) before the lead fails
    wait_for(lambda: "waiting" in shared._asked, 30, "the second host waiting on the lead")
    shared.abandon("lead")
    waiter.join(5)
    assert replies == [ALONE]
    assert shared.answer("next", question(), deadline) == b'{"role": "lead"}\n'



def test_the_report_says_whose_analysis_a_host_shares(shared_runs):
    run = shared_runs["shared-j1"]
    assert "fix analysis shared with a1: " in run.html
    assert "gpu_model_runner.py differs from the build&#39;s" in run.html


def test_a_shipment_missing_a_file_the_analysis_reads_is_refused(tmp_path):
    root, signatures, _ = lead_answer(tmp_path)
    cache, walks = {}, {}
    for signature in json.loads(json.dumps(signatures)):
        run_signature(root, signature, cache, walks)
    examined = sorted(rel for rel, entry in cache.items() if entry.examined)
    del cache[examined[0]]  # a lead that leaves out a file holding a needle
    with pytest.raises(ShipmentError, match="did not ship"):
        analyse_shipment(shipment(cache, walks), signatures, "ab" * 32)


def test_a_followed_helper_ships_and_the_modules_it_was_not_in_ship_as_absent(tmp_path):
    """Following a helper reads its module (tried as a/b.py, then a/b/__init__.py): the
    controller's analysis of the shipment is the lead's, and a follower proves the tried
    paths are still absent."""
    files = dict(FIXED)
    files["vllm/v1/worker/gpu_model_runner.py"] = (
        "from vllm.helpers.ids import shift\n"
        "def aux(hf_config):\n"
        "    return shift(hf_config.dflash_config['target_layer_ids'])\n")
    files["vllm/helpers/ids/__init__.py"] = "def shift(ids):\n    return [i + 1 for i in ids]\n"
    root, signatures, answer = lead_answer(tmp_path, files)
    assert answer["signatures"]["dflash-layer-offset"]["findings"].keys() == {"layer_ids:1"}
    shared = SharedAnalysis(signatures)
    deadline = Deadline(60)
    shared.answer("lead", question(), deadline)
    assert shared.complete("lead", facts_of(answer))[1] is None
    reply = json.loads(shared.answer("follower", question(), deadline))
    assert reply["role"] == "verify", "the controller's analysis differs from the lead's"
    assert "vllm/helpers/ids.py" in reply["absent"]
    assert "vllm/helpers/ids/__init__.py" in reply["files"]
    assert verify(root, reply)[1] is None
    with open(os.path.join(root, "vllm/helpers/ids.py"), "w") as handle:
        handle.write("def shift(ids):\n    return ids\n")
    assert verify(root, reply) == (None, "vllm/helpers/ids.py exists here, not in the build")
