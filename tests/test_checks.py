"""Verdict logic on recorded facts (pyinfra-style fixtures: probe output in, verdicts out).

The fixtures are the probe's real answers for pip installs of the vllm 0.20.1 and 0.33.0
wheels; changing the probe's fact format shows up here without any host."""

from __future__ import annotations

import copy

import pytest

from fleetcheck.checks.fixes import judge_fix
from fleetcheck.checks.version import commit_of, install_kind, version_suggests, vllm_info
from fleetcheck.playbook import load_playbook
from fleetcheck.results import CheckResult, HostError, host_status

from probe_helpers import facts_of, recorded

CHECKS = {c.id: c for c in load_playbook().checks}


@pytest.mark.parametrize("version, expected", [
    ("0.20.1", {"dflash-layer-offset": "fail", "dflash-swa": "fail", "dflash-cache-drop": "fail"}),
    ("0.33.0", {"dflash-layer-offset": "pass", "dflash-swa": "pass", "dflash-cache-drop": "pass"}),
])
def test_recorded_release_facts(version, expected):
    facts = facts_of(recorded(version))
    info = vllm_info(facts)
    assert info.version == version
    for check_id, status in expected.items():
        result = judge_fix(CHECKS[check_id], facts, info.version)
        assert result.status == status, (check_id, result.message)
        assert result.evidence and all(e.file for e in result.evidence), check_id
        assert result.details["version_agrees"] is True


def test_version_disagreement_is_said():
    facts = facts_of(recorded("0.33.0"))
    result = judge_fix(CHECKS["dflash-layer-offset"], facts, "0.20.1")
    assert result.status == "pass"
    assert result.details["version_agrees"] is False
    assert "version 0.20.1 suggests not fixed" in result.message


def test_probe_errors_turn_a_verdict_into_error():
    facts = copy.deepcopy(recorded("0.33.0"))
    facts["signatures"]["dflash-swa"]["errors"] = ["finder x: vllm/a.py: Permission denied"]
    result = judge_fix(CHECKS["dflash-swa"], facts_of(facts), "0.33.0")
    assert result.status == "error" and "Permission denied" in result.message


def test_commit_sources_in_order_of_trust():
    facts = copy.deepcopy(recorded("0.33.0"))
    assert commit_of(facts_of(facts)) == ("4ba787ec9", "_version.py")
    facts["install"]["dist_infos"][0]["direct_url"] = {
        "url": "https://example.invalid/vllm.git",
        "vcs_info": {"vcs": "git", "commit_id": "3cfc8f8b7aa0d5a1c3e2f1b0c9d8e7f6a5b4c3d2"}}
    assert commit_of(facts_of(facts)) == ("3cfc8f8b7aa0d5a1c3e2f1b0c9d8e7f6a5b4c3d2",
                                          "direct_url.json")
    assert install_kind(facts_of(facts).install.dist_infos[0]).startswith("vcs")
    facts["install"]["dist_infos"][0]["direct_url"] = None
    facts["version_file"].update(commit_id=None, version="0.1.dev16016+g3cfc8f8b7")
    assert commit_of(facts_of(facts)) == ("3cfc8f8b7", "version")


@pytest.mark.parametrize("version, fixed_in, expected", [
    ("0.33.0", "0.22.0", "fixed"), ("0.20.1", "0.22.0", "not fixed"),
    ("0.22.0", "0.22.0", "fixed"), ("0.1.dev16016+g3cfc8f8b7", "0.22.0", None),
    ("0.26.0+cu129", "0.26.0", "fixed"), (None, "0.22.0", None),
])
def test_version_suggestion(version, fixed_in, expected):
    assert version_suggests(version, fixed_in) == expected


def test_host_status_takes_the_worst_check():
    mk = lambda s: CheckResult(id=s, title=s, status=s, message="")
    assert host_status([mk("pass"), mk("warn")], None) == "warn"
    assert host_status([mk("pass"), mk("error"), mk("fail")], None) == "fail"
    assert host_status([mk("skip"), mk("pass")], None) == "pass"
    assert host_status([], HostError("unreachable", "x")) == "unreachable"
    assert host_status([], HostError("auth", "x")) == "error"


@pytest.mark.parametrize("metadata, version_file, agree", [
    ("0.33.0", "0.33.0", True), ("0.33.0+cu129", "0.33.0", True),
    ("0.20.1+precompiled", "0.20.1", True), ("0.1.dev16016+g3cfc8f8b7.precompiled",
                                             "0.1.dev16016+g3cfc8f8b7", True),
    ("0.33.0", "0.20.1", False), ("0.1.dev16016+g3cfc8f8b7", "0.1.dev16016+gdeadbeef", False),
])
def test_versions_agree_beyond_known_suffixes(metadata, version_file, agree):
    from fleetcheck.checks.integrity import versions_agree
    assert versions_agree(metadata, version_file) is agree


def test_metadata_disagreements_are_named():
    from fleetcheck.checks.integrity import check_metadata
    facts = copy.deepcopy(recorded("0.33.0"))
    assert check_metadata(facts_of(facts)).status == "pass"
    facts["install"]["dist_infos"][0]["version"] = "0.32.0"
    facts["install"]["dist_infos"][0]["direct_url"] = {
        "url": "https://example.invalid/vllm.git", "vcs_info": {"commit_id": "ffff" * 10}}
    result = check_metadata(facts_of(facts))
    texts = " | ".join(e.text for e in result.evidence)
    assert result.status == "fail"
    assert "__version__ 0.33.0 but METADATA says 0.32.0" in texts
    assert "__commit_id__ g4ba787ec9 but direct_url.json says commit ffff" in texts
    facts["version_file"]["version"] = "dev"
    assert "'dev': suspect build" in " ".join(e.text for e in
                                              check_metadata(facts_of(facts)).evidence)


@pytest.mark.parametrize("name, stash", [
    ("~llm", True), ("~-lm", True), ("~llm-0.20.1.dist-info", True), ("~LLM", True),
    ("vllm", False), ("~orch", False), ("llm", False), ("~llmx", False),
])
def test_pip_stash_names(name, stash):
    from fleetcheck.probe.install import is_pip_stash
    assert is_pip_stash(name) is stash


@pytest.mark.parametrize("version, fixed_in, expected", [
    ("0.33.0rc1", "0.33.0", "not fixed"),  # a release candidate comes before its release
    ("0.33.0rc1", "0.32.0", "fixed"),
    ("0.22.0.post1", "0.22.0", "fixed"),
    ("0.33", "0.33.0", "fixed"),  # PEP 440: 0.33 == 0.33.0
    ("0.34.0.dev5+g3cfc8f8b7", "0.22.0", None),  # a dev build says nothing
    ("0.33.0+precompiled.cu129", "0.33.0", "fixed"),
    ("dev", "0.22.0", None), ("0.33.0", None, None),
])
def test_version_suggestion_orders_as_pep_440(version, fixed_in, expected):
    assert version_suggests(version, fixed_in) == expected


@pytest.mark.parametrize("metadata, version_file, agree", [
    ("0.33", "0.33.0", True), ("0.33.0rc1", "0.33.0", False),
    ("0.33.0.post1", "0.33.0", False), ("0.33.0+cpu", "0.33.0+CPU", True),
    ("0.1.dev1+gabc.cu129", "0.1.dev1+gabc", True), ("dev", "dev", True), ("dev", "0.1", False),
])
def test_versions_agree_as_pep_440(metadata, version_file, agree):
    from fleetcheck.checks.integrity import versions_agree
    assert versions_agree(metadata, version_file) is agree


def record_facts(**record) -> dict:
    empty = {"count": 0, "files": []}
    return {"integrity": {"record": dict(
        {"dist_info": "/x/vllm-0.33.0.dist-info", "rows": 10, "checked": 9, "hashed": 3,
         "hashed_bytes": 3 * 2**20 // 2, "deep": False, "unverifiable_rows": 1,
         "missing": empty, "size": empty, "hash": empty, "unreadable": empty}, **record)}}


@pytest.mark.parametrize("record, words", [
    ({}, "every file matches RECORD: 9 files checked for size (every file RECORD gives a size "
         "and hash for), 3 of them also by sha256 (1.5 MiB); 1 other row of RECORD has no "
         "hash to check (RECORD itself, compiled bytecode, rows uv healed)"),
    ({"checked": 1, "hashed": 1, "hashed_bytes": 700, "deep": True, "unverifiable_rows": 2},
     "1 file checked for size (every file RECORD gives a size and hash for), all of them also "
     "by sha256 (700 bytes, --deep); 2 other rows of RECORD have no hash to check"),
    ({"hashed_bytes": 5 * 2**30, "unverifiable_rows": 0}, "3 of them also by sha256 (5.0 GiB)"),
])
def test_the_record_check_says_what_it_checked(record, words):
    """Every row RECORD can be checked by is checked for size; the message says so, how
    many were hashed too, and why the other rows were not, in counted words."""
    from fleetcheck.checks.integrity import check_record
    result = check_record(facts_of(record_facts(**record)).integrity)
    assert result.status == "pass" and words in result.message, result.message
    assert "rows checked" not in result.message and "1 rows" not in result.message


@pytest.mark.parametrize("modules, torch_installed, words", [
    (["vllm._C"], False, "the compiled module loads (torch is not installed, and none needed it)"),
    (["vllm._C", "vllm._moe_C"], True, "all 2 compiled modules load (torch 2.9.0)"),
])
def test_the_import_check_counts_in_words(modules, torch_installed, words):
    from fleetcheck.checks.integrity import check_import
    facts = facts_of({"integrity": {"import": {
        "interpreter": "/opt/env/bin/python", "expected": modules,
        "modules": [{"module": m, "ok": True} for m in modules],
        "torch": {"ok": torch_installed, "detail": "2.9.0" if torch_installed else
                  "ModuleNotFoundError: No module named 'torch'"},
        "torch_installed": torch_installed}}})
    result = check_import(facts.integrity, True)
    assert result.status == "pass" and result.message == words, result.message


def test_a_version_file_that_assigns_no_string_is_judged_not_a_crash():
    """_version.py may assign any literal; a tuple holds no commit, and install-metadata
    names it instead of the host ending as a fleetcheck bug."""
    from fleetcheck.checks.integrity import check_metadata
    from fleetcheck.checks.version import commit_of
    facts = copy.deepcopy(recorded("0.33.0"))
    facts["version_file"].update(version=[0, 33], commit_id=None)
    facts["install"]["dist_infos"][0].pop("direct_url", None)
    facts["install"]["dist_infos"][0]["version"] = "0.33.0"
    assert commit_of(facts_of(facts)) == (None, None)
    result = check_metadata(facts_of(facts))
    assert result.status == "fail", result
    assert "suspect build" in " ".join(e.text for e in result.evidence), result
