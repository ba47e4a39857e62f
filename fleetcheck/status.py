"""The words a result is told in, each defined once: the status of a check or a host,
ranked (a host takes its worst check's status; a diff calls a change worse when the rank
goes up), and the kinds of error a host can end in."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """A check's or a host's status; the value is what the JSON, JUnit and HTML say."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    ERROR = "error"
    SKIP = "skip"
    WAIVED = "waived"  # checks only: a fail accepted by a waiver until its date
    UNREACHABLE = "unreachable"  # hosts only

    # the word, wherever it is written (messages, templates, XML), as in the JSON
    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def rank(self) -> int:
        return RANK[self]


RANK = {Status.SKIP: 0, Status.PASS: 1, Status.WAIVED: 2, Status.WARN: 2, Status.ERROR: 3,
        Status.UNREACHABLE: 3, Status.FAIL: 4}
# one character per status, for a matrix cell (terminal and HTML)
SYMBOLS = {Status.PASS.value: "✓", Status.FAIL.value: "✗", Status.WARN.value: "!",
           Status.ERROR.value: "E", Status.SKIP.value: "-", Status.UNREACHABLE.value: "?",
           Status.WAIVED.value: "~"}
# a check that never ran (its host failed first) is marked apart from a skip
NOT_RUN_SYMBOL = "·"
# a host in one of these may be rolled out to (warnings are read, not blocking)
READY = frozenset({Status.PASS.value, Status.WARN.value})
CHECK_STATUSES = tuple(s.value for s in (Status.PASS, Status.FAIL, Status.WARN, Status.ERROR,
                                         Status.SKIP, Status.WAIVED))
HOST_STATUSES = tuple(s.value for s in (Status.PASS, Status.FAIL, Status.WARN, Status.ERROR,
                                        Status.UNREACHABLE))


def worst(statuses: list[str]) -> Status:
    """The status a host takes from its checks: the worst; a host whose checks were all
    skipped passes (nothing was found wrong); a waived failure makes it warn (ready, with
    something to read)."""
    found = max((Status(s) for s in statuses), key=lambda s: s.rank)
    return {Status.SKIP: Status.PASS, Status.WAIVED: Status.WARN}.get(found, found)


def worse(new: str, old: str) -> bool:
    """Did a status get worse? A check not run (skip) is no worse than one that passed."""
    floor = Status.PASS.rank
    return max(Status(new).rank, floor) > max(Status(old).rank, floor)


class ErrorKind(str, Enum):
    """Why a host has no verdicts: what went wrong, in a word the recap groups by."""

    UNREACHABLE = "unreachable"
    AUTH = "auth"
    HOST_KEY = "host-key"
    TIMEOUT = "timeout"
    PROTOCOL = "protocol"
    PROBE = "probe"
    CONTAINER = "container"
    INTERRUPTED = "interrupted"
    INTERNAL = "internal"  # a bug in fleetcheck while the host was handled

    __str__ = str.__str__
    __format__ = str.__format__


# what a connector may raise (INTERNAL is the runner's own)
TRANSPORT_KINDS = tuple(k.value for k in ErrorKind if k is not ErrorKind.INTERNAL)
