"""Verdicts on rewritten copies of the real wheels (tests/mutations.py, the
corpus the mutation benchmark runs): every case of it (about 10 s), and the forms the
issue names, with their evidence. A meaning-keeping rewrite keeps the release's verdict
and never ends in `:?`; a breaking one changes it."""

from __future__ import annotations

import os
import re

import pytest

from fleetcheck.checks.fixes import judge_fix
from fleetcheck.lab.local_probe import probe_tree
from mutations import (LAYER, PENDING, PENDING_REASONS, RUNNER, V2,
                                      MutableRelease, corpus, vacuous)
from fleetcheck.playbook import load_playbook

pytestmark = pytest.mark.downloads

CHECKS = {c.id: c for c in load_playbook().checks}
BY_ID = {m.id: m for m in corpus()}


def findings(facts, check_id: str) -> dict:
    """What running the install's code found for the check (probe/executor.py)."""
    return facts.executed[check_id].findings


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("mutations"))
    return {version: MutableRelease(version, workdir) for version in ("0.33.0", "0.20.1")}


def judged(releases, mutation_id: str):
    mutation = BY_ID[mutation_id]
    with releases[mutation.version].apply(mutation) as root:
        facts = probe_tree(root, [CHECKS[mutation.check].signature()])
    return mutation, facts, judge_fix(CHECKS[mutation.check], facts, None)


def test_the_corpus_covers_every_check_both_ways_on_both_releases():
    cases = corpus()
    assert len(cases) >= 60 and len(BY_ID) == len(cases)
    for check in CHECKS:
        for version in ("0.33.0", "0.20.1"):
            kinds = {m.keeps for m in cases if m.check == check and m.version == version}
            assert kinds == {True, False}, (check, version, kinds)


def test_the_pending_cases_are_named_with_a_reason_and_kept_out_of_the_corpus():
    """PENDING: cases whose verdict waits on a dataflow change, each with what it must
    learn; none of them is run by the corpus (the benchmark stays green)."""
    assert sorted(m.id for m in PENDING) == sorted(PENDING_REASONS)
    assert not set(PENDING_REASONS) & set(BY_ID)
    assert all(reason.strip() for reason in PENDING_REASONS.values())
    assert all(m.kind for m in PENDING)


@pytest.mark.parametrize("mutation_id", sorted(BY_ID))
def test_every_mutation_gives_its_labelled_verdict(releases, mutation_id):
    mutation, facts, result = judged(releases, mutation_id)
    assert result.status == mutation.expected, (mutation.construct, result.message)
    assert not vacuous(mutation, result), result.evidence
    if mutation.keeps and mutation.expected != "warn":  # a known warn is labelled so
        assert not any(label.endswith(":?") for label in findings(facts, mutation.check))


def test_the_pr_40898_form_passes_on_what_both_runners_returned(releases):
    _, facts, result = judged(releases, "offset-pr40898-form")
    assert result.status == "pass", result.message
    assert list(findings(facts, LAYER)) == ["aux_ids:1"]
    returned = [e for e in result.evidence if e.step == "returned"]
    assert {e.file for e in returned} == {RUNNER, V2}
    assert all("returned (2, 10, 18) for target_layer_ids [1, 9, 17]" in e.text
               for e in returned)
    ran = {(e.file, e.text) for e in result.evidence if e.step == "ran"}
    assert (RUNNER, "return tuple(layer_id + 1 for layer_id in layer_ids)") in ran
    # the unshifted return serves the other methods: it did not run for DFlash
    assert (RUNNER, "return tuple(layer_ids)") not in ran


def test_a_runner_that_shifts_for_eagle_but_not_dflash_fails(releases):
    _, facts, result = judged(releases, "offset-eagle-only-shift")
    assert result.status == "fail", result.message
    assert "aux_ids:0" in findings(facts, LAYER)
    assert any(e.file == RUNNER and e.text == "return tuple(layer_ids)"
               for e in result.evidence)


@pytest.mark.parametrize("mutation_id, name", [
    ("offset-module-constant", "_DFLASH_AUX_OFFSET"),
    ("offset-imported-constant", "AUX_OFFSET"),
])
def test_a_named_offset_shows_the_line_that_used_it(releases, mutation_id, name):
    _, _, result = judged(releases, mutation_id)
    assert result.status == "pass", result.message
    assert any(e.step == "ran" and name in e.text for e in result.evidence), result.evidence


GATE_KINDS = ("bool", "in", "compare", "ifexp", "control", "self", "call", "wrapper",
              "nested-helper", "operator", "getattr-method", "property-chain", "allow-list",
              "mention")


def test_every_construct_kind_has_cases_both_ways():
    """Issue 33: a kind (of any check) holds rewrites that keep the fix and rewrites that
    break it among the cases that run (PENDING ones do not), so a verdict that reads a
    spelling shows."""
    kinds: dict = {}
    for m in corpus():
        if m.kind and m.kind != "unknown":  # what cannot be evaluated: warns only
            kinds.setdefault((m.check, m.kind), set()).add(m.expected == "pass")
    lopsided = sorted(key for key, ways in kinds.items() if ways != {True, False})
    assert lopsided == [], lopsided
    assert len(kinds) >= 30, sorted(kinds)


def test_the_block_drop_corpus_has_each_construct_kind_both_ways():
    """Kinds, not cases: each construct the evaluator reads has a rewrite that keeps DFlash
    out of the drop and one that puts it back, and among them rewrites that still name
    DFlash without excluding it, and ones that exclude it without naming it."""
    gate = [m for m in corpus() if m.id.startswith("drop-gate-")]
    for kind in GATE_KINDS:
        expected = {m.expected for m in gate if m.kind == kind}
        assert {"pass", "fail"} <= expected, (kind, expected)
    def written(m) -> str:
        return "".join(new for edits in m.edits.values() for _, new in edits).lower()
    names_but_includes = [m.id for m in gate if m.expected == "fail" and "dflash" in written(m)]
    excludes_unnamed = [m.id for m in gate if m.expected == "pass" and
                        "dflash" not in written(m)]
    assert {"drop-gate-or-to-and", "drop-gate-or-instead",
            "drop-gate-allow-list-with-dflash", "drop-gate-operator-contains-or",
            "drop-gate-getattr-method-default-dflash", "drop-gate-mention-comment",
            "drop-gate-mention-docstring", "drop-gate-mention-unused-name",
            "drop-gate-mention-logged", "drop-gate-nested-helper-try-else-and",
            "drop-gate-property-chain-and"} <= set(names_but_includes), names_but_includes
    assert {"drop-gate-allow-list", "drop-gate-allow-set", "drop-gate-named-allow-list",
            "drop-gate-lambda", "drop-gate-operator-contains",
            "drop-gate-getattr-method-allow-list", "drop-gate-allow-list-frozenset", "drop-gate-allow-list-dict-get"} <= \
        set(excludes_unnamed), excludes_unnamed


def test_or_turned_into_and_still_names_dflash_and_fails(releases):
    """`not (use_dflash() and use_dspark())` still names DFlash but is true for it: run,
    the scheduler gives DFlash the drop."""
    _, facts, result = judged(releases, "drop-gate-or-to-and")
    assert result.status == "fail", result.message
    assert list(findings(facts, "dflash-cache-drop")) == ["block_drop:dropped"]
    assert "needs_eagle_block_drop() -> True" in result.evidence[0].text
    assert "KVCacheManager got use_eagle=True" in result.evidence[0].text


def test_an_allow_list_without_dflash_passes_on_its_return_line(releases):
    """An allow-list excludes DFlash without naming it: the line that ran is evidence."""
    _, facts, result = judged(releases, "drop-gate-allow-list")
    assert result.status == "pass", result.message
    assert any(e.text == 'return self.method in ("eagle", "eagle3", "mtp")'
               for e in result.evidence), result.evidence


@pytest.mark.parametrize("mutation_id, named", [
    ("drop-gate-draft-config-attribute", "vllm/config/speculative.py:"),
    ("drop-gate-raise-for-dflash", "vllm/config/speculative.py:"),
])
def test_what_running_cannot_decide_is_a_warning_naming_its_line(releases, mutation_id,
                                                                 named):
    _, _, result = judged(releases, mutation_id)
    assert result.status == "warn", result.message
    assert named in result.message, result.message


def test_the_docs_show_the_mutation_table_the_benchmark_wrote():
    """The performance page includes RESULTS.md (scripts/mkdocs_results_hook.py), so the
    table users read is the benchmark's, and the benchmark's is of this corpus."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = open(os.path.join(root, "benchmarks", "RESULTS.md"), encoding="utf-8").read()
    section = re.search(r"<!-- section:mutations -->(.*?)<!-- /section:mutations -->",
                        results, re.S)
    assert section is not None, "run python3 benchmarks/verdict_mutations.py --write"
    text = section.group(1)
    first = text[text.index("\n|"):].split("\n\n")[0]  # the table by check
    table = [line for line in first.splitlines() if line.startswith("|")]
    page = open(os.path.join(root, "docs", "performance.md"), encoding="utf-8").read()
    assert "<!-- include: benchmarks/RESULTS.md -->" in page
    written = sum(int(line.split("|")[2]) for line in table[2:])
    assert written == len(corpus()), "the table is of another corpus: run the benchmark"
