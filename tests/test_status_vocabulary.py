"""One status vocabulary in use: the package compares, assigns and passes statuses as
`Status` (and error kinds as `ErrorKind`), never as bare words that a typo would turn into
a status nobody ranks. The words themselves live in status.py; the probe (stdlib only, run
where fleetcheck is not installed) keeps its own."""

from __future__ import annotations

import ast
import os

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = {"pass", "fail", "warn", "error", "skip", "unreachable"}
ALLOWED = ("fleetcheck/status.py", "fleetcheck/probe/")
# call arguments that spell the same words without being statuses: a key of a JSON
# document (`data.get("error")`) and a JUnit element name; call name -> argument index
NOT_STATUS_ARGUMENT = {"get": 0, "pop": 0, "setdefault": 0, "SubElement": 1}


def package_modules() -> list[str]:
    found = []
    for directory, _, files in os.walk(os.path.join(ROOT, "fleetcheck")):
        found += [os.path.relpath(os.path.join(directory, name), ROOT)
                  for name in files if name.endswith(".py")]
    return sorted(p for p in found if not p.startswith(ALLOWED))


def words_in(node: ast.AST | None) -> list[ast.Constant]:
    """Status words a value is made of: the value itself, a tuple/list/set of them, either
    side of a conditional expression or of an operator (`statuses + ["error"]`)."""
    if isinstance(node, ast.Constant) and node.value in WORDS:
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for element in node.elts for c in words_in(element)]
    if isinstance(node, ast.IfExp):
        return words_in(node.body) + words_in(node.orelse)
    if isinstance(node, ast.BinOp):
        return words_in(node.left) + words_in(node.right)
    return []


def bare_statuses(source: str) -> list[tuple[int, str]]:
    """(line, word) of each status word compared with, assigned, returned, passed to a
    call, given as a default, or held as a dict value."""
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left] + node.comparators:
                found += words_in(side)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
            found += words_in(node.value)
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            for index, argument in enumerate(node.args):
                if NOT_STATUS_ARGUMENT.get(name) != index:
                    found += words_in(argument)
        elif isinstance(node, ast.keyword):
            found += words_in(node.value)
        elif isinstance(node, ast.arguments):
            for default in node.defaults + [d for d in node.kw_defaults if d is not None]:
                found += words_in(default)
        elif isinstance(node, ast.Dict):
            for value in node.values:
                found += words_in(value)
    return sorted({(c.lineno, c.value) for c in found})


def test_the_scan_finds_bare_statuses_where_they_are_used():
    source = ('if check.status == "fail":\n    host.status = "error"\n'
              'r = CheckResult(status="warn")\nok = s in ("pass", "skip")\n'
              'def f(s="unreachable"):\n    return {"status": "pass"}\n'
              'key = data["error"]\nverdict.add("fail", "an error")\n'
              'seen = data.get("error", "skip")\nET.SubElement(case, "error", type="error")\n'
              'worst(found + ["error"])\n')
    assert bare_statuses(source) == [(1, "fail"), (2, "error"), (3, "warn"), (4, "pass"),
                                     (4, "skip"), (5, "unreachable"), (6, "pass"), (8, "fail"),
                                     (9, "skip"), (10, "error"), (11, "error")]


def test_no_bare_status_words_outside_status_py_and_the_probe():
    wrong = ["%s:%d: %r" % (path, line, word) for path in package_modules()
             for line, word in bare_statuses(open(os.path.join(ROOT, path),
                                                  encoding="utf-8").read())]
    assert not wrong, "use Status / ErrorKind from fleetcheck.status:\n" + "\n".join(wrong)
