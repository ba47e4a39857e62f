"""Held-out evaluation of `--patch`: diffs cut from the real differences between pairs of
vLLM releases (none of them used while the matcher was built), each checked by the real
probe on both releases' unpacked wheels and judged by the real check.

For a pair (OLD, NEW), every changed .py file of `git diff --no-index OLD/vllm NEW/vllm`
gives one diff (its first MAX_HUNKS hunks), in two forms: git's (with the index line, so
blob ids can decide) and plain (without it, so every hunk is matched by its tokens).
OLD lacks each change: a pass there is a false pass. NEW has it unchanged: a fail there
is a false fail. Decided: fail on OLD, pass on NEW (a warn is undecided). Diffs that
change only comments or layout, or add an empty file, are left out (nothing the code
could show).

    python3 benchmarks/patch_presence.py [--write] [OLD:NEW ...]

Exit 1 on any false pass or false fail, or under 95% decided.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from results_file import provenance, write_section  # noqa: E402

from fleetcheck.checks.patches import judge_patch  # noqa: E402
from fleetcheck.checks.version import vllm_info  # noqa: E402
from fleetcheck.inventory import Host  # noqa: E402
from fleetcheck.lab.local_probe import probe_answer  # noqa: E402
from fleetcheck.lab.release_diffs import keep_hunks, release_diff, sections  # noqa: E402
from fleetcheck.lab.wheels import unpacked  # noqa: E402
from fleetcheck.patches import read_patch  # noqa: E402
from fleetcheck.wire_protocol import decode_answer  # noqa: E402

PAIRS = ("0.24.0:0.25.0", "0.27.0:0.28.0", "0.30.0:0.31.0")
MAX_HUNKS = 3
TARGET = 0.95


def cut(old: str, new: str, work: str, index_line: bool) -> list:
    """One PatchCheck per changed .py file of the pair."""
    patches = []
    for number, (path, section) in enumerate(sorted(sections(release_diff(old, new)).items())):
        if not path.endswith(".py"):
            continue
        count = section.count("\n@@ ")
        text = keep_hunks(section, list(range(min(count, MAX_HUNKS))), index_line)
        name = os.path.join(work, "d%04d.diff" % number)
        with open(name, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)
        patch = read_patch(name)
        if patch.files and patch.signature()["files"][0]["hunks"]:  # an empty new file: none
            patches.append(patch)
    return patches


def verdicts(version: str, patches: list) -> dict[str, tuple[str, str]]:
    host = Host(name="local", address="local", connection="local", venv=unpacked(version))
    answer = probe_answer(host, signatures=[], patches=[p.signature() for p in patches])
    facts = decode_answer(answer, host.connection_settings())
    info = vllm_info(facts)
    out = {}
    for patch in patches:
        result = judge_patch(patch, facts, info)
        out[patch.id] = (str(result.status), result.message)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="*", default=list(PAIRS))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    failures = []
    totals = {"cases": 0, "decided": 0, "false_pass": 0, "false_fail": 0}
    for pair in args.pairs:
        old, new = pair.split(":")
        for index_line in (True, False):
            with tempfile.TemporaryDirectory() as work:
                started = time.monotonic()
                patches = cut(old, new, work, index_line)
                on_old, on_new = verdicts(old, patches), verdicts(new, patches)
                spent = time.monotonic() - started
                hunks = sum(len(f["hunks"]) for p in patches for f in p.signature()["files"])
                false_pass = [p.source for p in patches if on_old[p.id][0] == "pass"]
                false_fail = [p.source for p in patches if on_new[p.id][0] == "fail"]
                decided = sum(1 for p in patches if on_old[p.id][0] == "fail") + \
                    sum(1 for p in patches if on_new[p.id][0] == "pass")
                cases = 2 * len(patches)
                for p in patches:
                    for version, seen, bad in ((old, on_old, "pass"), (new, on_new, "fail")):
                        if seen[p.id][0] == bad:
                            failures.append("%s on %s: %s: %s" % (
                                re.sub(r".*/", "", p.source), version, bad, seen[p.id][1]))
            form = "git (index line)" if index_line else "plain (tokens only)"
            rows.append("| %s -> %s | %s | %d | %d | %d | %d | %d | %.1f%% | %.0f s |" % (
                old, new, form, len(patches), hunks, cases, len(false_pass), len(false_fail),
                100.0 * decided / cases if cases else 0.0, spent))
            for key, value in (("cases", cases), ("decided", decided),
                               ("false_pass", len(false_pass)),
                               ("false_fail", len(false_fail))):
                totals[key] += value
    share = totals["decided"] / totals["cases"] if totals["cases"] else 0.0
    lines = ["## Pull-request diffs on releases held out (`--patch`)", ""] + provenance() + [
        "",
        "Each changed .py file of a release pair is one diff (its first %d hunks), checked "
        "by the real probe on the older release (which lacks it: a pass is a false pass) and "
        "the newer (which has it unchanged: a fail is a false fail); decided = fail on the "
        "older, pass on the newer." % MAX_HUNKS, "",
        "| pair | diff form | diffs | hunks | cases | false pass | false fail | decided | time |",
        "|---|---|---|---|---|---|---|---|---|"] + rows + [
        "", "Total: %d cases, %d false passes, %d false fails, %.1f%% decided (target %d%%)."
        % (totals["cases"], totals["false_pass"], totals["false_fail"], 100 * share,
           100 * TARGET)]
    print("\n".join(lines))
    for failure in failures[:40]:
        print("  " + failure[:300])
    if args.write:
        write_section("patches", lines)
    return 1 if failures or share < TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
