"""Safe file access on the host: nothing is opened before it is checked (O_PATH, a
regular file, the reader's access), so FIFOs and devices are refused, never opened;
never follows a symlinked directory (so a symlink loop cannot trap the probe); caps
what it reads.

Probe modules run on the host under its Python (3.8+): standard library only.
"""

import hashlib
import os
import stat

from fleetcheck.probe.trust import own_fd_path, unreadable_by

MAX_FILE_BYTES = 16 * 1024 * 1024


class ProbeFileError(Exception):
    """A file the plan needs cannot be read as a regular text file."""


class MissingFile(ProbeFileError):
    """The file is not there. Named by its path relative to the code root, so the
    controller's analysis of a shipment says the same words as the host's."""

    def __init__(self, rel):
        ProbeFileError.__init__(self, "%s: No such file or directory" % rel)
        self.rel = rel


def open_for(path, reader):
    """A descriptor of the regular file at `path`, checked before it is opened: the path
    is resolved with O_PATH (no driver is opened, no FIFO writer released), the file must
    be regular and readable by `reader` (an Owner; None: the probe's own credentials),
    and only then is it opened, through /proc/self/fd (the same file, whatever the path
    now names) with O_NOCTTY|O_NONBLOCK. FIFOs and devices are refused, never opened."""
    o_path = getattr(os, "O_PATH", 0)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, o_path | getattr(os, "O_CLOEXEC", 0)) if o_path else None
    except FileNotFoundError:
        raise MissingFile(path)
    except OSError as exc:
        raise ProbeFileError("%s: %s" % (path, exc.strerror or exc))
    if handle is None:  # no O_PATH (not Linux): lstat, then open
        return checked_open(path, reader, flags)
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise ProbeFileError("%s: not a regular file" % path)
        refused = unreadable_by(handle, reader)
        if refused:
            raise ProbeFileError("%s: %s" % (path, refused))
        try:
            reopened, proc = own_fd_path(handle)
            fd = os.open(reopened, flags, dir_fd=proc)
        except OSError as exc:
            raise ProbeFileError("%s: %s" % (path, exc.strerror or exc))
    finally:
        os.close(handle)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise ProbeFileError("%s: changed while it was read" % path)
    return fd


def checked_open(path, reader, flags):
    """open_for where O_PATH is missing: the path's target stat'ed first, then opened."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ProbeFileError("%s: not a regular file" % path)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MissingFile(path)
    except OSError as exc:
        raise ProbeFileError("%s: %s" % (path, exc.strerror or exc))
    refused = unreadable_by(fd, reader) if stat.S_ISREG(os.fstat(fd).st_mode) else \
        "not a regular file"
    if refused:
        os.close(fd)
        raise ProbeFileError("%s: %s" % (path, refused))
    return fd


def read_bytes(path, limit=MAX_FILE_BYTES, reader=None):
    """Read a regular file without ever blocking: FIFOs and devices are refused, not
    opened; a file `reader` could not open is refused too."""
    fd = open_for(path, reader)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ProbeFileError("%s: not a regular file" % path)
        if info.st_size > limit:
            raise ProbeFileError("%s: larger than %d bytes" % (path, limit))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path, reader=None):
    return read_bytes(path, reader=reader).decode("utf-8", "replace")


def sha256_file(path, chunk=1 << 20):
    """sha256 of a regular file of any size, read in chunks (no whole-file buffer)."""
    fd = open_for(path, None)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProbeFileError("%s: not a regular file" % path)
        digest = hashlib.sha256()
        while True:
            block = os.read(fd, chunk)
            if not block:
                return digest.digest()
            digest.update(block)
    finally:
        os.close(fd)


def glob_to_regex(pattern):
    import re  # only the fix analysis expands globs; a host that verifies never does
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("^" + "".join(out) + "$")


def walk_files(root, rel_dir):
    """Yield relative paths of regular files below root/rel_dir; never follows symlinked
    directories, so a symlink loop cannot trap the probe."""
    stack = [rel_dir]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, current)))
        except OSError:
            continue
        for entry in entries:
            rel = current + "/" + entry.name if current else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(rel)
                else:
                    yield rel  # FIFOs and devices too: reading them is refused, visibly
            except OSError:
                continue


def expand_globs(root, patterns, walks=None):
    """Relative paths matching the globs, in a stable order; directory walks are shared
    between finders through `walks`."""
    walks = {} if walks is None else walks
    found = []
    for pattern in patterns:
        if not any(ch in pattern for ch in "*?"):
            if pattern not in found:
                found.append(pattern)
            continue
        fixed = pattern.split("*")[0].split("?")[0]
        base = fixed.rsplit("/", 1)[0] if "/" in fixed else ""
        if base not in walks:
            walks[base] = sorted(walk_files(root, base))
        regex = glob_to_regex(pattern)
        for rel in walks[base]:
            if regex.match(rel) and rel not in found:
                found.append(rel)
    return found
