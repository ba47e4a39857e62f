"""benchmarks/RESULTS.md is written by several benchmark scripts: each owns one section,
delimited by HTML comments, and replaces only that section."""

from __future__ import annotations

import os
import re

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
TITLE = "# Benchmark results\n\nWritten by the benchmark scripts; each section says how to reproduce it.\n"


def write_section(name: str, lines: list[str]) -> None:
    text = open(PATH, encoding="utf-8").read() if os.path.exists(PATH) else TITLE
    block = "<!-- section:%s -->\n%s\n<!-- /section:%s -->" % (name, "\n".join(lines), name)
    pattern = re.compile(r"<!-- section:%s -->.*?<!-- /section:%s -->" % (name, name), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(PATH, "w", encoding="utf-8") as handle:
        handle.write(text)
