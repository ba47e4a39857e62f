"""Children that run the install's own code (the drafter loader, the import check): in
a session of their own, under the credentials trust.py chose, read through poll (never
select: it refuses descriptors past 1024) under one deadline. At the deadline the whole
group is killed, and the pipes are drained, closed and the child reaped within a short
bound of its own: a grandchild that keeps a pipe open cannot hold the probe."""

import os
import select
import time

SIGKILL = 9
AFTER_KILL_S = 0.5  # what draining and reaping may take once the group is killed
MAX_OUTPUT = 8 * 1024 * 1024


def drain(fds, end):
    """{fd: bytes} read from `fds` until each is closed or the monotonic `end`; True as
    the second value when the time ran out first."""
    chunks = dict((fd, []) for fd in fds)
    sizes = dict((fd, 0) for fd in fds)
    open_fds = list(fds)
    poller = select.poll()
    for fd in open_fds:
        poller.register(fd, select.POLLIN)
    while open_fds:
        left = end - time.monotonic()
        if left <= 0:
            return dict((fd, b"".join(c)) for fd, c in chunks.items()), True
        for fd, _ in poller.poll(left * 1000):
            data = os.read(fd, 65536)
            if data and sizes[fd] < MAX_OUTPUT:
                chunks[fd].append(data)
                sizes[fd] += len(data)
            elif not data:
                open_fds.remove(fd)
                poller.unregister(fd)
    return dict((fd, b"".join(c)) for fd, c in chunks.items()), False


def kill_group(pid):
    try:
        os.killpg(pid, SIGKILL)
    except OSError:
        pass


def reap(pid, end):
    """The child's exit status as a return code, or None if it is not gone by `end`."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() >= end:
            return None
        time.sleep(0.01)


def collect(pid, out_r, err_r, timeout):
    """(stdout, stderr, return code, timed out) of a started child whose pipes are
    `out_r` and `err_r`; the descriptors are closed here."""
    try:
        got, timed_out = drain([out_r, err_r], time.monotonic() + max(timeout, 0))
        if timed_out:
            kill_group(pid)
            more, _ = drain([out_r, err_r], time.monotonic() + AFTER_KILL_S)
            got = dict((fd, got[fd] + more[fd]) for fd in got)
    finally:
        for fd in (out_r, err_r):
            os.close(fd)
    code = reap(pid, time.monotonic() + (AFTER_KILL_S if timed_out else 5.0))
    if code is None and not timed_out:
        kill_group(pid)
        code = reap(pid, time.monotonic() + AFTER_KILL_S)
    return got[out_r], got[err_r], code, timed_out


def run_child(argv, timeout, env, runner, run=None, prepare=None, executable=None):
    """Start `argv` (or, with `run`, fork and call it: the same interpreter, no second
    start-up) as `runner` says, stdin from /dev/null, and collect it (see collect).
    `prepare` runs in the child just before its credentials change (limits, namespaces).
    `executable` is the file to exec when it is not argv[0] (a /proc/self/fd/N path)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (out_r, err_r, out_w, err_w, devnull):
                os.close(fd)
            os.chdir("/")
            if prepare is not None:
                prepare()
            runner.switch()
            if run is not None:
                run()
            else:
                os.execvpe(executable or argv[0], argv, runner.environ(env))
        except BaseException as exc:  # noqa: B902 - the child must end here, whatever
            try:
                os.write(2, ("cannot start %s: %s\n" % (
                    argv[0] if argv else "child", getattr(exc, "strerror", None) or exc)
                    ).encode("utf-8", "replace"))
            except OSError:
                pass
        finally:
            os._exit(0 if run is not None else 127)
    os.close(out_w)
    os.close(err_w)
    return collect(pid, out_r, err_r, timeout)
