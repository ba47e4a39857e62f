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
from fleetcheck.smoke_settings import SmokeSettings

from probe_helpers import facts_of, recorded

pytestmark = pytest.mark.unit

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
    assert result.details["version_suggests"] == "not fixed"
    assert "version 0.20.1 suggests not fixed" in result.message  # and the message says so


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


@pytest.mark.parametrize("top, leftovers, status, words", [
    ([], {"tmp_count": 0, "tmp_dirs": [], "dirs_listed": 591}, "pass",
     "no pip stash (~llm) or uv .tmp dir or file in /site (its top level and the 591 directories "
     "RECORD names files in)"),
    ([], None, "pass", "its top level (RECORD unread: not the package directories)"),
    ([".tmpA1b2C3"], {"tmp_count": 22, "tmp_dirs": ["vllm/ops/.tmp%02d" % i for i in range(20)],
                      "dirs_listed": 5}, "fail",
     "uv's temporary directories (.tmpA1b2C3, vllm/ops/.tmp00, vllm/ops/.tmp01, "),
    ([], {"tmp_count": 22, "tmp_dirs": ["vllm/ops/.tmp%02d" % i for i in range(20)],
          "dirs_listed": 5}, "fail", "vllm/ops/.tmp19 and 2 more) left in /site: an install "
                                     "was killed while writing vllm"),
])
def test_leftovers_at_the_top_and_inside_the_package(top, leftovers, status, words):
    """uv's .tmp dirs found inside the package count as those at the top do; the message
    says how far it looked, and how many it found beyond those listed. A probe's answer
    without tmp_files (older probe) reads as no files."""
    from fleetcheck.checks.integrity import check_leftovers
    facts = facts_of({"install": {"site_packages": "/site", "tmp_dirs": top, "stash_dirs": []},
                      "integrity": {"leftovers": leftovers}})
    result = check_leftovers(facts)
    assert result.status == status and words in result.message, result.message
    if status == "fail":
        assert [e.file for e in result.evidence] == ["/site/" + t for t in
                                                     top + leftovers["tmp_dirs"]][:12]


def test_uv_temp_files_are_named_apart_from_its_directories():
    """A killed uv 0.13 leaves a .tmpXXXXXX *file* beside the file it was writing: named as
    a file (its own words and evidence), after the directories, with the count beyond
    those listed said once, at the end."""
    from fleetcheck.checks.integrity import check_leftovers
    facts = facts_of({"install": {"site_packages": "/site", "tmp_dirs": [".tmpA1b2C3"],
                                  "tmp_files": [".tmpZ9y8X7"], "stash_dirs": []},
                      "integrity": {"leftovers": {
                          "tmp_count": 5, "tmp_dirs": ["vllm/ops/.tmpD1r000"],
                          "tmp_files": ["vllm/parser/.tmpTNKz4p"], "dirs_listed": 7}}})
    result = check_leftovers(facts)
    assert result.status == "fail"
    assert "uv's temporary directories (.tmpA1b2C3, vllm/ops/.tmpD1r000) and uv's temporary " \
        "files (.tmpZ9y8X7, vllm/parser/.tmpTNKz4p and 3 more) left in /site" in \
        result.message, result.message
    assert [(e.file, e.text) for e in result.evidence] == [
        ("/site/.tmpA1b2C3", "left behind by an interrupted uv install"),
        ("/site/vllm/ops/.tmpD1r000", "left behind by an interrupted uv install"),
        ("/site/.tmpZ9y8X7", "a file an interrupted uv install was writing"),
        ("/site/vllm/parser/.tmpTNKz4p", "a file an interrupted uv install was writing")]
    only_files = facts_of({"install": {"site_packages": "/site", "tmp_dirs": [],
                                       "stash_dirs": []},
                           "integrity": {"leftovers": {
                               "tmp_count": 1, "tmp_dirs": [],
                               "tmp_files": ["vllm/parser/.tmpTNKz4p"], "dirs_listed": 7}}})
    said = check_leftovers(only_files)
    assert said.status == "fail" and "directories" not in said.message.split(" left in ")[0]


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


MISFITS = [
    ({"field": "version", "name": "__version__", "line": 3, "type": "list",
      "value": "[0, 33]"}, "__version__ = [0, 33] is a list, not a version string"),
    ({"field": "version", "name": "version", "line": 1, "type": "int", "value": "33"},
     "version = 33 is a number, not a version string"),
    ({"field": "version", "name": "__version__", "line": 2, "type": "tuple",
      "value": "(0, 33, 0)"}, "__version__ = (0, 33, 0) is a tuple, not a version string"),
    ({"field": "commit_id", "name": "__commit_id__", "line": 5, "type": "bytes",
      "value": "b'g4ba787ec9'"}, "__commit_id__ = b'g4ba787ec9' is bytes, not a commit string"),
    ({"field": "version_tuple", "name": "__version_tuple__", "line": 4, "type": "tuple",
      "value": "(0, 33, 1.5)"},
     "__version_tuple__ = (0, 33, 1.5) holds items other than integers and strings"),
]


@pytest.mark.parametrize("misfit, words", MISFITS)
def test_a_version_file_value_no_build_writes_fails_install_metadata(misfit, words):
    """_version.py may assign any literal; one no build writes (a list or a number as the
    version) fails install-metadata with the file, line and value, and never stands in
    for the version or the commit anywhere else."""
    from fleetcheck.checks.integrity import check_metadata
    facts = copy.deepcopy(recorded("0.33.0"))
    field = misfit["field"]
    facts["version_file"].update({field: None, "misfits": [misfit],
                                  "lines": {field: misfit["line"]}})
    facts["install"]["dist_infos"][0].pop("direct_url", None)
    result = check_metadata(facts_of(facts))
    assert result.status == "fail", result
    hits = [e for e in result.evidence if e.text == words + ": suspect build"]
    assert [(e.file, e.line) for e in hits] == [(facts["version_file"]["path"],
                                                 misfit["line"])], result.evidence
    assert "assigns no __version__" not in " ".join(e.text for e in result.evidence)
    if field == "version":
        assert vllm_info(facts_of(facts)).version is None
    if field == "commit_id":
        assert commit_of(facts_of(facts)) == (None, None)


def test_a_version_that_is_no_string_is_a_protocol_error_at_the_seam():
    """The probe sends a misfit, never the value: an answer carrying a list as the version
    did not come from this probe, and the decoder names the field."""
    from fleetcheck.facts_decoder import FactsError, decode_facts
    facts = copy.deepcopy(recorded("0.33.0"))
    facts["version_file"]["version"] = [0, 33]
    with pytest.raises(FactsError, match=r"field version_file\.version: expected a string"):
        decode_facts(facts)


def test_a_check_the_probe_sent_nothing_for_says_so_not_that_vllm_is_missing():
    """With vllm's code found, a check without findings is probe and playbook out of step;
    only a host without an install hears 'no vllm install found'."""
    facts = copy.deepcopy(recorded("0.33.0"))
    del facts["signatures"]["dflash-swa"]
    result = judge_fix(CHECKS["dflash-swa"], facts_of(facts), "0.33.0")
    assert result.status == "error", result
    assert result.message == ("the probe sent no findings for this check (probe and playbook "
                              "out of step?)"), result.message
    half = copy.deepcopy(facts)
    half["install"].update(code_root=None, package_dir=None)
    result = judge_fix(CHECKS["dflash-swa"], facts_of(half), "0.33.0")
    assert result.status == "error" and "no vllm install found" not in result.message
    assert "vllm-0.33.0.dist-info is there but the vllm/ package directory is missing" in \
        result.message, result.message
    none = copy.deepcopy(half)
    none["install"]["dist_infos"] = []
    result = judge_fix(CHECKS["dflash-swa"], facts_of(none), "0.33.0")
    assert result.status == "error" and result.message.startswith(
        "no vllm install found (looked in /root/.cache/fleetcheck/"), result.message


def test_no_file_matching_a_checks_paths_names_the_paths():
    facts = copy.deepcopy(recorded("0.33.0"))
    signature = facts["signatures"]["dflash-cache-drop"]
    signature["findings"] = {}
    facts["executed"]["dflash-cache-drop"]["findings"] = {}
    for entry in signature["files_searched"].values():
        entry.update(count=0, first=[])
    result = judge_fix(CHECKS["dflash-cache-drop"], facts_of(facts), "0.33.0")
    globs = sorted({p for f in CHECKS["dflash-cache-drop"].finders.values() for p in f["files"]})
    assert globs and not any("{" in p for p in globs), globs
    assert [e.text for e in result.evidence] == [
        "no file matches this check's paths: " + ", ".join(globs)], result.evidence
    signature["files_searched"]["decision"].update(count=15, first=["vllm/a.py", "vllm/b.py"])
    result = judge_fix(CHECKS["dflash-cache-drop"], facts_of(facts), "0.33.0")
    assert [e.text for e in result.evidence] == [
        "no matching code in the files searched (15 or more): vllm/a.py, vllm/b.py ..."]


def test_a_record_mismatch_says_what_differs_then_what_to_do_then_the_scope():
    from fleetcheck.checks.integrity import check_record, record_scope
    files = lambda *names: {"count": len(names), "files": [{"file": n} for n in names]}
    facts = facts_of(record_facts(
        size={"count": 1, "files": [{"file": "vllm/a.so", "expected": 8, "actual": 4}]},
        hash=files("vllm/b.py", "vllm/c.py"), missing=files("vllm/d.py")))
    result = check_record(facts.integrity)
    scope = record_scope(facts.integrity.record)
    assert result.status == "fail"
    assert result.message == (
        "install does not match RECORD: 1 file missing, 1 file with a different size, "
        "2 files with a different sha256. Reinstall vllm. Scope: " + scope), result.message
    passed = check_record(facts_of(record_facts()).integrity)
    assert passed.status == "pass" and passed.evidence == (), passed.evidence


@pytest.mark.parametrize("touching, elsewhere, words", [
    (1, 0, "1 install/build process still running against the checked install"),
    (2, 0, "2 install/build processes still running against the checked install"),
    (0, 1, "1 pip/uv/build process installs vllm elsewhere on this box (/opt/other)"),
    (0, 2, "2 pip/uv/build processes install vllm elsewhere on this box (/opt/other)"),
])
def test_running_installs_are_counted_in_words(touching, elsewhere, words):
    from fleetcheck.checks.integrity import check_in_progress
    process = lambda pid, target: {"pid": pid, "cmdline": "pip install vllm", "target": target}
    facts = facts_of({"integrity": {"in_progress": {
        "processes": [process(10 + n, "/opt/ml-env") for n in range(touching)],
        "elsewhere": [process(20 + n, "/opt/other") for n in range(elsewhere)]}}})
    result = check_in_progress(facts.integrity)
    assert result.status == ("fail" if touching else "warn")
    assert [e.text.split(":")[0] for e in result.evidence] == \
        ["pid %d" % (10 + n) for n in range(touching)] + \
        ["pid %d" % (20 + n) for n in range(elsewhere)]
    assert result.message.startswith(words), result.message
    assert "(es)" not in result.message and "(s)" not in result.message
    if touching:  # the fix comes last
        assert result.message.endswith(": check again once the install has finished")


@pytest.mark.parametrize("needing, words", [
    (1, "so 1 compiled module that links libtorch/CUDA could not be loaded (1 loaded fine); "
        "install torch to check it"),
    (2, "so 2 compiled modules that link libtorch/CUDA could not be loaded (1 loaded fine); "
        "install torch to check them"),
])
def test_modules_needing_torch_agree_in_number(needing, words):
    from fleetcheck.checks.integrity import check_import
    error = "libtorch.so: cannot open shared object file: No such file or directory"
    modules = [{"module": "vllm._C%d" % n, "ok": False, "error": error} for n in range(needing)]
    facts = facts_of({"integrity": {"import": {
        "interpreter": "/opt/env/bin/python",
        "expected": ["vllm.cumem"] + [m["module"] for m in modules],
        "modules": [{"module": "vllm.cumem", "ok": True}] + modules,
        "torch": {"ok": False, "detail": "ModuleNotFoundError"}, "torch_installed": False}}})
    result = check_import(facts.integrity, True)
    assert result.status == "skip" and words in result.message, result.message


def test_one_commit_without_its_git_describe_g_everywhere():
    """_version.py's __commit_id__ g4ba787ec9 is commit 4ba787ec9 in the table
    (commit_of) and in install-metadata alike; text that is not g+sha stays as it is."""
    from fleetcheck.checks.integrity import check_metadata
    from fleetcheck.checks.version import bare_commit
    facts = copy.deepcopy(recorded("0.33.0"))
    assert facts["version_file"]["commit_id"] == "g4ba787ec9"
    result = check_metadata(facts_of(facts))
    assert commit_of(facts_of(facts))[0] == "4ba787ec9"
    assert result.status == "pass" and "commit 4ba787ec9 agree" in result.message, result.message
    assert "g4ba787ec9" not in result.message
    facts["install"]["dist_infos"][0]["direct_url"] = {
        "url": "https://example.invalid/vllm.git",
        "vcs_info": {"vcs": "git", "commit_id": "3cfc8f8b7aa0d5a1c3e2f1b0c9d8e7f6a5b4c3d2"}}
    result = check_metadata(facts_of(facts))
    assert result.status == "fail"
    assert [e.text for e in result.evidence] == [
        "__commit_id__ g4ba787ec9 but direct_url.json says commit "
        "3cfc8f8b7aa0d5a1c3e2f1b0c9d8e7f6a5b4c3d2"]
    assert [bare_commit(c) for c in ("g4ba787ec9", "4ba787ec9", "gone", "g123")] == \
        ["4ba787ec9", "4ba787ec9", "gone", "g123"]


@pytest.mark.parametrize("load, words", [
    ({"results": [], "planned": 8, "budget_exhausted": True},
     "no request was sent before the time budget (%gs) ran out" % SmokeSettings.time_budget_s),
    ({"results": [], "planned": 0, "budget_exhausted": False},
     "no request was sent: the load planned 0 requests"),
    ({"results": [{"ok": False, "latency_s": 1.0}], "planned": 1, "budget_exhausted": False},
     "every request failed (1): no error text"),
])
def test_a_load_with_no_answered_request_never_says_none(load, words):
    from fleetcheck.checks.acceptance import judge_smoke
    from fleetcheck.smoke_settings import SmokeSettings
    facts = facts_of({"smoke": {"mode": "attach", "url": "http://127.0.0.1:8000",
                                "metrics_before": "", "metrics_after": "", "load": load}})
    result, _ = judge_smoke(facts.smoke, SmokeSettings(enabled=True))
    assert result.status == "error" and result.message == words, result.message


def test_findings_no_outcome_covers_are_named_with_what_to_do():
    from fleetcheck.checks.fixes import choose_outcome
    from fleetcheck.playbook import FixCheck, Outcome
    check = FixCheck(id="x", title="x", finders={}, outcomes=[
        Outcome(status="pass", message="fixed", when=("fixed",))])
    outcome = choose_outcome(check, {"broken", "odd"})
    assert outcome.status == "fail" and outcome.message == (
        "no outcome of the playbook matched the findings (broken, odd): the playbook needs "
        "an outcome for this case")
    assert "(none)" in choose_outcome(check, set()).message
