"""A real second user on the box (`nobody`, through setpriv), and directories it may
use: the hostile neighbour of the trust tests."""

from __future__ import annotations

import grp
import os
import pwd
import tempfile

import waits

NOBODY = pwd.getpwnam("nobody")
NOGROUP = grp.getgrgid(NOBODY.pw_gid).gr_name


def as_nobody(command: str) -> str:
    """A shell command that runs `command` as nobody, with no supplementary groups."""
    return "exec setpriv --reuid=nobody --regid=%s --clear-groups -- %s" % (NOGROUP, command)


def chown_tree(top: str, uid: int, gid: int) -> None:
    os.lchown(top, uid, gid)
    for base, dirs, files in os.walk(top):
        for name in dirs + files:
            os.lchown(os.path.join(base, name), uid, gid)


def world_dir(prefix: str) -> str:
    """A directory any user can enter (pytest's tmp_path is root's alone)."""
    path = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(path, 0o755)
    return path


def wait_listening(port: int, timeout: float = 30.0) -> None:
    waits.wait_listening("127.0.0.1", port, timeout)
