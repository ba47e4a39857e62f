"""An output path one run at a time: two runs writing the same `--json` (or `--html`,
`--junit`) would overwrite each other's file without a word. Each run holds an advisory
lock (flock) for each output it was given, for as long as it runs; a second run on the
same path is refused before any host is contacted, naming the run that holds it. The
lock files live in the user's cache (keyed by the output's absolute path), never beside
the outputs; the kernel drops a lock when its holder exits, however it exits."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile

from fleetcheck.input_error import InputError


def lock_directory() -> str:
    """$XDG_CACHE_HOME/fleetcheck/locks (default ~/.cache), else a directory of this
    user's own under the system's temp dir."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    directory = os.path.join(cache, "fleetcheck", "locks")
    try:
        os.makedirs(directory, exist_ok=True)
        return directory
    except OSError:
        directory = os.path.join(tempfile.gettempdir(), "fleetcheck-locks-%d" % os.getuid())
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return directory


def lock_path(output: str) -> str:
    key = hashlib.sha256(os.path.abspath(output).encode("utf-8", "surrogateescape"))
    return os.path.join(lock_directory(), key.hexdigest()[:32] + ".lock")


def lock_outputs(paths: list[tuple[str, str]]) -> list[int]:
    """Locks each (option, path); the descriptors to keep open while the run writes. A
    path another run holds is an InputError naming the option, the path and that run."""
    held: list[int] = []
    for option, path in paths:
        lock = lock_path(path)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            for other in held:
                os.close(other)
            raise InputError("command line", None, option, "%s is being written by another "
                             "fleetcheck run (pid %s): wait for it to finish, or give another "
                             "path" % (path, holder))
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        held.append(fd)
    return held
