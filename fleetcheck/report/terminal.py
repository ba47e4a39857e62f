"""Terminal output: live progress while hosts run, then a table and a recap by failure.

Everything that came from a host is passed as rich Text (never markup) and stripped of
control characters, so a hostile version string cannot restyle or rewrite the terminal.
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from fleetcheck.report.server_words import served_lines
from fleetcheck.results import Evidence, HostResult, RunResult
from fleetcheck.status import READY, SYMBOLS, Status
from fleetcheck.text import counted, neutral

STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "error": "magenta",
         "skip": "dim", "unreachable": "magenta", "waived": "cyan"}


def heading(title: str, style: str = "bold") -> Text:
    """A Text that starts with a styled title line: the style is the title's span only (a
    style given to Text() itself would spread over everything appended after it)."""
    out = Text()
    out.append(title + "\n", style=style)
    return out


def hanging(text: str, indent: int, width: int | None) -> str:
    """One line of text wrapped to `width` with its continuation lines indented under it
    (None: no wrapping, as for piped output, where a line is one record to grep)."""
    if width is None or len(text) + indent <= width:
        return " " * indent + text + "\n"
    import textwrap
    lines = textwrap.wrap(text, width=max(20, width - indent), subsequent_indent="    ",
                          break_long_words=True, break_on_hyphens=False)
    return "".join(" " * indent + line + "\n" for line in lines)


class Progress:
    """On a TTY a progress bar (hosts done of all, running, not passing so far, elapsed
    time and an estimate of the time left); plain lines otherwise (CI logs)."""

    def __init__(self, total: int, stream: IO[str] | None = None):
        self.total = total
        self.stream = stream or sys.stderr
        self.console = Console(file=self.stream, highlight=False)
        self.live = self.console.is_terminal
        self.running = 0
        self.done = 0
        self.failed = 0
        self.lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> "Progress":
        if self.live:
            from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            from rich.progress import Progress as Bar  # only a terminal pays its import
            self._bar = Bar(TextColumn("hosts"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[state]}"), TimeElapsedColumn(),
                            TextColumn("left"), TimeRemainingColumn(), console=self.console)
            self._bar.__enter__()
            self._task = self._bar.add_task("hosts", total=self.total, state=self._state())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def _state(self) -> str:
        return "running %d, not passing so far %d" % (self.running, self.failed)

    def _show(self) -> None:
        self._bar.update(self._task, completed=self.done, total=self.total,
                         state=self._state())

    def started(self, _host: object) -> None:
        with self.lock:
            self.running += 1
            if self._bar is not None:
                self._show()

    def finished(self, host: HostResult) -> None:
        with self.lock:
            # a `container: auto` host finishes as one result per container found
            self.running = max(0, self.running - 1)
            self.done += 1
            self.total = max(self.total, self.done)
            if host.status not in READY:
                self.failed += 1
            if self._bar is not None:
                self._show()
            else:  # not a terminal: a plain line, written directly (rich costs ~0.2 ms)
                # a checked host's status is said once every check is in (the fleet checks
                # and waivers may still change it): the table's, never another
                line = "[%d/%d] %s %s" % (self.done, self.total, neutral(host.name),
                                          host.status if host.error else "checked")
                if host.error:
                    line += ": %s" % neutral(error_text(host))
                self.stream.write(line + "\n")
                self.stream.flush()


def error_text(host: HostResult) -> str:
    """"auth: authentication refused ...": the kind once (an unreachable host's status
    already says unreachable)."""
    if host.error.kind == host.status:
        return host.error.message
    return "%s: %s" % (host.error.kind, host.error.message)


def failure_kind(host: HostResult) -> str:
    if host.error:
        if host.error.kind == host.status:
            return host.status
        return "%s: %s" % (host.status, host.error.kind)
    every = [c.id for c in host.checks]
    by_status: dict[str, list[str]] = {}
    for check in host.checks:
        if check.status in (Status.FAIL, Status.ERROR, Status.WARN, Status.WAIVED):
            by_status.setdefault(check.status, []).append(check.id)
    if not by_status:
        return host.status
    # worst first: the first status named is the host's
    ranked = sorted(by_status.items(), key=lambda item: -Status(item[0]).rank)
    return "; ".join("%s: %s" % (status, checks_named(ids, every)) for status, ids in ranked)


def checks_named(check_ids: list[str], every: list[str]) -> str:
    """Check ids for a line of the summary: 'every check' or 'every check but X' when that
    is shorter to read than the list (a host with no install has every check say so)."""
    missing = [c for c in every if c not in check_ids]
    if len(check_ids) > 1 and not missing:
        return "every check"
    if len(check_ids) >= 3 and 0 < len(missing) <= 2:
        return "every check but " + ", ".join(missing)
    return ", ".join(check_ids)


EVIDENCE_HOSTS_NAMED = 5  # a shared finding names this many hosts, then counts the rest
EVIDENCE_SHOWN = 6  # lines of evidence per finding (a dataflow path has a few steps)


def render_evidence(console: Console, run: RunResult, verbose: bool,
                    width: int | None = None) -> None:
    """Evidence under the table: for checks that did not pass, or for all with -v (skips
    too: their reasons). Hosts
    whose finding is the same (check, status, message, evidence) share one entry that names
    them: 250 hosts of one bad build are one finding to read, not 250 copies of it.
    Printed as one Text (one console.print per line costs ~0.2 ms each)."""
    groups: dict[tuple, list[str]] = {}
    for host in run.hosts:
        for check in host.checks:
            if check.status in (Status.SKIP, Status.PASS) and not verbose:
                continue
            key = (check.id, check.status, check.message,
                   tuple((item.file, item.line, item.text, item.step)
                         for item in check.evidence[:EVIDENCE_SHOWN]))
            groups.setdefault(key, []).append(host.name)
    if not groups:
        return
    # the same hosts with the same finding under several checks (no install found: every
    # check says so) are one entry too
    merged: dict[tuple, list[str]] = {}
    for (check_id, status, message, evidence), names in groups.items():
        merged.setdefault((status, message, evidence, tuple(names)), []).append(check_id)
    every = list(run.check_titles())
    out = heading("Evidence:")
    for (status, message, evidence, names), check_ids in merged.items():
        shown = ", ".join(neutral(name) for name in names[:EVIDENCE_HOSTS_NAMED])
        if len(names) > EVIDENCE_HOSTS_NAMED:
            shown += " and %d more (%d hosts)" % (len(names) - EVIDENCE_HOSTS_NAMED, len(names))
        lead = "%s %s " % (shown, checks_named(check_ids, every))
        body = hanging(lead + status + ": " + neutral(message), 2, width)
        at = body.find(" %s: " % status, len(lead) - 1) + 1  # the status word, coloured
        if at:
            out.append(body[:at])
            out.append(status, style=STYLE[status])
            out.append(body[at + len(status):])
        else:
            out.append(body)
        for item in evidence:
            out.append(hanging(neutral(Evidence(*item).as_line()), 6, width))
    out.rstrip()
    console.print(out)

HOST_ERRORS_SHOWN = 20  # then a count: the HTML and JSON hold every one


def render_host_errors(console: Console, run: RunResult) -> None:
    """Why each host that has no verdicts has none, in its own words: the progress lines
    said it on stderr as hosts finished (judge prints none), this says it once at the end."""
    failed = [host for host in run.hosts if host.error is not None]
    if not failed:
        return
    out = heading("Hosts without verdicts:")
    for host in failed[:HOST_ERRORS_SHOWN]:
        out.append("  %s (%s): %s\n" % (neutral(host.name), neutral(host.error.kind),
                                        neutral(host.error.message)))
    if len(failed) > HOST_ERRORS_SHOWN:
        out.append("  and %d more (the HTML report and the JSON hold every one)\n"
                   % (len(failed) - HOST_ERRORS_SHOWN))
    out.rstrip()
    console.print(out)


def render_internal_errors(console: Console, run: RunResult) -> None:
    """fleetcheck's own bugs that a host's verdicts survived: said, never swallowed."""
    hit = [host for host in run.hosts if host.internal_errors]
    if not hit:
        return
    out = heading("fleetcheck errors beside the verdicts:")
    for host in hit[:HOST_ERRORS_SHOWN]:
        for error in host.internal_errors:
            out.append("  %s (%s): %s\n" % (neutral(host.name), neutral(error.kind),
                                            neutral(error.message)))
    if len(hit) > HOST_ERRORS_SHOWN:
        out.append("  and %d more hosts (the HTML report and the JSON hold every one)\n"
                   % (len(hit) - HOST_ERRORS_SHOWN))
    out.rstrip()
    console.print(out)


def source_words(source: dict[str, str]) -> str:
    """A VCS install's origin: `git https://github.com/vllm-project/vllm @ refs/pull/40898/head
    (commit 3cfc8f8b7e2d...)`."""
    words = " ".join(w for w in (source.get("vcs"), source.get("url")) if w) or "?"
    if source.get("requested_revision"):
        words += " @ %s" % source["requested_revision"]
    if source.get("commit"):
        words += " (commit %s)" % source["commit"]
    return words


def render_sources(console: Console, run: RunResult) -> None:
    """-v: where each VCS install (a PR build) came from, hosts with the same on one line."""
    groups: dict[str, list[str]] = {}
    for host in run.hosts:
        if host.vllm and host.vllm.source:
            groups.setdefault(source_words(host.vllm.source), []).append(host.name)
    if not groups:
        return
    out = heading("Built from (direct_url.json):")
    for words, names in groups.items():
        shown = ", ".join(neutral(n) for n in names[:EVIDENCE_HOSTS_NAMED])
        if len(names) > EVIDENCE_HOSTS_NAMED:
            shown += " and %d more (%d hosts)" % (len(names) - EVIDENCE_HOSTS_NAMED, len(names))
        out.append("  %s: %s\n" % (shown, neutral(words)))
    out.rstrip()
    console.print(out)


def render_found_by(console: Console, run: RunResult) -> None:
    """Where each install was found and how, hosts with the same answer on one line;
    other installs seen on a host are named (they were not checked)."""
    groups: dict[tuple, list[str]] = {}
    for host in run.hosts:
        if host.vllm and host.vllm.found_by:
            others = tuple("%s (%s)" % (o.get("site_packages"), o.get("found_by"))
                           for o in host.vllm.other_installs or [])
            key = (host.vllm.site_packages, host.vllm.found_by, others)
            groups.setdefault(key, []).append(host.name)
    if not groups:
        return
    out = heading("Installs found:")
    for (site, how, others), names in groups.items():
        shown = ", ".join(neutral(n) for n in names[:EVIDENCE_HOSTS_NAMED])
        if len(names) > EVIDENCE_HOSTS_NAMED:
            shown += " and %d more (%d hosts)" % (len(names) - EVIDENCE_HOSTS_NAMED, len(names))
        out.append("  %s: %s, found by %s\n" % (shown, neutral(site or "?"), neutral(how)))
        for other in others:
            out.append("      also installed, not checked: %s\n" % neutral(other))
    out.rstrip()
    console.print(out)


def render_served(console: Console, run: RunResult) -> None:
    """What each host's servers serve (report/server_words.py), hosts that serve nothing left
    out."""
    lines = [(host.name, line) for host in run.hosts for line in served_lines(host)]
    if not lines:
        return
    out = heading("Served:")
    for name, line in lines:
        out.append("  %s: %s\n" % (neutral(name), neutral(line)))
    out.rstrip()
    console.print(out)


def ci(interval: dict | None, percent: bool) -> str:
    if not isinstance(interval, dict):
        return "(no interval)"
    form = (lambda v: "%.1f%%" % (100 * v)) if percent else (lambda v: "%.2f" % v)
    return "(95%% CI %s-%s)" % (form(interval["low"]), form(interval["high"]))


def smoke_line(smoke: dict, status: str | None = None) -> str | None:
    """One host's acceptance, each figure with its 95% interval, and its verdict: the
    smoke-acceptance check's status (`status`), the word the table has, then the load's
    own verdict word."""
    if smoke.get("mean_acceptance_length") is None:
        return None
    intervals = smoke.get("intervals") or {}
    parts = ["acceptance rate %.1f%% %s" % (100 * smoke["acceptance_rate"],
                                            ci(intervals.get("acceptance_rate"), True)),
             "mean acceptance length %.2f %s" % (smoke["mean_acceptance_length"],
                                                 ci(intervals.get("mean_acceptance_length"),
                                                    False))]
    if smoke.get("per_position"):
        first = (intervals.get("per_position") or [None])[0]
        parts.append("position 0 %.1f%% %s" % (100 * smoke["per_position"][0], ci(first, True)))
    requests = (smoke.get("requests") or {}).get("measured")
    line = ", ".join(parts) + (" over %s" % counted(requests, "request")
                               if requests is not None else "")
    words = [w for w in (status, smoke.get("verdict")) if w]
    if status and smoke.get("verdict") and smoke["verdict"] != status:
        return line + ": %s (%s)" % tuple(words)
    return line + (": %s" % words[0] if words else "")


def render_smoke(console: Console, run: RunResult) -> None:
    """Acceptance per host with its intervals (a passing check's message is shown only
    with -v; these figures always are)."""
    lines = [(host.name, smoke_line(host.smoke, next(
        (c.status for c in host.checks if c.id == "smoke-acceptance"), None)))
        for host in run.hosts if host.smoke]
    lines = [(name, line) for name, line in lines if line]
    if not lines:
        return
    out = heading("Acceptance (smoke load):")
    for name, line in lines:
        out.append("  %s: %s\n" % (neutral(name), neutral(line)))
    out.rstrip()
    console.print(out)


HOST_COLUMN_MAX = 40


def fold(value: str, width: int) -> list[str]:
    return [value[i:i + width] for i in range(0, len(value), width)] or [""]


def host_table(run: RunResult, check_ids: list[str]) -> Text:
    """One row per host: name, status, version, commit, a symbol per check. Laid out by
    hand as one Text: rich's Table measures every cell (~0.7 ms per host), which at 500
    hosts is more controller CPU than the hosts' SSH work. Long names fold, never cut."""
    header = [("host", "bold"), ("status", "bold"), ("vllm", "bold"), ("commit", "bold")] + \
        [(str(i), "bold") for i in range(1, len(check_ids) + 1)]
    rows = [header]
    for host in run.hosts:
        by_id = {c.id: c for c in host.checks}
        row = [(neutral(host.name), ""),
               (SYMBOLS[host.status] + " " + host.status, STYLE[host.status]),
               (neutral(host.vllm.version if host.vllm else ""), ""),
               (neutral((host.vllm.commit or "")[:12] if host.vllm else ""), "")]
        for cid in check_ids:
            check = by_id.get(cid)
            row.append((SYMBOLS[check.status], STYLE[check.status]) if check else ("", ""))
        rows.append(row)
    widths = [max(len(row[i][0]) for row in rows) for i in range(len(header))]
    widths[0] = min(widths[0], HOST_COLUMN_MAX)
    widths[2] = min(widths[2], HOST_COLUMN_MAX)
    out = heading("fleetcheck: %s" % counted(len(run.hosts), "host"), "italic")
    for number, row in enumerate(rows):
        cells = [fold(value, widths[i]) if i in (0, 2) else [value[:widths[i]]]
                 for i, (value, _) in enumerate(row)]
        for line in range(max(len(c) for c in cells)):
            for i, ((_, style), pieces) in enumerate(zip(row, cells)):
                piece = pieces[line] if line < len(pieces) else ""
                out.append(piece.center(widths[i]) if i >= 4 else piece.ljust(widths[i]),
                           style=style or None)
                out.append(" " if i < len(row) - 1 else "\n")
        if number == 0:
            out.append("-" * (sum(widths) + len(widths) - 1) + "\n", style="dim")
    out.rstrip()
    return out


def render_summary(run: RunResult, stream: IO[str] | None = None, verbose: bool = False) -> None:
    """The table (one symbol per check, numbered columns with a legend, so it stays
    readable at 80 columns), then evidence, then a recap grouped by failure kind."""
    out = stream or sys.stdout
    # piped (a CI log, grep, less): no line is wrapped at all; on a terminal long lines
    # wrap to its width, evidence with its indentation
    piped = not out.isatty()
    console = Console(file=out, highlight=False, soft_wrap=piped)
    width = None if piped else console.width
    check_ids = list(run.check_titles())
    console.print(host_table(run, check_ids))
    console.print(Text("checks: " + "  ".join("%d %s" % (i, cid) for i, cid in
                                              enumerate(check_ids, 1)), style="dim"))
    console.print(Text("symbols: " + "  ".join("%s %s" % (sym, name) for name, sym in
                                               SYMBOLS.items()), style="dim"))
    render_found_by(console, run)
    if verbose:
        render_sources(console, run)
    render_served(console, run)
    render_smoke(console, run)
    render_evidence(console, run, verbose, width)
    render_host_errors(console, run)
    render_internal_errors(console, run)
    groups: dict[str, list[str]] = defaultdict(list)
    for host in run.hosts:
        if host.status != Status.PASS:
            groups[failure_kind(host)].append(host.name)
    if groups:
        console.print(Text("Recap (hosts not passing, by kind):", style="bold"))
        for kind, names in sorted(groups.items()):
            shown = ", ".join(neutral(n) for n in names[:10])
            more = " and %d more" % (len(names) - 10) if len(names) > 10 else ""
            console.print(Text("  %s (%d): %s%s" % (neutral(kind), len(names), shown, more)))
    summary = run.summary()
    for warning in summary["warnings"]:
        console.print(Text("Warning: " + neutral(warning), style=STYLE["warn"]))
    verdict = "READY" if summary["ready"] else "NOT READY"
    console.print(Text("Fleet: %s  (%s)%s" % (
        verdict, ", ".join("%s %d" % kv for kv in summary["by_status"].items() if kv[1]),
        "" if run.complete else "  RUN INCOMPLETE"),
        style="bold green" if summary["ready"] else "bold red"))
