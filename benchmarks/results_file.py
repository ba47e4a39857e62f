"""benchmarks/RESULTS.md is written by several benchmark scripts: each owns one section,
delimited by HTML comments, and replaces only that section. Every section says where it was
measured, when, and by which command, in the same words (`provenance`), so a table can be
reproduced and its age seen."""

from __future__ import annotations

import os
import platform
import re
import sys
from datetime import datetime, timezone

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
TITLE = "# Benchmark results\n\nWritten by the benchmark scripts; each section says how to reproduce it.\n"


def provenance() -> list[str]:
    """The machine, the date and the command of this run, as a section's first lines."""
    return ["Machine: %s, %d cores, Python %s, %s. Date: %s." % (
                platform.processor() or platform.machine(), os.cpu_count() or 0,
                platform.python_version(), platform.platform(),
                datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
            "Command: `%s`" % " ".join(["python3", "benchmarks/" + os.path.basename(sys.argv[0])]
                                       + sys.argv[1:])]


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
