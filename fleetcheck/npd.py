"""`fleetcheck node --npd`: node-problem-detector's custom plugin protocol, answered from
the agent's last round (its results JSON), never by probing: NPD runs the plugin every
30 s with a 5 s timeout, and a round can take longer than that.

The protocol: exit 0 (OK), 1 (a problem), anything else (unknown); NPD keeps the first
80 characters of stdout (`max_output_length`) as the condition's message."""

from __future__ import annotations

import time

from fleetcheck.results import RunResult, epoch_seconds, load_json
from fleetcheck.status import Status

MAX_LINE = 80
OK, PROBLEM, UNKNOWN = 0, 1, 3


def one_line(text: str) -> str:
    """Printable ASCII, at most MAX_LINE characters (the end cut to `...`)."""
    text = "".join(c if " " <= c <= "~" else "?" for c in text)
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."


def read_round(path: str) -> tuple[RunResult | None, str]:
    try:
        return load_json(path), ""
    except FileNotFoundError:
        return None, "no round yet (%s)" % path
    except OSError as exc:
        return None, "cannot read %s: %s" % (path, exc.strerror or exc)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, "%s is not fleetcheck results" % path


def verdict(path: str, max_age_s: float, now: float | None = None) -> tuple[int, str]:
    """(exit code, line) for the round in `path`."""
    run, problem = read_round(path)
    if run is None:
        return UNKNOWN, one_line("fleetcheck: unknown: " + problem)
    finished = epoch_seconds(run.finished_at)
    if finished is None:
        return UNKNOWN, one_line("fleetcheck: unknown: the round in %s never finished" % path)
    age = (time.time() if now is None else now) - finished
    if age > max_age_s:
        return UNKNOWN, one_line("fleetcheck: unknown: last round %.0fs old" % age)
    failing = [(host.name, check.id) for host in run.hosts for check in host.checks
               if check.status == Status.FAIL]
    if failing:
        host, check = failing[0]
        more = " (+%d more)" % (len(failing) - 1) if len(failing) > 1 else ""
        return PROBLEM, one_line("fleetcheck: FAIL %s on %s%s" % (check, host, more))
    errored = [host.name for host in run.hosts if host.status in (Status.ERROR,
                                                                  Status.UNREACHABLE)]
    if errored or not run.complete:
        where = errored[0] if errored else "the round"
        return UNKNOWN, one_line("fleetcheck: unknown: %s not judged" % where)
    if not run.hosts:
        return OK, "fleetcheck: ok: no vLLM server on this node"
    warned = sum(1 for host in run.hosts if host.status == Status.WARN)
    return OK, one_line("fleetcheck: ok: every check passes on %d install%s%s" % (
        len(run.hosts), "s" if len(run.hosts) > 1 else "",
        " (%d with warnings)" % warned if warned else ""))
