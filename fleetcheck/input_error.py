"""Errors that end a run before any host is contacted (exit code 2)."""

from __future__ import annotations


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
