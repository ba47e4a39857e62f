"""Outputs written so that a reader, a Ctrl-C or a kill -9 at any moment finds the whole
previous file or the whole new one: a temporary file beside it, then a rename."""

from __future__ import annotations

import os
import tempfile
from typing import Iterable


def current_umask() -> int:
    """Read once, at import (single-threaded): os.umask can only be read by setting it,
    and setting it while worker threads create files would hand them the wrong mode."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


UMASK = current_umask()


def write_atomically(path: str, chunks: Iterable[str], private: bool = False) -> None:
    """private: keep mkstemp's 0600 (the controller's own cache); otherwise an ordinary
    file as the user's umask makes it (reports, results)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".fleetcheck-", suffix=".tmp", dir=directory)
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~UMASK)
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
