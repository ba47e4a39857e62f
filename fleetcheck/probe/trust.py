"""The probe's one trust boundary. The probe often runs as root, and every other process
on the box describes itself: its command line, environment, working directory and mapped
files, and the venvs, hub caches, config files and revisions those name. Any local user
can start a process that looks like `vllm serve`. So what another process says passes
here before it is used:

- a revision is a 40-hex commit or a ref name, never a path (`../../root/secret`);
- a port is 1-65535;
- a file another process names is read only when that process's owner could read it
  (the opened file's mode, and each directory on its real path, checked against the
  owner's uid and groups), so neither `..` nor a symlink reaches a file that owner could
  not open itself;
- a file's bytes leave the host only as what was expected there (a sha, JSON, YAML):
  a refused value is a finding naming the process and the field, never its text;
- the files of an install found only through another user's server are read with that
  user's credentials (reading_as: the kernel's own permission checks, in a block that
  always ends back as the probe's user), so its symlinks reach nothing that user could
  not read;
- the install's code (the drafter loader, the import check) runs as the owner of the
  server it was found through, with no supplementary groups; as the probe's own user
  only when nobody else can change that code; otherwise not at all, saying why.
"""

import os

# node_chroot.py: a descriptor of the host's /proc, kept open across its chroot
KEPT_PROC_FD = "FLEETCHECK_PROC_FD"


def own_fd_path(fd):
    """(path, dir_fd) of /proc/self/fd/`fd`: through the host's /proc the node agent kept
    open when it chrooted the probe into a container's root, whose own /proc (another PID
    namespace's) knows no process of ours; else the usual path."""
    kept = os.environ.get(KEPT_PROC_FD, "")
    if kept.isdigit():
        return "self/fd/%d" % fd, int(kept)
    return "/proc/self/fd/%d" % fd, None

HEX = frozenset("0123456789abcdef")
REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+")
MAX_REF = 255


class Owner(object):
    """Who a process runs as: its effective uid, gid and groups, from /proc/PID/status."""

    __slots__ = ("pid", "uid", "gid", "groups", "name")

    def __init__(self, pid, uid, gid, groups, name):
        self.pid, self.uid, self.gid, self.groups, self.name = pid, uid, gid, groups, name

    def words(self):
        return "pid %d (user %s)" % (self.pid, self.name)


def user_name(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def owner_of(pid):
    """The Owner of a process, or None when its status cannot be read (it is gone)."""
    fields = {}
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name in ("Uid", "Gid", "Groups"):
                    fields[name] = value.split()
    except (OSError, ValueError):
        return None
    try:
        uid, gid = int(fields["Uid"][1]), int(fields["Gid"][1])
        groups = frozenset(int(g) for g in fields.get("Groups", ())) | {gid}
    except (KeyError, IndexError, ValueError):
        return None
    return Owner(pid, uid, gid, groups, user_name(uid))


def trusted(owner):
    """A process of root's or of the probe's own user: what it names the probe may read
    as itself (it could read the same)."""
    return owner is not None and owner.uid in (0, os.geteuid())


def refusal(owner, field, what):
    """The finding for a refused value: the process and the field, never the value."""
    who = owner.words() if owner is not None else "a server"
    return "%s: %s %s" % (who, field, what)


def is_sha(text):
    return isinstance(text, str) and len(text) == 40 and set(text) <= HEX


def is_revision(text):
    """A 40-hex commit, or a ref name as git allows one (no `..`, no leading `/`, no
    empty or dot-led part, no `.lock` ending): what names refs/<revision> and nothing
    outside it."""
    if not isinstance(text, str) or not text or len(text) > MAX_REF:
        return False
    if is_sha(text):
        return True
    if not set(text) <= REF_CHARS or text.startswith("/") or text.endswith(("/", ".lock")):
        return False
    return all(part and not part.startswith(".") for part in text.split("/"))


def is_port(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def permits(info, owner, bit):
    """Whether mode bits let `owner` do `bit` (4 read, 2 write, 1 search) on a file."""
    if owner.uid == 0:
        return True
    if info.st_uid == owner.uid:
        return bool(info.st_mode & (bit << 6))
    if info.st_gid in owner.groups:
        return bool(info.st_mode & (bit << 3))
    return bool(info.st_mode & bit)


def unreadable_by(fd, owner):
    """Why `owner` could not have opened the file open on `fd` (None when it could): the
    file's own mode, then each directory on the real path the kernel resolved."""
    if owner is None or owner.uid == 0:
        return None
    import stat
    if not permits(os.fstat(fd), owner, 4):
        return "not readable by %s" % owner.words()
    try:
        path, proc = own_fd_path(fd)
        real = os.readlink(path, dir_fd=proc)
    except OSError:
        return "its real path cannot be read, so it is not read for %s" % owner.words()
    directory = os.path.dirname(real)
    while True:
        try:
            info = os.stat(directory)
        except OSError:
            return "%s cannot be checked for %s" % (directory, owner.words())
        if not stat.S_ISDIR(info.st_mode) or not permits(info, owner, 1):
            return "under %s, which %s cannot enter" % (directory, owner.words())
        if directory == "/":
            return None
        directory = os.path.dirname(directory)


def writable_by_others(path, allowed):
    """Why someone other than the `allowed` uids could change what is at `path` (None
    when no one could): its owner, or group or world write on it or on a directory above
    it (a sticky directory such as /tmp excepted: others cannot replace what is in it)."""
    import stat
    real = os.path.realpath(path)
    current = real
    while True:
        try:
            info = os.lstat(current)
        except OSError:
            return None if current != real else "%s cannot be read" % real
        if info.st_uid not in allowed:
            return "%s belongs to user %s" % (current, user_name(info.st_uid))
        sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX and current != real
        if info.st_mode & 0o022 and not sticky and not stat.S_ISLNK(info.st_mode):
            return "%s is writable by %s" % (current, "others" if info.st_mode & 0o002
                                             else "group %s" % group_name(info.st_gid))
        if current == "/":
            return None
        current = os.path.dirname(current)


def group_name(gid):
    try:
        import grp
        return grp.getgrgid(gid).gr_name
    except (ImportError, KeyError):
        return str(gid)


class RunAs(object):
    """The credentials install code runs under: None fields mean the probe's own."""

    __slots__ = ("uid", "gid", "home", "name")

    def __init__(self, uid=None, gid=None, home=None, name=None):
        self.uid, self.gid, self.home, self.name = uid, gid, home, name

    def switch(self):
        """In the child, before it runs anything: the owner's gid and uid, no groups."""
        if self.uid is None:
            return
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)

    def environ(self, env):
        if self.uid is None:
            return env
        env = dict(env, HOME=self.home or "/", USER=self.name, LOGNAME=self.name)
        return env

    def words(self):
        return "user %s" % (self.name if self.uid is not None else user_name(os.geteuid()))


CAP_SETGID, CAP_SETUID = 6, 7


def cannot_switch(runner):
    """Why this process cannot run code under `runner`'s credentials (None when it can, or
    when its capabilities cannot be read: the child then says what failed). Root in a
    container may lack CAP_SETUID or CAP_SETGID, and install code never runs as root."""
    if runner is None or runner.uid is None:
        return None
    kept = os.environ.get(KEPT_PROC_FD, "")
    try:
        if kept.isdigit():  # chrooted by the node agent: the host's /proc it kept
            fd = os.open("self/status", os.O_RDONLY, dir_fd=int(kept))
        else:
            fd = os.open("/proc/self/status", os.O_RDONLY)
        try:
            text = os.read(fd, 65536).decode("ascii", "replace")
        finally:
            os.close(fd)
        effective = next(int(line.split()[1], 16) for line in text.splitlines()
                         if line.startswith("CapEff:"))
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    missing = [name for bit, name in ((CAP_SETUID, "CAP_SETUID"), (CAP_SETGID, "CAP_SETGID"))
               if not effective >> bit & 1]
    if not missing:
        return None
    return ("the probe runs as %s without %s, so it cannot run the install's code as %s "
            "(and never runs it as root)" % (user_name(os.geteuid()), " and ".join(missing),
                                             runner.words()))


# what the readers import when first used: loaded before the switch, since the user read
# as may not be able to open the probe's interpreter's standard library (under /root)
READERS_IMPORT = ("ast", "re", "json", "hashlib", "binascii", "bisect", "itertools", "zlib",
                  "stat", "pwd", "grp", "collections", "copy", "socket", "select")


class reading_as(object):
    """`with reading_as(owner):` the probe's file reads carry `owner`'s effective uid,
    gid and groups (only root can switch; None, a trusted owner, or a probe that is not
    root reads as itself). The real and saved uid stay root's, so the owner can neither
    signal nor trace the probe, and the block always switches back. No code is run
    inside one (code_runner refuses)."""

    def __init__(self, owner):
        self.owner = owner if owner is not None and not trusted(owner) and owner.uid >= 0 \
            and os.geteuid() == 0 else None
        self.saved = None

    def __enter__(self):
        if self.owner is not None:
            for name in READERS_IMPORT:  # the owner may not reach the probe's stdlib
                try:
                    __import__(name)
                except ImportError:
                    pass
            self.saved = (os.getegid(), os.getgroups())
            os.setgroups(sorted(self.owner.groups))
            os.setegid(self.owner.gid)
            os.seteuid(self.owner.uid)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            os.seteuid(0)
            os.setegid(self.saved[0])
            os.setgroups(self.saved[1])
            self.saved = None
        return False


def home_of(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_dir
    except (ImportError, KeyError):
        return "/"


MAX_CLOSURE_ENTRIES = 400000  # a real vLLM venv holds ~100k files and directories


def closure_roots(interpreter, site):
    """What a child started as `interpreter -S -I` with `site` on its path can import:
    the interpreter, the site dir and the interpreter's own standard library (-S: no
    .pth file runs, and the standard library's site-packages is not on the path). The
    site dir is second: closure_problem walks all of it."""
    roots = [interpreter, site]
    real = os.path.realpath(interpreter) if interpreter else None
    name = os.path.basename(real) if real else ""
    if name.startswith("python3"):
        prefix = os.path.dirname(os.path.dirname(real))
        roots.append(os.path.join(prefix, "lib", "python" + name[len("python"):].rstrip("dmu")))
    return [r for r in roots if r and os.path.lexists(r)]


def closure_problem(roots, allowed, deadline=None):
    """Why someone outside the `allowed` uids could change code under `roots` (None when
    no one could): every file and directory below each root lstat'ed, not followed (a
    symlink's target is checked where it points), and each root's own directories up to
    /. Gives up, and says so, past `deadline` (time.monotonic()) or MAX_CLOSURE_ENTRIES."""
    import stat
    import time
    seen = 0
    for root in roots:
        problem = writable_by_others(root, allowed)
        if problem:
            return problem
        stack = [os.path.realpath(root)]
        while stack:
            directory = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except NotADirectoryError:
                continue
            except OSError:
                return "%s cannot be listed" % directory
            for entry in entries:
                seen += 1
                if seen > MAX_CLOSURE_ENTRIES or (seen % 4096 == 0 and deadline is not None
                                                  and time.monotonic() > deadline):
                    return "the code under %s is too large to check in time" % root
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    return "%s cannot be checked" % entry.path
                if stat.S_ISLNK(info.st_mode):
                    problem = writable_by_others(entry.path, allowed)
                    if problem:
                        return problem
                    continue
                if info.st_uid not in allowed:
                    return "%s belongs to user %s" % (entry.path, user_name(info.st_uid))
                sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
                if info.st_mode & 0o022 and not sticky:
                    return "%s is writable by %s" % (entry.path, "others" if info.st_mode &
                                                     0o002 else "group %s" %
                                                     group_name(info.st_gid))
                if stat.S_ISDIR(info.st_mode) and not (
                        entry.name in ("site-packages", "dist-packages") and root != roots[1]):
                    stack.append(entry.path)  # (the interpreter's own site dirs: -S)
    return None


def code_runner(owner, interpreter, site, deadline=None):
    """(RunAs, None) for who may run this install's code, or (None, why not).

    `owner`: the Owner of the server the install was found through, or None when the
    inventory (or the probe's own interpreter) named it. The code runs as that server's
    owner; else as the owner of the site dir when the probe is root; else as the probe's
    user, and then only when no one else can change any file of the code it may import
    (closure_problem: the whole site dir, the interpreter and its standard library,
    lstat'ed before anything runs)."""
    me = os.geteuid()
    if me != os.getuid() and os.getuid() == 0:
        return None, "the probe is reading files as another user: no code is run then"
    if owner is not None and owner.uid < 0:
        return None, "%s has exited: whose install this is cannot be told" % owner.words()
    if owner is not None and not trusted(owner):
        if me == 0:
            runner = RunAs(owner.uid, owner.gid, home_of(owner.uid), owner.name)
            why = cannot_switch(runner)
            return (None, why) if why else (runner, None)
        return None, ("the install was found through %s's server; the probe runs as %s and "
                      "cannot run its code as that user" % (owner.words(), user_name(me)))
    runner, allowed = RunAs(), (0, me)
    try:
        site_owner = os.stat(site).st_uid
    except OSError:
        site_owner = me
    if me == 0 and site_owner != 0:
        import pwd
        try:
            entry = pwd.getpwuid(site_owner)
        except KeyError:
            return None, "%s belongs to uid %d, which has no user here" % (site, site_owner)
        runner = RunAs(site_owner, entry.pw_gid, entry.pw_dir, entry.pw_name)
        allowed = (0, site_owner)
    problem = closure_problem(closure_roots(interpreter, site), allowed, deadline)
    if problem:
        return None, "%s: its code is not run as %s" % (problem, runner.words())
    why = cannot_switch(runner)
    return (None, why) if why else (runner, None)
