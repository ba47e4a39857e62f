"""The HTML report: one self-contained file (inline CSS, no network assets), jinja2 with
autoescaping on, so whatever a host sent is shown as text, never as markup."""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from functools import lru_cache
from typing import Any

from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from fleetcheck.atomic_file import write_atomically
from fleetcheck.build_details import CHECK_ID as BUILD_CHECK_ID, build_details, expected_label
from fleetcheck.faults import inject
from fleetcheck.report.charts import acceptance_chart, position_curve, state_bar
from fleetcheck.report.server_words import served_lines
from fleetcheck.results import HostResult, RunResult
from fleetcheck.status import NOT_RUN_SYMBOL, READY, SYMBOLS, Status, worst
from fleetcheck.text import visible_controls


def template_cache() -> FileSystemBytecodeCache | None:
    """Compiled templates kept between runs (jinja2 checks the source's checksum): parsing
    the report template costs ~30 ms of controller CPU, as much as six hosts' SSH work.
    None (compile every time) when the cache directory cannot be made."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "fleetcheck", "templates")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return FileSystemBytecodeCache(directory) if os.access(directory, os.W_OK) else None


def shown(value: object) -> object:
    """Every value the template prints: what a host sent shows its control characters as
    \\xNN, and an unknown value (None) prints as nothing, never as 'None'. Markup is
    already made safe by the filter that made it (`code`)."""
    if isinstance(value, Markup):
        return value
    return "" if value is None else visible_controls(value)


# where code may wrap besides spaces: after the punctuation between tokens (the escaped
# text holds these only as themselves; its entities are &, #, letters, digits and ;)
BETWEEN_TOKENS = re.compile(r"([.(,=])(?=\S)")


def code(value: object) -> Markup:
    """A line of code (an evidence's text), escaped, with a break opportunity (<wbr>)
    after each separator between tokens: with CSS that never breaks inside a word, a
    long line wraps between tokens (`dflash_config.<wbr>get(`), never inside `return`.
    Paths and messages are left whole, so the report's source holds them as written."""
    text = str(escape(visible_controls("" if value is None else str(value))))
    return Markup(BETWEEN_TOKENS.sub(r"\1<wbr>", text))


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Made on the first render, not at import: importing fleetcheck (even for
    `--version`) must write nothing, and the template cache is a directory in $HOME."""
    env = Environment(loader=PackageLoader("fleetcheck.report", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True, finalize=shown,
                      bytecode_cache=template_cache())
    env.filters["code"] = code
    return env


def drift_groups(run: RunResult) -> list[dict[str, Any]]:
    """Hosts grouped by build (version, commit, RECORD sha256), biggest group first; each
    row says which hosts expected exactly this build and which are off their expected one."""
    groups: dict[tuple[str, str, str], list[HostResult]] = defaultdict(list)
    for host in run.hosts:
        if host.vllm and (host.vllm.version or host.vllm.commit):
            groups[(host.vllm.version or "?", host.vllm.commit or "?",
                    host.vllm.record_sha256 or "")].append(host)
    out = []
    for (version, commit, record), members in groups.items():
        expected: dict[str, list[str]] = defaultdict(list)
        off = []
        for host in members:
            check = next((c for c in host.checks if c.id == BUILD_CHECK_ID), None)
            if build_details(check) is None:
                continue
            if check.status == Status.PASS:
                expected[expected_label(check)].append(host.name)
            elif check.status == Status.FAIL:
                off.append({"host": host.name, "expected": expected_label(check),
                            "message": check.message})
        statuses = Counter(h.status for h in members)
        out.append({"version": version, "commit": commit, "record": record,
                    "hosts": [h.name for h in members], "expected": dict(expected), "off": off,
                    "verdict": worst(list(statuses)),
                    "statuses": sorted(statuses.items(), key=lambda kv: -Status(kv[0]).rank)})
    out.sort(key=lambda g: (-len(g["hosts"]), g["version"], g["commit"], g["record"]))
    versions: dict[str, set[str]] = defaultdict(set)
    records: dict[tuple[str, str], set[str]] = defaultdict(set)
    for group in out:
        versions[group["version"]].add(group["commit"])
        records[(group["version"], group["commit"])].add(group["record"])
    for group in out:
        group["same_version_other_commit"] = len(versions[group["version"]]) > 1
        group["same_commit_other_files"] = len(records[(group["version"], group["commit"])]) > 1
    return out


def needs_action(host: HostResult) -> bool:
    """A host that may not be rolled out to: failed, errored or unreachable."""
    return host.status not in READY


def action_first(hosts: list[HostResult]) -> list[HostResult]:
    """The matrix's order: hosts that need action first (worst status first), then the
    rest, each in inventory order: at 200 hosts the failing ones are the first rows."""
    return sorted(hosts, key=lambda h: -Status(h.status).rank)


def render_html(run: RunResult, path: str) -> None:
    for host in run.hosts:
        inject("html", host.name)
    titles = run.check_titles()
    check_ids = list(titles)
    html = environment().get_template("report.html.j2").render(
        run=run, summary=run.summary(), check_ids=check_ids, titles=titles,
        matrix=action_first(run.hosts), needs_action=needs_action,
        anchors={h.name: i for i, h in enumerate(run.hosts, 1)},
        action_count=sum(needs_action(h) for h in run.hosts),
        drift=drift_groups(run), symbol=SYMBOLS, not_run_symbol=NOT_RUN_SYMBOL,
        served_lines=served_lines, served_hosts=[h for h in run.hosts if h.served],
        acceptance=acceptance_chart(run.hosts),
        position_curve=position_curve, states=state_bar(run.summary()["by_status"]),
        groups=sorted({g for h in run.hosts for g in h.groups}),
        inventory=" + ".join(os.path.basename(p) for p in run.inventory.split(" + ")),
        playbook=os.path.basename(run.playbook))
    write_atomically(path, [html])
