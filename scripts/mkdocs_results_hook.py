"""mkdocs hook: the performance page shows benchmarks/RESULTS.md as the benchmarks wrote it.

The page holds `<!-- include: benchmarks/RESULTS.md -->`; the file's text replaces it, its
headings one level down so they sit under the page's own title. Copying figures into the
docs by hand would let them drift from the tables the benchmarks write.
"""

from __future__ import annotations

import os
import re
from typing import Any

INCLUDE = re.compile(r"^<!-- include: (?P<path>[\w./-]+) -->$", re.M)


def demoted(markdown: str) -> str:
    """Each ATX heading one level deeper, code fences left alone."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,5} ", line):
            line = "#" + line
        lines.append(line)
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    root = os.path.dirname(os.path.abspath(config["config_file_path"]))

    def include(match: re.Match) -> str:
        with open(os.path.join(root, match.group("path")), encoding="utf-8") as handle:
            return demoted(handle.read())

    return INCLUDE.sub(include, markdown)
