"""Diffs cut from the real differences between two vLLM releases (`git diff --no-index`
between their unpacked wheels), for the patch-presence tests and benchmark: whole file
sections, or some hunks of them, with or without git's index line."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

from unidiff import PatchSet

from fleetcheck.lab.wheels import unpacked


def site_of(version: str) -> str:
    return os.path.join(unpacked(version), "lib", "python3", "site-packages")


def release_diff(old: str, new: str, paths: list[str] | None = None) -> str:
    """`git diff --no-index` of the vllm package between two releases (repository paths
    `a/vllm/...`), limited to `paths` (relative to site-packages) when given."""
    with tempfile.TemporaryDirectory(prefix="fleetcheck-diff-") as work:
        os.symlink(site_of(old), os.path.join(work, "old"))
        os.symlink(site_of(new), os.path.join(work, "new"))
        targets = [(os.path.join("old", p), os.path.join("new", p)) for p in paths] \
            if paths else [("old/vllm", "new/vllm")]
        out = []
        for before, after in targets:
            proc = subprocess.run(["git", "diff", "--no-index", "--no-color", "--no-renames",
                                   before, after], cwd=work, capture_output=True, text=True)
            if proc.returncode not in (0, 1):
                raise RuntimeError("git diff failed: %s" % proc.stderr)
            out.append(proc.stdout)
    text = "".join(out)
    return text.replace(" a/old/", " a/").replace(" b/new/", " b/") \
        .replace("--- a/old/", "--- a/").replace("+++ b/new/", "+++ b/")


def sections(text: str) -> dict[str, str]:
    """Each file's section of a git diff, by repository path."""
    return {f.path: str(f) for f in PatchSet(text)}


def keep_hunks(section: str, keep: list[int], index_line: bool = True) -> str:
    """One file's section with only the hunks numbered in `keep` (0-based); without its
    index line when `index_line` is false (a plain diff: no blob ids to compare)."""
    (patched,) = PatchSet(section)
    kept = [hunk for number, hunk in enumerate(patched) if number in keep]
    patched[:] = kept
    text = str(patched)
    return text if index_line else re.sub(r"(?m)^index [0-9a-f]+\.\.[0-9a-f]+.*\n", "", text)


def hunk_lines(section: str) -> list[list[tuple[str, str]]]:
    """(kind, text) lines of each hunk of one file's section."""
    (patched,) = PatchSet(section)
    return [[(line.line_type, line.value.rstrip("\n")) for line in hunk] for hunk in patched]
