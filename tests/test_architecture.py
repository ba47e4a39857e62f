"""The README's architecture table is the code's: one row per module of the package,
and a module imports only what its row allows (typing-only imports aside). The probe's
modules import only the standard library and each other: they run on hosts where
fleetcheck is not installed."""

from __future__ import annotations

import ast
import os
import re
import sys

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "fleetcheck")
ROW = re.compile(r"^\| `(fleetcheck/[^`]+\.py)` \| (.+) \| (.+) \|$")


def module_files() -> list[str]:
    """Every module of the package, as a path from the repository root."""
    found = []
    for directory, _, files in os.walk(PACKAGE):
        found += [os.path.relpath(os.path.join(directory, name), ROOT)
                  for name in files if name.endswith(".py")]
    return sorted(found)


def module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def table() -> dict[str, tuple[str, list[str]]]:
    """README rows: path -> (what it holds, the modules it may import)."""
    rows: dict[str, tuple[str, list[str]]] = {}
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        for line in handle:
            match = ROW.match(line.rstrip("\n"))
            if match:
                path, holds, allowed = match.groups()
                assert path not in rows, "README names %s twice" % path
                # the modules are the column's `quoted` names; the rest says why
                rows[path] = (holds, re.findall(r"`([^`]+)`", allowed))
    return rows


def runtime_imports(path: str) -> set[str]:
    """The modules a file imports when it runs: blocks under `if TYPE_CHECKING:` only
    serve type checkers and are left out."""
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
                node.test.id == "TYPE_CHECKING":
            typing_only.update(id(inner) for child in node.body for inner in ast.walk(child))
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "%s: relative import" % path
            found.add(node.module)
            # `from fleetcheck.probe import jsonlite` imports the module jsonlite
            found.update("%s.%s" % (node.module, alias.name) for alias in node.names
                         if os.path.exists(os.path.join(ROOT, *("%s.%s" % (
                             node.module, alias.name)).split(".")) + ".py"))
    return found


def allowed_by(rule: str, module: str) -> bool:
    """`results` allows fleetcheck.results; `checks/*` every module of checks and the
    package itself; `*` anything of fleetcheck."""
    if rule == "*":
        return True
    if rule.endswith("/*"):
        package = "fleetcheck." + rule[:-2].replace("/", ".")
        return module == package or module.startswith(package + ".")
    return module == "fleetcheck." + rule.replace("/", ".")


def test_every_module_has_one_row_and_every_row_a_module():
    rows = table()
    assert sorted(rows) == module_files()


@pytest.mark.parametrize("path", module_files())
def test_a_module_imports_only_what_its_row_allows(path):
    _, allowed = table()[path]
    me = module_name(path)
    own = {m for m in runtime_imports(path) if m == "fleetcheck" or m.startswith("fleetcheck.")}
    # a package's own modules, and the package a module sits in, are always reachable
    parents = {me.rsplit(".", i)[0] for i in range(1, me.count(".") + 1)}
    wrong = sorted(m for m in own - {me} - parents
                   if not any(allowed_by(rule, m) for rule in allowed))
    assert not wrong, "%s imports %s; its README row allows only %s" % (
        path, ", ".join(wrong), ", ".join(allowed) or "nothing of fleetcheck")


@pytest.mark.parametrize("path", [p for p in module_files() if p.startswith("fleetcheck/probe/")])
def test_the_probe_imports_only_the_standard_library(path):
    outside = sorted(m for m in runtime_imports(path)
                     if m.split(".")[0] not in sys.stdlib_module_names
                     and not m.startswith("fleetcheck.probe"))
    assert not outside, "%s imports %s: the probe runs where only Python is" % (path, outside)


def test_the_checking_path_never_imports_the_lab():
    """Test, demo and benchmark infrastructure stays out of what a gate runs: only the
    demo (and the command line that starts it) reaches fleetcheck.lab."""
    users = sorted(p for p in module_files() if not p.startswith("fleetcheck/lab/") and any(
        m.startswith("fleetcheck.lab") for m in runtime_imports(p)))
    assert users == ["fleetcheck/demo.py"]


def python_files(folder: str) -> list[str]:
    return sorted(os.path.join(folder, name) for name in os.listdir(os.path.join(ROOT, folder))
                  if name.endswith(".py"))


def test_test_modules_import_helpers_never_each_other_and_benchmarks_never_tests():
    """Shared test code lives in helper modules; a test module imported by another would
    run its tests twice and tie the two together. Benchmarks stand on the product (and
    fleetcheck.lab), not on the test suite."""
    test_side = {os.path.basename(p)[:-3] for p in python_files("tests")}
    wrong = []
    for path in python_files("tests"):
        for module in runtime_imports(path):
            if module.startswith("test_") or module == "conftest":
                wrong.append("%s imports %s" % (path, module))
    for path in python_files("benchmarks"):
        source = open(os.path.join(ROOT, path), encoding="utf-8").read()
        wrong += ["%s imports %s (from tests/)" % (path, module)
                  for module in sorted(runtime_imports(path) & test_side)]
        if re.search(r"sys\.path\.insert\([^\n]*[\"']tests[\"']", source):
            wrong.append("%s puts tests/ on sys.path" % path)
    assert not wrong, "\n".join(wrong)
