"""JUnit XML for CI test reporters (Jenkins, GitLab, GitHub): one testsuite per host (named
by it), one testcase per check (name = check id); fail -> <failure>, error -> <error>,
skip and waived -> <skipped>. A host that could not be reached gets an <error> on each of
its checks, so a CI gate sees it.

classname is `fleetcheck.<host>` with the host's dots made underscores: Jenkins splits a
classname at its last dot into package and class, so `gpu01.dc1.example.com` as it stands
would file every host of a domain under package `gpu01.dc1.example`, class `com`."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fleetcheck.atomic_file import write_atomically
from fleetcheck.faults import inject
from fleetcheck.report.server_words import served_lines
from fleetcheck.results import RunResult
from fleetcheck.text import xml_safe
from fleetcheck.status import Status

# XML 1.0 cannot carry most control characters: hosts' text is made printable first.
clean = xml_safe


def classname(host: str) -> str:
    """The testcase classname of a host: the part after its last dot names the host whole."""
    return "fleetcheck." + clean(host).replace(".", "_")


def junit_tree(run: RunResult) -> ET.ElementTree:
    suites = ET.Element("testsuites", name="fleetcheck")
    overall = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for host in run.hosts:
        suite = ET.SubElement(suites, "testsuite", name=clean(host.name),
                              timestamp=run.started_at or "", time="%.3f" % host.duration_s)
        totals = dict.fromkeys(overall, 0)
        served = "\n".join("served: " + line for line in served_lines(host))
        for check in host.checks:
            case = ET.SubElement(suite, "testcase", classname=classname(host.name), name=check.id,
                                 time="%.3f" % (host.duration_s / max(1, len(host.checks))))
            totals["tests"] += 1
            evidence = "\n".join(e.as_line() for e in check.evidence)
            if served and check.id == "served-config":  # what is served, once per host
                evidence = (evidence + "\n" if evidence else "") + served
            body = clean(check.message + ("\n" + evidence if evidence else ""))
            if host.error is not None:
                node = ET.SubElement(case, "error", type=host.error.kind,
                                     message=clean(host.error.message))
                node.text = clean(host.error.message)
                totals["errors"] += 1
            elif check.status == Status.FAIL:
                node = ET.SubElement(case, "failure", type=Status.FAIL,
                                     message=clean(check.message))
                node.text = body
                totals["failures"] += 1
            elif check.status == Status.ERROR:
                node = ET.SubElement(case, "error", type=Status.ERROR,
                                     message=clean(check.message))
                node.text = body
                totals["errors"] += 1
            elif check.status == Status.WAIVED:  # accepted until its date: said, not failed
                ET.SubElement(case, "skipped", message=clean("waived: " + check.message))
                totals["skipped"] += 1
            elif check.status == Status.SKIP:
                ET.SubElement(case, "skipped", message=clean(check.message))
                totals["skipped"] += 1
            else:
                out = ET.SubElement(case, "system-out")
                out.text = body
        for index, error in enumerate(host.internal_errors):
            case = ET.SubElement(suite, "testcase", classname=classname(host.name),
                                 name="fleetcheck-internal" + ("-%d" % index if index else ""),
                                 time="0.000")
            node = ET.SubElement(case, "error", type=error.kind, message=clean(error.message))
            node.text = clean(error.message)
            totals["tests"] += 1
            totals["errors"] += 1
        for key, value in totals.items():
            suite.set(key, str(value))
            overall[key] += value
    for key, value in overall.items():
        suites.set(key, str(value))
    suites.set("time", "%.3f" % run.duration_s)
    return ET.ElementTree(suites)


def write_junit(run: RunResult, path: str) -> None:
    for host in run.hosts:
        inject("junit", host.name)
    tree = junit_tree(run)
    ET.indent(tree)
    text = ET.tostring(tree.getroot(), encoding="unicode")
    write_atomically(path, ["<?xml version='1.0' encoding='utf-8'?>\n", text])
