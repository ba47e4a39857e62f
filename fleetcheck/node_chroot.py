"""The prelude `fleetcheck node` runs before the probe's bootstrap, in its own trusted
interpreter: it enters a server's container by its root (`/proc/PID/root`, through
chroot) so the probe sees the files, /proc and working directory that server sees, as
`podman exec` would, without running anything of the container.

Everything this interpreter may still load is loaded first; then nothing more is read
from disk as code (sys.path emptied, the path finder removed), since the container's
files under the same paths are another user's. The user and group databases are read
from the container's /etc as text (no NSS module is loaded from it), and PATH is
emptied so no program of the container is found by name.

Its text is sent as the start of `python -c` (argv: ROOT CWD MODULES NAMESPACE); importing
it as a module does nothing."""

import os
import sys

MAX_DATABASE_BYTES = 1 << 20
PATHS_NAMESPACE = "FLEETCHECK_PATHS_NAMESPACE"  # as probe/context.py reads it
KEPT_PROC_FD = "FLEETCHECK_PROC_FD"  # as probe/trust.py reads it


class Entry(object):
    """A passwd or group line as pwd and grp give it (the fields the probe reads)."""

    def __init__(self, fields, names):
        for name, value in zip(names, fields):
            setattr(self, name, value)


class Database(object):
    """pwd's or grp's look-ups over the container's own file, read once, bounded."""

    def __init__(self, path, prefix):
        self.path, self.prefix, self.entries = path, prefix, None

    def load(self):
        if self.entries is None:
            self.entries = []
            try:
                with open(self.path, "rb") as handle:
                    text = handle.read(MAX_DATABASE_BYTES).decode("utf-8", "replace")
            except OSError:
                text = ""
            for line in text.splitlines():
                fields = line.split(":")
                if len(fields) >= 4 and fields[2].isdigit() and fields[3].isdigit():
                    self.entries.append(fields)
        return self.entries

    def by_id(self, number):
        for fields in self.load():
            if int(fields[2]) == number:
                return self.entry(fields)
        raise KeyError("%s id not found: %d" % (self.prefix, number))

    def by_name(self, name):
        for fields in self.load():
            if fields[0] == name:
                return self.entry(fields)
        raise KeyError("%s name not found: %s" % (self.prefix, name))

    def entry(self, fields):
        if self.prefix == "pw":
            padded = (fields + [""] * 7)[:7]
            return Entry([padded[0], padded[1], int(padded[2]), int(padded[3]), padded[4],
                          padded[5] or "/", padded[6]],
                         ("pw_name", "pw_passwd", "pw_uid", "pw_gid", "pw_gecos", "pw_dir",
                          "pw_shell"))
        return Entry([fields[0], fields[1], int(fields[2]), fields[3].split(",")],
                     ("gr_name", "gr_passwd", "gr_gid", "gr_mem"))


def text_databases():
    """Stand-ins for pwd and grp, put in sys.modules: the container's files, as text."""
    import types
    users, groups = Database("/etc/passwd", "pw"), Database("/etc/group", "gr")
    pwd, grp = types.ModuleType("pwd"), types.ModuleType("grp")
    pwd.getpwuid, pwd.getpwnam = users.by_id, users.by_name
    grp.getgrgid, grp.getgrnam = groups.by_id, groups.by_name
    sys.modules["pwd"], sys.modules["grp"] = pwd, grp


def open_root(root, namespace):
    """The root directory, opened only while its process is still in the mount namespace
    the agent found (`/proc/PID/ns/mnt` read before and after): a pid reused since the
    scan is refused rather than entered."""
    link = os.path.join(os.path.dirname(root), "ns", "mnt")
    gone = "fleetcheck: %s: the server is gone (its pid is no longer in %s)" % (root, namespace)
    try:
        if os.readlink(link) != namespace:
            raise SystemExit(gone)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        if os.readlink(link) != namespace:
            os.close(fd)
            raise SystemExit(gone)
    except OSError as exc:
        raise SystemExit("fleetcheck: %s: cannot enter: %s" % (root, exc.strerror or exc))
    return fd


def enter(root, cwd, modules, namespace):
    """Load `modules`, then chroot into `root` and go to `cwd` there (the server's own
    working directory, when it is one), loading nothing from disk from then on."""
    for name in modules:
        try:
            __import__(name)
        except ImportError:
            pass
    # the host's /proc stays reachable (the container's own knows no process of ours):
    # the probe reopens files it checked through /proc/self/fd (probe/trust.py)
    os.environ[KEPT_PROC_FD] = str(os.open("/proc", os.O_RDONLY | os.O_DIRECTORY))
    fd = open_root(root, namespace)
    os.fchdir(fd)
    os.close(fd)
    os.chroot(".")
    os.chdir("/")
    try:
        os.chdir(cwd)
    except OSError:
        pass
    sys.path[:] = []
    sys.path_hooks[:] = []
    sys.path_importer_cache.clear()
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if getattr(finder, "__name__", "") != "PathFinder"]
    os.environ["PATH"] = ""
    # the probe reads paths as this mount namespace names them (its root is that
    # namespace's root now), so its servers are not "in another mount namespace"
    os.environ[PATHS_NAMESPACE] = namespace
    text_databases()


if __name__ == "__main__":
    enter(sys.argv[1], sys.argv[2], [n for n in sys.argv[3].split(",") if n], sys.argv[4])
