"""Host entries as Ansible writes them: `name:port` and ranges (`gpu[01:16]`, `node[a:f]`,
`h[1:9:2]`), expanded exactly as Ansible's inventory plugins expand them, so a range
names the same hosts here as in `ansible-inventory`."""

from __future__ import annotations

import string

from fleetcheck.addresses import split_port
from fleetcheck.input_error import InputError


def expand_host_pattern(pattern: str, source: str, where: str | None = None) -> list[str]:
    """Ansible's expand_hostname_range: the first [beg:end(:step)] expands (zero padding
    when beg has a leading zero, which end must match in length; single letters; beg
    defaults to 0), then the rest of the name is expanded again."""
    if "[" not in pattern:
        return [pattern]
    where = where or "host '%s'" % pattern
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    if not closed:
        raise InputError(source, where, None, "range has no closing ']'")
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise InputError(source, where, None, "host range must be begin:end or begin:end:step")
    begin, end = bounds[0] or "0", bounds[1]
    if not end:
        raise InputError(source, where, None, "host range must specify an end value")
    try:
        step = int(bounds[2]) if len(bounds) == 3 else 1
    except ValueError:
        raise InputError(source, where, None, "range step '%s' is not a number" % bounds[2])
    if step < 1:
        raise InputError(source, where, None, "range step must be at least 1")
    width = 0
    if begin[0] == "0" and len(begin) > 1:
        width = len(begin)
        if width != len(end):
            raise InputError(source, where, None,
                             "host range must specify equal-length begin and end formats")
    if begin in string.ascii_letters and end in string.ascii_letters:
        first, last = string.ascii_letters.index(begin), string.ascii_letters.index(end)
        if first > last:
            raise InputError(source, where, None, "host range must have begin <= end")
        values = list(string.ascii_letters[first:last + 1:step])
    else:
        try:
            values = [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]
        except ValueError:
            raise InputError(source, where, None, "range [%s] is neither numeric nor single "
                             "letters" % body)
    if not values:
        raise InputError(source, where, None, "range [%s] expands to no hosts" % body)
    out: list[str] = []
    for value in values:
        out.extend(expand_host_pattern(head + value + tail, source, where))
    return out


def expand_host_entry(entry: str, source: str) -> tuple[list[str], int | None]:
    """A host entry of an inventory file: its host names and the port it sets, if any."""
    name, port = split_port(entry.strip())
    return expand_host_pattern(name, source, "host '%s'" % entry), port
