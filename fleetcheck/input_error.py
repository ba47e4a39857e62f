"""Errors that end a run before any host is contacted (exit code 2)."""

from __future__ import annotations

from typing import Any


class InputError(Exception):
    """Bad inventory, playbook or option; the message names the file, the host or group,
    and the field, so the user can fix it without reading code."""

    def __init__(self, source: str, where: str | None, field: str | None, problem: str):
        self.source = source
        self.where = where
        self.field = field
        self.problem = problem
        parts = [source]
        if where:
            parts.append(where)
        if field:
            parts.append("field '%s'" % field)
        super().__init__("%s: %s" % (": ".join(parts), problem))


class InputErrors(InputError):
    """Every InputError one pass over an input found (an inventory's typos and bad values),
    said together so three mistakes take one run to see, not three. It is the first of
    them as an InputError; `errors` holds them all."""

    def __init__(self, errors: list[InputError]):
        first = errors[0]
        super().__init__(first.source, first.where, first.field, first.problem)
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(str(error) for error in self.errors)


def raise_all(errors: list[InputError]) -> None:
    """Raise what was found: nothing, the one error, or all of them (each said once)."""
    unique = list({str(error): error for error in errors}.values())
    if len(unique) == 1:
        raise unique[0]
    if unique:
        raise InputErrors(unique)


def set_in(host: Any, setting: str, inventory: str) -> str:
    """Where a host's inventory setting was set, in the words every report shows: the
    file (a group_vars file, not the inventory beside it), the group or host it was set
    on there, and the variable as written."""
    origin = getattr(host, "origins", {}).get(setting)
    if origin is None:
        return "inventory %s: fleetcheck_%s" % (inventory, setting)
    return "inventory %s, %s: %s" % (origin.source, origin.where, origin.variable)
