"""Verdicts on rewritten real vLLM sources: every mutation of tests/mutations.py
applied to the real 0.33.0 or 0.20.1 wheel's Python files, the probe run on the result
locally (as over SSH) and its check judged. Meaning-keeping rewrites must keep the
release's verdict, breaking ones must change it.

    python3 benchmarks/verdict_mutations.py [--write]

Prints a confusion table per check: false passes (a pass the mutation must not give),
false alarms (a fail or warn where it must pass), warns, and each miss with its reason;
--write puts it in benchmarks/RESULTS.md (section "mutations"). Exit 1 on any miss.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the corpus

from fleetcheck.checks.fixes import judge_fix  # noqa: E402
from fleetcheck.lab.local_probe import probe_tree  # noqa: E402
from mutations import MutableRelease, Mutation, corpus, vacuous  # noqa: E402
from fleetcheck.playbook import load_playbook  # noqa: E402
from results_file import provenance, write_section  # noqa: E402


def judge_all(mutations: list[Mutation]) -> list[tuple[Mutation, str, str, bool]]:
    """(mutation, status, message, whether a finding is `:?`) for each, probed on its
    release with the edit applied."""
    checks = {c.id: c for c in load_playbook().checks}
    out = []
    with tempfile.TemporaryDirectory(prefix="fleetcheck-mutations-") as workdir:
        releases: dict[str, MutableRelease] = {}
        for mutation in mutations:
            if mutation.version not in releases:
                releases[mutation.version] = MutableRelease(mutation.version, workdir)
            with releases[mutation.version].apply(mutation) as root:
                facts = probe_tree(root, [checks[mutation.check].signature()])
            result = judge_fix(checks[mutation.check], facts, None)
            executed = (facts.executed or {}).get(mutation.check)
            labels = list(facts.signatures[mutation.check].findings) + (
                list(executed.findings) if executed is not None else [])
            unknown = any(label.endswith(":?") for label in labels)
            message = result.message
            if vacuous(mutation, result):
                message = "(a pass that lacks a rewritten site's evidence) " + message
            out.append((mutation, result.status, message, unknown or vacuous(mutation, result)))
    return out


def table(results: list[tuple[Mutation, str, str, bool]]) -> tuple[list[str], int]:
    """The confusion table per check and the misses listed; the number of misses (a
    verdict other than the label, or a `:?` finding on a meaning-keeping rewrite, or a
    pass without evidence from a file the rewrite edited)."""
    lines = ["| check | cases | keep meaning | break or add the fix | verdict as labelled | "
             "false passes | false alarms | warns | `:?` on meaning kept |",
             "|---|---|---|---|---|---|---|---|---|"]
    misses = []
    for check in sorted(set(r[0].check for r in results)):
        rows = [r for r in results if r[0].check == check]
        false_pass = [r for r in rows if r[1] == "pass" and r[0].expected != "pass"]
        false_alarm = [r for r in rows if r[1] == "fail" and r[0].expected == "pass"]
        warns = [r for r in rows if r[1] == "warn"]
        right = [r for r in rows if r[1] == r[0].expected]
        unknown = [r for r in rows if r[0].keeps and r[3]]  # a case labelled warn included
        lines.append("| %s | %d | %d | %d | %d | %d | %d | %d | %d |" % (
            check, len(rows), sum(r[0].keeps for r in rows), sum(not r[0].keeps for r in rows),
            len(right), len(false_pass), len(false_alarm), len(warns), len(unknown)))
        misses += [r for r in rows if r[1] != r[0].expected or (
            r[0].keeps and r[3] and r[0].expected != "warn")]
    lines.append("")
    lines += kind_table(results)
    lines.append("")
    if misses:
        lines.append("Misses (mutation, construct: got / expected, message):")
        lines += ["- `%s` (%s, %s): %s / %s%s: %s" % (
            m.id, m.version, m.construct, status, m.expected,
            " (a :? finding)" if unknown else "", message)
                  for m, status, message, unknown in misses]
    warned = [(m, message) for m, status, message, _ in results if status == "warn"]
    if warned:
        lines.append("Warns (mutation, construct: message):")
        lines += ["- `%s` (%s; labelled %s): %s" % (m.id, m.construct, m.expected, message)
                  for m, message in warned]
    return lines, len(misses)


def named(message: str) -> bool:
    """Does a warn's message name what could not be followed, with its file and line?"""
    return re.search(r"\S+\.py:\d+", message) is not None


def kind_table(results: list[tuple[Mutation, str, str, bool]]) -> list[str]:
    """The cases by construct kind (the kinds of tests/mutations.py: boolean
    logic, `in`, comparisons, conditional expressions, control flow, the config's own
    attributes, calls, unknowns, the wrapper; the cases before kinds counted by check):
    each kind with cases both ways, and its warns named."""
    lines = ["| check | construct kind | cases | keep the fix | break it | false passes | "
             "false alarms | warns | warns named |", "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list] = {}
    for r in results:
        groups.setdefault((r[0].check, r[0].kind or "(by case)"), []).append(r)
    for (check, kind), rows in sorted(groups.items()):
        warns = [r for r in rows if r[1] == "warn"]
        lines.append("| %s | %s | %d | %d | %d | %d | %d | %d | %d |" % (
            check, kind, len(rows), sum(r[0].expected == "pass" for r in rows),
            sum(r[0].expected != "pass" for r in rows),
            sum(r[1] == "pass" and r[0].expected != "pass" for r in rows),
            sum(r[1] == "fail" and r[0].expected == "pass" for r in rows),
            len(warns), sum(named(r[2]) for r in warns)))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    results = judge_all(corpus())
    lines, misses = table(results)
    elapsed = time.perf_counter() - started
    lines.append("%d mutations of the real 0.33.0 and 0.20.1 wheels (tests/mutations.py), "
                 "%d missed; %.1f s." % (len(results), misses, elapsed))
    print("\n".join(lines))
    if args.write:
        write_section("mutations", [
            "## Fix verdicts on rewritten real sources", ""] + provenance() + [""] + lines)
    sys.exit(1 if misses else 0)


if __name__ == "__main__":
    main()
