"""Held-out evaluation of `--patch`: diffs cut from the real differences between pairs of
vLLM releases (none of them used while the matcher was built), each checked by the real
probe on both releases' unpacked wheels and judged by the real check.

For a pair (OLD, NEW), every changed .py file of `git diff --no-index OLD/vllm NEW/vllm`
gives one diff (its first MAX_HUNKS hunks), in two forms: git's (with the index line, so
blob ids can decide) and plain (without it, so every hunk is matched by its tokens).
OLD lacks each change: a pass there is a false pass. NEW has it unchanged: a fail there
is a false fail. Decided: fail on OLD, pass on NEW (a warn is undecided).

Neighbours (`BEFORE<OLD:NEW>AFTER`): the same hunks checked on the release before OLD
and the one after NEW, whose files are other bytes (no blob id decides), keeping per diff
only the hunks those releases left untouched (no hunk of BEFORE -> OLD, or NEW -> AFTER,
overlaps the hunk's lines): BEFORE lacks each such change unchanged, AFTER has it. Diffs that
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
from unidiff import PatchSet  # noqa: E402

PAIRS = ("0.23.0<0.24.0:0.25.0>0.26.0", "0.26.0<0.27.0:0.28.0>0.29.0",
         "0.29.0<0.30.0:0.31.0>0.32.0")
MAX_HUNKS = 3
TARGET = 0.95
TIME_BUDGET_S = 3600.0  # a whole release step in one probe run: no host deadline


def touched(old: str, new: str, side: str) -> dict[str, list[tuple[int, int]]]:
    """Per file, the line ranges (first, last) a release step changed, numbered on the
    `old` side ("source") or the `new` side ("target")."""
    out: dict[str, list[tuple[int, int]]] = {}
    for patched in PatchSet(release_diff(old, new)):
        for hunk in patched:
            start = hunk.source_start if side == "source" else hunk.target_start
            length = hunk.source_length if side == "source" else hunk.target_length
            out.setdefault(patched.path, []).append((start, start + max(length, 1) - 1))
    return out


def untouched(hunk, ranges: list[tuple[int, int]], side: str) -> bool:
    start = hunk.target_start if side == "target" else hunk.source_start
    length = hunk.target_length if side == "target" else hunk.source_length
    last = start + max(length, 1) - 1
    return not any(lo <= last and start <= hi for lo, hi in ranges)


def cut(old: str, new: str, work: str, index_line: bool, keep=None) -> list:
    """One PatchCheck per changed .py file of the pair (its first MAX_HUNKS hunks);
    `keep(path, hunk)`: which of them to keep (a file with none left is left out)."""
    patches = []
    for number, (path, section) in enumerate(sorted(sections(release_diff(old, new)).items())):
        if not path.endswith(".py"):
            continue
        (patched,) = PatchSet(section)
        chosen = [i for i, hunk in enumerate(patched)
                  if i < MAX_HUNKS and (keep is None or keep(path, hunk))]
        if not chosen:
            continue
        text = keep_hunks(section, chosen, index_line)
        name = os.path.join(work, "d%04d.diff" % number)
        with open(name, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)
        patch = read_patch(name)
        if patch.files and patch.signature()["files"][0]["hunks"]:  # an empty new file: none
            patches.append(patch)
    return patches


def judged(lacking: str, having: str, patches: list, failures: list) -> tuple[int, int, int, int]:
    """(cases, decided, false passes, false fails) of `patches` on a release that lacks
    them and one that has them."""
    on_old, on_new = verdicts(lacking, patches), verdicts(having, patches)
    decided = false_pass = false_fail = 0
    for p in patches:
        for version, seen, good, bad in ((lacking, on_old, "fail", "pass"),
                                         (having, on_new, "pass", "fail")):
            status, message = seen[p.id]
            decided += status == good
            if status == bad:
                false_pass += bad == "pass"
                false_fail += bad == "fail"
                failures.append("%s on %s: %s: %s" % (re.sub(r".*/", "", p.source), version,
                                                      bad, message))
    return 2 * len(patches), decided, false_pass, false_fail


def verdicts(version: str, patches: list) -> dict[str, tuple[str, str]]:
    host = Host(name="local", address="local", connection="local", venv=unpacked(version))
    answer = probe_answer(host, signatures=[], patches=[p.signature() for p in patches],
                          time_budget_s=TIME_BUDGET_S)
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
        before, rest = pair.split("<") if "<" in pair else (None, pair)
        core, after = rest.split(">") if ">" in rest else (rest, None)
        old, new = core.split(":")
        runs = [("%s -> %s" % (old, new), form, old, new, None)
                for form in ("git (index line)", "plain (tokens only)")]
        if before:
            ranges = touched(before, old, "target")
            runs.append(("%s -> %s, on %s" % (old, new, before), "plain (tokens only)",
                         before, new, lambda path, hunk, r=ranges: untouched(
                             hunk, r.get(path, []), "source")))
        if after:
            ranges = touched(new, after, "source")
            runs.append(("%s -> %s, on %s" % (old, new, after), "plain (tokens only)",
                         old, after, lambda path, hunk, r=ranges: untouched(
                             hunk, r.get(path, []), "target")))
        for label, form, lacking, having, keep in runs:
            with tempfile.TemporaryDirectory() as work:
                started = time.monotonic()
                patches = cut(old, new, work, form.startswith("git"), keep)
                cases, decided, false_pass, false_fail = judged(lacking, having, patches,
                                                                failures)
                spent = time.monotonic() - started
                hunks = sum(len(f["hunks"]) for p in patches for f in p.signature()["files"])
            rows.append("| %s | %s | %d | %d | %d | %d | %d | %.1f%% | %.0f s |" % (
                label, form, len(patches), hunks, cases, false_pass, false_fail,
                100.0 * decided / cases if cases else 0.0, spent))
            for key, value in (("cases", cases), ("decided", decided),
                               ("false_pass", false_pass), ("false_fail", false_fail)):
                totals[key] += value
    share = totals["decided"] / totals["cases"] if totals["cases"] else 0.0
    lines = ["## Pull-request diffs on releases held out (`--patch`)", ""] + provenance() + [
        "",
        "Each changed .py file of a release pair is one diff (its first %d hunks), checked "
        "by the real probe on the older release (which lacks it: a pass is a false pass) and "
        "the newer (which has it unchanged: a fail is a false fail); decided = fail on the "
        "older, pass on the newer. The rows `on X` check the hunks X left untouched on the "
        "release before the pair (it lacks them) or after it (it has them), in files whose "
        "bytes differ, so only the tokens can decide; the other release of that row is the "
        "pair's own." % MAX_HUNKS, "",
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
