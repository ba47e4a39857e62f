"""Reading the YAML files users write (inventories, playbooks): one place for the loader
choice and for errors that name the file."""

from __future__ import annotations

from typing import Any

import yaml

from fleetcheck.input_error import InputError

# libyaml's safe loader when PyYAML was built with it: the pure-Python one spends ~15 ms of
# controller start-up on the packaged playbook alone. Same documents, same safety.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=SAFE_LOADER)
    except OSError as exc:
        raise InputError(path, None, None, "cannot read: %s" % exc.strerror)
    except yaml.YAMLError as exc:
        raise InputError(path, None, None, "not valid YAML: %s" % yaml_problem(exc))


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
