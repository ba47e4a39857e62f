"""What import-linter (the contracts in pyproject.toml, run by `lint-imports` in CI) cannot
say: the probe imports the standard library and nothing else (a contract can only forbid
packages it names), two layer rules hold for type checkers too (lint-imports leaves
`if TYPE_CHECKING:` imports out), and the test suite and the benchmarks stay apart from
each other."""

from __future__ import annotations

import ast
import os
import re
import sys

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "fleetcheck")


def module_files() -> list[str]:
    """Every module of the package, as a path from the repository root."""
    found = []
    for directory, _, files in os.walk(PACKAGE):
        found += [os.path.relpath(os.path.join(directory, name), ROOT)
                  for name in files if name.endswith(".py")]
    return sorted(found)


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


@pytest.mark.parametrize("path", [p for p in module_files() if p.startswith("fleetcheck/probe/")])
def test_the_probe_imports_only_the_standard_library(path):
    outside = sorted(m for m in runtime_imports(path)
                     if m.split(".")[0] not in sys.stdlib_module_names
                     and not m.startswith("fleetcheck.probe"))
    assert not outside, "%s imports %s: the probe runs where only Python is" % (path, outside)


def every_import(path: str) -> set[str]:
    """The modules a file names in any import, `if TYPE_CHECKING:` blocks included."""
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module)
            found.update("%s.%s" % (node.module, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("path, forbidden", [
    ("fleetcheck/build_details.py", "fleetcheck.results"),
    ("fleetcheck/wire_protocol.py", "fleetcheck.inventory")] + [
    (path, "fleetcheck.inventory") for path in module_files()
    if path.startswith("fleetcheck/connectors/")])
def test_a_layer_rule_holds_for_type_checkers_too(path, forbidden):
    """build_details under results, connectors and the wire protocol given connection
    settings: not even a typing-only import reaches back."""
    names = {name for name in every_import(path)
             if name == forbidden or name.startswith(forbidden + ".")}
    assert not names, "%s imports %s" % (path, sorted(names))


def python_files(folder: str) -> list[str]:
    return sorted(os.path.join(folder, name) for name in os.listdir(os.path.join(ROOT, folder))
                  if name.endswith(".py"))


def test_test_modules_import_helpers_never_each_other_and_benchmarks_never_tests():
    """Shared test code lives in helper modules; a test module imported by another would
    run its tests twice and tie the two together. Benchmarks stand on the product (and
    fleetcheck.lab), not on the test suite, except the mutation corpus
    (tests/mutations.py): labelled data the tests and the mutation benchmark both grade
    verdicts by, kept out of the wheel."""
    test_side = {os.path.basename(p)[:-3] for p in python_files("tests")} - {"mutations"}
    wrong = []
    for path in python_files("tests"):
        for module in runtime_imports(path):
            if module.startswith("test_") or module == "conftest":
                wrong.append("%s imports %s" % (path, module))
    for path in python_files("benchmarks"):
        source = open(os.path.join(ROOT, path), encoding="utf-8").read()
        wrong += ["%s imports %s (from tests/)" % (path, module)
                  for module in sorted(runtime_imports(path) & test_side)]
        if re.search(r"sys\.path\.insert\([^\n]*[\"']tests[\"']", source) and \
                runtime_imports(path) & test_side:
            wrong.append("%s puts tests/ on sys.path" % path)
    assert not wrong, "\n".join(wrong)


def test_connectors_are_given_connection_settings_never_an_untyped_host():
    """A connector's `host` is the settings the inventory built (`ConnectionSettings`):
    typed, so a type checker holds every connector to the fields the settings have."""
    untyped = []
    for path in module_files():
        if not path.startswith("fleetcheck/connectors/"):
            continue
        tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.arg == "host" and (arg.annotation is None or ast.unparse(
                        arg.annotation) != "ConnectionSettings"):
                    untyped.append("%s:%d %s(host: %s)" % (
                        path, node.lineno, node.name,
                        ast.unparse(arg.annotation) if arg.annotation else "no annotation"))
    assert untyped == []


def test_the_interpreter_is_asked_questions_never_subclassed():
    """The fix analysis has one entry point (`trace(codebase, entry, question)`): a
    question is an object derived from trace.question.Question, and no class anywhere
    derives from the interpreter's Flow or its parts, so one verdict reads from the
    question's module and the interpreter's, never from a pair of subclasses."""
    parts = {"Flow", "Statements", "Expressions", "Calls", "Paths"}
    questions = []
    for path in module_files():
        tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                         for b in node.bases}
                assert not (bases & parts) or path == "fleetcheck/probe/trace/flow.py", \
                    "%s: class %s derives from the interpreter" % (path, node.name)
                if "Question" in bases:
                    questions.append(node.name)
    assert sorted(questions) == ["KeyOffset", "ValueSource"]
    signatures = open(os.path.join(PACKAGE, "probe", "signatures.py"), encoding="utf-8").read()
    assert "trace(codebase, " in signatures and "Flow" not in signatures


def test_no_module_uses_a_name_it_never_binds():
    """pyflakes over the package, the benchmarks and the tests: a name used but never
    bound (a variable renamed in one place, an import lost in a move) fails only on the
    path that reaches it, often one no other test takes."""
    from pyflakes import api, messages

    class Collect:
        def __init__(self):
            self.found = []

        def flake(self, message):
            if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal,
                                    messages.UndefinedExport)):
                self.found.append(str(message))

        def syntaxError(self, filename, msg, lineno, offset, text):
            self.found.append("%s:%s: %s" % (filename, lineno, msg))

        def unexpectedError(self, filename, msg):
            self.found.append("%s: %s" % (filename, msg))

    collect = Collect()
    for top in ("fleetcheck", "benchmarks", "tests", "scripts"):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    api.checkPath(path, collect)
    assert collect.found == []
