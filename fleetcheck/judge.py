"""`fleetcheck judge`: facts gathered by another engine (the `probe-bundle` script run by
Ansible, srun, a DaemonSet) turned into the results `run` would give for those hosts.

Inputs, per file (or `-` / no file: a stream on stdin): one facts document, several as
JSON lines, or Ansible's `--tree` output for one host (the module result, whose `stdout`
holds the facts; the host is the file's name, Ansible's inventory_hostname). An Ansible
result for an unreachable or failed host, or a document that is not the probe's facts,
is that host's `unreachable` / `error` result, as in `run`: it never stops the others."""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import sys
from typing import Any, Iterator

from fleetcheck import __version__
from fleetcheck.checks.waived import apply_waivers
from fleetcheck.checks.plan import CheckPlan, MissingFacts, finish_run
from fleetcheck.faults import inject, internal_error
from fleetcheck.input_error import InputError
from fleetcheck.checks.served_entries import served_summary
from fleetcheck.drafter_expectations import DrafterExpectation, resolve_drafters
from fleetcheck.expectations import CommandLine, resolve
from fleetcheck.inventory import Host
from fleetcheck.playbook import Playbook
from fleetcheck.wire_protocol import decode_answer
from fleetcheck.text import is_clean_name, is_int, printable
from fleetcheck.results import HostError, HostResult, RunResult, host_status, now_iso
from fleetcheck.status import ErrorKind
from fleetcheck.waivers import host_waivers
from fleetcheck.connectors.base import CommandResult, TransportError

MAX_INPUT_BYTES = 64 * 1024 * 1024


class Answer:
    """One host's answer as it arrived: the facts text, or the engine's word on why
    there is none."""

    def __init__(self, name: str, origin: str, stdout: bytes = b"", exit_status: int = 0,
                 stderr: bytes = b"", unreachable: str | None = None):
        self.name = name
        self.origin = origin
        self.stdout = stdout
        self.exit_status = exit_status
        self.stderr = stderr
        self.unreachable = unreachable


def read_text(path: str) -> str:
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(path, None, None, "cannot read facts: %s" % (exc.strerror or exc))
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(path, None, None, "more than %d MiB of facts" % (MAX_INPUT_BYTES >> 20))
    return data.decode("utf-8", "replace")


def documents(path: str, text: str) -> list[tuple[int | None, Any]]:
    """(line number or None, parsed document). A file that is neither one JSON document
    nor JSON lines is one host's answer that is not JSON: returned whole, as text."""
    try:
        return [(None, json.loads(text))]
    except (ValueError, RecursionError):
        pass
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                lines.append((number, json.loads(line)))
            except (ValueError, RecursionError):
                if path != "-":
                    return [(None, text)]
                lines.append((number, line))
    return lines


def is_results(document: Any) -> bool:
    """Whether a document is fleetcheck's results (what `run` and `judge` write)."""
    return isinstance(document, dict) and "schema_version" in document and \
        isinstance(document.get("hosts"), list)


def holds_facts(path: str) -> bool:
    """Whether a file holds what `judge` reads (facts, JSON lines of them, an Ansible
    --tree result carrying them): `report` and `diff` then name the command to use."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_INPUT_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    parsed = documents(path, text)
    if not parsed or isinstance(parsed[0][1], str):
        return False
    first = parsed[0][1]
    if isinstance(first, dict) and isinstance(first.get("stdout"), str):
        first = next((document for _, document in documents("-", first["stdout"])), None)
    return isinstance(first, dict) and "probe_version" in first


def file_host(path: str) -> str:
    """The host a per-host file is for: its name (Ansible's --tree names files by
    inventory_hostname, dots included), less a .json or .jsonl suffix."""
    name = os.path.basename(path)
    for suffix in (".jsonl", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return name


# `ansible HOSTS -m script ...` without --tree prints one of these per host
ANSIBLE_CONSOLE = re.compile(r"^\S+ \| (SUCCESS|CHANGED|FAILED!|UNREACHABLE!)( \| rc=-?\d+)? "
                             r"(=>|>>)", re.M)
COLLECT_FACTS = ("collect facts with `ansible all -i INVENTORY -m script -a 'probe.py --host "
                 "{{ inventory_hostname }}' --tree facts/` (one result per host) and run "
                 "`fleetcheck judge facts/*`, or save what the probe prints on each node")


def refuse_console_output(path: str, text: str) -> None:
    """Ansible's console output fed to judge by mistake would be a phantom host named
    after the file: said for what it is, with how to collect facts instead."""
    found = ANSIBLE_CONSOLE.search(text)
    if found is None:
        return
    line = text.count("\n", 0, found.start()) + 1
    shown = printable(text[found.start():].split("\n", 1)[0].encode("utf-8"), 80)
    raise InputError(path, "line %d" % line, None, "this looks like Ansible's console output "
                     "(`%s`), not the probe's facts: %s" % (shown, COLLECT_FACTS))


def answers(path: str) -> Iterator[Answer]:
    text = read_text(path)
    if not text.strip():
        raise InputError(path, None, None, "no facts in this file")
    if not holds_json(text):
        refuse_console_output(path, text)
    for line, document in documents(path, text):
        where = path if line is None else "%s line %d" % (path, line)
        if is_results(document):
            raise InputError(where, None, None, "this is fleetcheck results (what `run` and "
                             "`judge` write), not facts: `fleetcheck report %s` renders "
                             "them" % shlex.quote(path))
        if isinstance(document, dict) and "probe_version" in document:
            name = document.get("host")
            if not isinstance(name, str) or not name or not is_clean_name(name):
                raise InputError(where, None, "host", "the facts name no host (the probe "
                                 "takes it from --host NAME or the node's hostname)")
            yield Answer(name, where, json.dumps(document).encode("utf-8"))
        elif isinstance(document, dict) and path != "-" and line is None and \
                ({"stdout", "unreachable", "failed", "msg"} & set(document)):
            yield ansible_answer(file_host(path), where, document)
        elif path != "-" and line is None:
            # not facts at all: this file's host answered with something else
            yield Answer(file_host(path), where, text.encode("utf-8"), exit_status=0)
        else:
            raise InputError(where, None, None, "not a fleetcheck facts document (%s)"
                             % printable(str(document).encode("utf-8"), 80))


def holds_json(text: str) -> bool:
    """The file starts as JSON does (facts, JSON lines, an --tree result)."""
    return text.lstrip()[:1] in ("{", "[")


def ansible_answer(name: str, where: str, result: dict[str, Any]) -> Answer:
    """A module result as `ansible --tree` writes it for one host."""
    if result.get("unreachable"):
        return Answer(name, where, unreachable="Ansible: %s" % printable(
            str(result.get("msg") or "unreachable").encode("utf-8"), 500))
    stdout = result.get("stdout")
    stdout = stdout if isinstance(stdout, str) else ""
    stderr = result.get("stderr") if isinstance(result.get("stderr"), str) else ""
    if not stdout.strip() and result.get("msg"):
        stderr = (stderr + " " + str(result["msg"])).strip()
    rc = result.get("rc")
    return Answer(name, where, stdout.encode("utf-8"), rc if is_int(rc) else 0,
                  stderr.encode("utf-8"))


def collect(paths: list[str]) -> list[Answer]:
    """Every host's answer, once: a host named twice is an input error naming both."""
    found: dict[str, Answer] = {}
    for path in paths or ["-"]:
        for answer in answers(path):
            if answer.name in found:
                raise InputError(answer.origin, answer.name, "host", "facts for this host "
                                 "also in %s" % found[answer.name].origin)
            found[answer.name] = answer
    return list(found.values())


class NotGathered(InputError):
    """An expected drafter the host's facts were not gathered for: the probe resolves the
    expected drafter on the node (where no server runs too), so facts gathered without it
    cannot be judged against it (exit 2, never a quiet skip)."""


def gathered_for(facts: Any, drafter: DrafterExpectation, answer: Answer) -> None:
    asked = list((facts.served.drafters_asked if facts.served is not None else None) or [])
    if drafter.repo not in asked:
        raise NotGathered(answer.origin, "host '%s'" % answer.name, "--expect-drafter",
                          "these facts were not gathered for the expected drafter %s (the "
                          "probe resolves it on the node; it was asked for %s): write the "
                          "bundle with `fleetcheck probe-bundle --expect-drafter %s` (or a "
                          "playbook whose expect.drafter is it), run it on the nodes again "
                          "and judge what it prints" % (
                              drafter.repo, ", ".join(asked) or "none", drafter.label()))


def judge_answer(answer: Answer, plan: CheckPlan, expected: dict[str, Any],
                 drafters: dict[str, DrafterExpectation] | None = None,
                 host: Host | None = None) -> HostResult:
    """`host`: the inventory's host of that name (its groups), when judge was given one."""
    host = host or Host(name=answer.name, address=answer.name)
    error = None
    info = None
    checks = []
    served = None
    try:
        if answer.unreachable is not None:
            raise TransportError(ErrorKind.UNREACHABLE, answer.unreachable)
        facts = decode_answer(CommandResult(answer.stdout, answer.stderr, answer.exit_status),
                              host.connection_settings(), plan.required_facts())
        if (drafters or {}).get(host.name) is not None:
            gathered_for(facts, drafters[host.name], answer)
        inject("judge", host.name)  # the test-only fault hook, as in `run`
        info, checks, _ = plan.judge(facts, expected.get(host.name))
        served = served_summary(facts)
    except NotGathered:
        raise
    except TransportError as exc:
        error = HostError(kind=exc.kind, message="%s (%s)" % (exc.message, answer.origin))
    except MissingFacts as exc:
        error = HostError(kind=ErrorKind.PROTOCOL.value,
                          message="%s (%s)" % (exc, answer.origin))
    except Exception as exc:  # a bug in fleetcheck: this host's data, never the run's end
        error = internal_error(exc, "judging this host")
    if error is not None:
        checks = plan.not_run("%s (%s)" % (error.kind, error.message))
        info = None
    return HostResult(name=host.name, address=host.destination, groups=list(host.groups),
                      status=host_status([] if error else checks, error), error=error,
                      vllm=info, checks=checks, served=served)


def judge_facts(paths: list[str], playbook: Playbook, cli: CommandLine,
                inventory: tuple[str, list[Host]] | None = None) -> RunResult:
    """The run these facts make: every host judged as `run` judges it, then the checks
    that need the whole fleet (same build). With `inventory` (its name and hosts, as
    `run` reads them), each host has its groups, variables, expectations and waivers, and
    an inventory host no file holds facts for is in the results, saying so."""
    started = now_iso()
    collected = collect(paths)
    known = {h.name: h for h in inventory[1]} if inventory else {}
    hosts = [known.get(a.name) or Host(name=a.name, address=a.name) for a in collected]
    missing = [h for name, h in known.items() if name not in {a.name for a in collected}]
    label = inventory[0] if inventory else "facts"
    expected = resolve(hosts + missing, playbook.expect, cli, label)
    drafters = resolve_drafters(hosts, playbook.expect_drafter, cli.drafter, label)
    plan = CheckPlan(playbook, smoke=False, build=bool(expected))  # no smoke on this path
    judged = [judge_answer(answer, plan, expected, drafters, host)
              for answer, host in zip(collected, hosts)]
    absent = [no_facts(host, plan, paths) for host in missing]
    order = {h.name: i for i, h in enumerate(inventory[1])} if inventory else {}
    results = sorted(judged + absent, key=lambda h: order.get(h.name, len(order)))
    run = RunResult(started_at=started,
                    inventory=("%s + " % label if inventory else "") + "facts: " + ", ".join(
                        paths or ["stdin"]),
                    playbook=playbook.source, fleetcheck_version=__version__,
                    hosts=results, complete=True, finished_at=now_iso())
    return apply_waivers(finish_run(run, playbook, drafters),
                         host_waivers(hosts + missing, label), playbook.waive,
                         datetime.datetime.now(datetime.timezone.utc).date())


def no_facts(host: Host, plan: CheckPlan, paths: list[str]) -> HostResult:
    """An inventory host whose facts none of the files hold: in the results, never left out."""
    error = HostError(kind=ErrorKind.PROBE.value, message="no facts for this host in %s: "
                      "the probe did not run there, or its output was not saved"
                      % ", ".join(paths or ["stdin"]))
    return HostResult(name=host.name, address=host.destination, groups=list(host.groups),
                      status=host_status([], error), error=error,
                      checks=plan.not_run("%s (%s)" % (error.kind, error.message)))
