"""An output path one run at a time: two runs writing the same `--json` (or `--html`,
`--junit`) would overwrite each other's file without a word. Each run holds an advisory
lock (flock) on a small file beside each output it was given, for as long as it runs; a
second run on the same path is refused before any host is contacted, naming the run that
holds it. The kernel drops the lock when the holder exits, however it exits."""

from __future__ import annotations

import fcntl
import os

from fleetcheck.input_error import InputError


def lock_path(output: str) -> str:
    directory, name = os.path.split(os.path.abspath(output))
    return os.path.join(directory, ".%s.fleetcheck-lock" % name)


def lock_outputs(paths: list[tuple[str, str]]) -> list[int]:
    """Locks each (option, path); the descriptors to keep open while the run writes. A
    path another run holds is an InputError naming the option, the path and that run."""
    held: list[int] = []
    for option, path in paths:
        lock = lock_path(path)
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            for other in held:
                os.close(other)
            raise InputError("command line", None, option, "%s is being written by another "
                             "fleetcheck run (pid %s, lock %s): wait for it to finish, or "
                             "give another path" % (path, holder, lock))
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        held.append(fd)
    return held
