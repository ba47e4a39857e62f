"""The suite's guard against unseen internal errors (tests/internal_errors.py) finds each
way a results document records one, and only results documents."""

from __future__ import annotations

import json

import pytest

from internal_errors import internal_errors, results_documents

pytestmark = [pytest.mark.unit, pytest.mark.internal_errors]  # its tmp_path holds them


def test_each_kind_of_internal_error_is_found_and_other_errors_are_not(tmp_path):
    doc = {"schema_version": 1, "hosts": [
        {"name": "a", "error": {"kind": "internal", "message": "bug A"}, "checks": []},
        {"name": "b", "error": {"kind": "unreachable", "message": "down"}, "checks": [],
         "internal_errors": [{"kind": "internal", "message": "bug B"}]},
        {"name": "c", "error": None, "checks": [
            {"id": "smoke-fleet", "status": "error",
             "message": "internal error while comparing the fleet: AttributeError"},
            {"id": "fix-x", "status": "error", "message": "the probe timed out"}]}]}
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r.json").write_text(json.dumps(doc))
    (tmp_path / "other.json").write_text(json.dumps({"hosts": [{"error": {"kind": "internal"}}]}))
    found = [(path, internal_errors(data)) for path, data in results_documents(str(tmp_path))]
    assert found == [(str(tmp_path / "out" / "r.json"), [
        "a: bug A", "b: bug B",
        "c smoke-fleet: internal error while comparing the fleet: AttributeError"])]
