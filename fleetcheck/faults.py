"""fleetcheck's own bugs as data: an exception while one host (or one fleet check, or one
output) is handled becomes an `internal` error that names the exception and the innermost
fleetcheck frame, so the run goes on and the user can report it.

Also the one test-only hook that can make such a bug happen on demand, in a real run over
real sshd: a real part cannot show a fleetcheck bug, so `FLEETCHECK_INJECT_FAULT` is a
stand-in for one. It is inert unless it names a stage and a host:
`FLEETCHECK_INJECT_FAULT=judge:gpu07,smoke-fleet:gpu02` raises InjectedFault at those
points only. Stages: plan (the host's plan, smoke planner included), shared (the shared
analysis' answer to the host's question), shared-analysis (the controller's analysis of
the bytes a build's lead shipped), judge (the checks on its facts), smoke-fleet
(that host's fleet-wide verdict), html and junit (rendering that host's row).
"""

from __future__ import annotations

import os
import traceback

from fleetcheck.results import HostError
from fleetcheck.status import ErrorKind

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPORT_HINT = ("this is a bug in fleetcheck: please report it with this message and the "
               "results JSON")
INJECT_ENV = "FLEETCHECK_INJECT_FAULT"
STAGES = ("plan", "shared", "shared-analysis", "judge", "smoke-fleet", "html", "junit")


class InjectedFault(RuntimeError):
    """Raised only where FLEETCHECK_INJECT_FAULT asks for it (tests)."""


def innermost_frame(exc: BaseException) -> str:
    """file:line function of the deepest traceback frame inside fleetcheck (this module's
    own hook excluded), or '?' when the exception never passed through fleetcheck."""
    found = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        if path.startswith(PACKAGE_DIR + os.sep) and path != os.path.abspath(__file__):
            rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))
            found = "%s:%d %s" % (rel, frame.lineno, frame.name)
    return found


def describe(exc: BaseException, where: str) -> str:
    """One line for a person: what failed, the exception, where in fleetcheck, and what to
    do. The message is cut, since it may quote host data."""
    text = str(exc).replace("\n", " ")
    if len(text) > 300:
        text = text[:300] + "..."
    return "internal error while %s: %s: %s (at %s); %s" % (
        where, type(exc).__name__, text, innermost_frame(exc), REPORT_HINT)


def internal_error(exc: BaseException, where: str) -> HostError:
    return HostError(kind=ErrorKind.INTERNAL.value, message=describe(exc, where))


def _requested() -> set[tuple[str, str]]:
    wanted = set()
    for item in os.environ.get(INJECT_ENV, "").split(","):
        stage, _, host = item.strip().partition(":")
        if stage in STAGES and host:
            wanted.add((stage, host))
    return wanted


_WANTED = _requested()


def inject(stage: str, host: str) -> None:
    """A no-op unless FLEETCHECK_INJECT_FAULT names this stage and host."""
    if _WANTED and (stage, host) in _WANTED:
        raise InjectedFault("fault injected at stage %s for host %s (%s)"
                            % (stage, host, INJECT_ENV))
