"""The probe's fact families as data, in the manner of pyinfra's tests/facts/*/*.json: each
file of tests/fixtures/probe/<family>/ is one case (the files to lay out, the probe
function to call and its arguments, the facts it must return), and each becomes a test
of its own. A case file holds:

  "about": what the case shows (and why its odd part matters);
  "tree":  {relative path: text} written under a fresh root; a value {"symlink": target}
           makes a symlink, a path ending in "/" an empty directory;
  "call":  "module.function" of fleetcheck.probe; "args": its arguments, where
           {"call": ..., "args": ...} is the value of that call (RECORD rows, say);
  "facts": the expected return value, as JSON (tuples become lists);
  "ignore": top-level keys left out of the comparison (timings).

"{root}" stands for the root in arguments and file contents, and the root is written back as "{root}" in
what the function returned, so paths compare whatever the temporary directory."""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

import pytest

from fleetcheck.facts import DistInfo, Install, Leftovers, Record, VersionFile
from fleetcheck.facts_decoder import decode
from probe_helpers import assert_holds

pytestmark = pytest.mark.unit

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "probe")
FAMILIES = ("install", "dist_info", "version_file", "record", "servers", "leftovers")


def cases() -> list[Any]:
    found = []
    for family in FAMILIES:
        directory = os.path.join(FIXTURES, family)
        for name in sorted(os.listdir(directory)):
            if name.endswith(".json"):
                found.append(pytest.param(os.path.join(directory, name),
                                          id="%s/%s" % (family, name[:-len(".json")])))
    return found


def lay_out(root: str, tree: dict[str, Any]) -> None:
    for rel, content in tree.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if rel.endswith("/"):
            os.makedirs(path, exist_ok=True)
        elif isinstance(content, dict):
            os.symlink(content["symlink"], path)
        else:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(with_root(content, root))


def with_root(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return value.replace("{root}", root)
    if isinstance(value, list):
        return [with_root(item, root) for item in value]
    if isinstance(value, dict):
        return {key: with_root(item, root) for key, item in value.items()}
    return value


def without_root(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return value.replace(root, "{root}")
    if isinstance(value, list):
        return [without_root(item, root) for item in value]
    if isinstance(value, dict):
        return {key: without_root(item, root) for key, item in value.items()}
    return value


def evaluate(call: str, args: list[Any], root: str) -> Any:
    module, _, function = call.rpartition(".")
    target = getattr(importlib.import_module("fleetcheck.probe." + module), function)
    values = [evaluate(arg["call"], arg.get("args", []), root)
              if isinstance(arg, dict) and "call" in arg else with_root(arg, root)
              for arg in args]
    return target(*values)


@pytest.mark.parametrize("case_path", cases())
def test_probe_facts(case_path, tmp_path):
    with open(case_path, encoding="utf-8") as handle:
        case = json.load(handle)
    assert case.get("about"), "%s: say what the case shows" % case_path
    root = str(tmp_path / "root")
    os.makedirs(root)
    lay_out(root, case.get("tree", {}))
    got = json.loads(json.dumps(evaluate(case["call"], case.get("args", []), root)))
    got = without_root(got, root)
    for key in case.get("ignore", []):
        assert key in got, "%s: ignored key %s is not in the facts" % (case_path, key)
        del got[key]
    assert got == case["facts"]


def test_every_family_has_three_cases_or_more():
    for family in FAMILIES:
        names = [n for n in os.listdir(os.path.join(FIXTURES, family)) if n.endswith(".json")]
        assert len(names) >= 3, (family, names)


# where each fact family's facts land in the probe's answer (facts.py): the other
# calls are the probe's internals (RECORD rows, a command line's port), never sent
LANDS_AS = {"install.locate_install": Install, "install.read_dist_info": DistInfo,
            "install.read_version_file": VersionFile, "integrity.verify_record": Record,
            "integrity.uv_leftovers": Leftovers}


def fact_cases() -> list[Any]:
    found = []
    for param in cases():
        with open(param.values[0], encoding="utf-8") as handle:
            case = json.load(handle)
        if case["call"] in LANDS_AS:
            found.append(pytest.param(LANDS_AS[case["call"]], case["facts"], id=param.id))
    return found


@pytest.mark.parametrize("kind, expected", fact_cases())
def test_each_case_fits_the_one_description_of_the_facts(kind, expected):
    """What the probe returns here is what the controller decodes: no field the
    description does not know, each of the described type."""
    unknown: list = []
    assert_holds(decode(kind, expected, unknown=unknown), expected)
    assert unknown == []


def test_most_cases_are_facts_the_probe_sends():
    assert len(fact_cases()) >= 12
