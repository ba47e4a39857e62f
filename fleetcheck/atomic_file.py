"""Outputs written so that a reader, a Ctrl-C or a kill -9 at any moment finds the whole
previous file or the whole new one: a temporary file beside it, then a rename."""

from __future__ import annotations

import os
import tempfile
from typing import Iterable


def write_atomically(path: str, chunks: Iterable[str]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".fleetcheck-", suffix=".tmp", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # an ordinary file, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
