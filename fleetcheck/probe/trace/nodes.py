"""Small readers of syntax nodes shared by the interpreter's parts, and the steps of
evidence (file, line, step, text) they make."""

import ast

from fleetcheck.probe.codebase import dotted_name
from fleetcheck.probe.patterns import evidence_text

LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
               "info_once", "debug_once", "warning_once"}


def step_of(codebase, rel, line, end, kind):
    source = codebase.source(rel)
    text = evidence_text(source.lines, line, end) if source is not None else ""
    return (rel, line, kind, text)


def const_int(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and \
            not isinstance(node.value, bool):
        return node.value
    return None


def const_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def subscript_index(node):
    index = node.slice
    if isinstance(index, getattr(ast, "Index", ())):  # Python 3.8 wraps it
        index = index.value
    return index


def is_log_call(func):
    return isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and \
        "log" in (dotted_name(func.value) or "").lower()
