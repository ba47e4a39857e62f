"""Reading the YAML files users write (inventories, playbooks): one place for the loader
choice and for errors that name the file."""

from __future__ import annotations

import re
from typing import Any

import yaml

from fleetcheck.input_error import InputError

# libyaml's safe loader when PyYAML was built with it: the pure-Python one spends ~15 ms of
# controller start-up on the packaged playbook alone. Same documents, same safety.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: str) -> Any:
    return read_yaml_and_text(path)[0]


def read_yaml_and_text(path: str) -> tuple[Any, str]:
    """The document and the text it was read from (for checks a loaded value cannot show,
    such as a comment that cut one short)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        return yaml.load(text, Loader=SAFE_LOADER), text
    except OSError as exc:
        raise InputError(path, None, None, "cannot read: %s" % exc.strerror)
    except UnicodeDecodeError as exc:
        raise InputError(path, None, None, "not UTF-8 text: %s" % exc.reason)
    except yaml.YAMLError as exc:
        raise InputError(path, None, None, "not valid YAML: %s" % yaml_problem(exc))


def comment_cut(text: str, key: str) -> list[tuple[int, str, str]]:
    """(line, value YAML reads, comment) for each unquoted `key: value #comment` of the
    text: in YAML ` #` starts a comment, so `reference: vLLM PR #40727` reads `vLLM PR`."""
    found = []
    pattern = re.compile(r"^[\s-]*%s:[ \t]+([^'\"\s#][^#\n]*?)[ \t]+(#.*)$" % re.escape(key))
    for number, line in enumerate(text.splitlines(), 1):
        match = pattern.match(line)
        if match:
            found.append((number, match.group(1), match.group(2)))
    return found


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint with where it is (line and column, counted from 1), without
    its 'in "<unicode string>"' noise: the message already names the file."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return str(exc)
    context = getattr(exc, "context", None)
    return "line %d, column %d: %s%s" % (mark.line + 1, mark.column + 1, problem,
                                         " (%s)" % context if context else "")
