"""The trust boundary's rules (probe/trust.py, probe/child.py) on this machine's own
files and processes: what a revision may be, who may run an install's code, files read
only as their reader could, and a child whose grandchild keeps its pipe open."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from fleetcheck.probe import files
from fleetcheck.probe.child import run_child
from fleetcheck.probe.trust import (Owner, RunAs, code_runner, is_revision, owner_of,
                                    writable_by_others)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, ok", [
    ("main", True), ("v1.2", True), ("refs/pr/3", True), ("a" * 40, True),
    ("../../root/secret", False), ("/etc/passwd", False), ("a/../b", False),
    ("main/", False), ("x.lock", False), (".hidden", False), ("a//b", False),
    ("", False), ("main\nx", False), ("m" * 300, False), (None, False), (3, False)])
def test_a_revision_is_a_sha_or_a_ref_name_never_a_path(text, ok):
    assert is_revision(text) is ok


def test_a_process_owner_is_read_from_proc():
    me = owner_of(os.getpid())
    assert (me.uid, me.gid) == (os.geteuid(), os.getegid())
    assert me.words() == "pid %d (user %s)" % (os.getpid(), me.name)
    assert owner_of(-5) is None


def test_a_file_is_read_only_where_its_reader_could(tmp_path):
    """An Owner of another uid may not read a 0600 file of ours, nor one in a 0700
    directory, whatever path reaches it; our own Owner may."""
    private = tmp_path / "private"
    private.mkdir()
    secret = private / "secret"
    secret.write_text("hidden")
    secret.chmod(0o644)
    private.chmod(0o700)
    link = tmp_path / "link"
    link.symlink_to(secret)
    other = Owner(4242, os.geteuid() + 1, os.getegid() + 1, frozenset([os.getegid() + 1]),
                  "eve")
    for path in (str(secret), str(link), str(tmp_path / "private" / ".." / "private" / "secret")):
        with pytest.raises(files.ProbeFileError) as refused:
            files.read_bytes(path, reader=other)
        assert "pid 4242 (user eve) cannot enter" in str(refused.value)
        assert "hidden" not in str(refused.value)
    private.chmod(0o755)
    secret.chmod(0o600)
    with pytest.raises(files.ProbeFileError, match="not readable by pid 4242"):
        files.read_bytes(str(link), reader=other)
    assert files.read_bytes(str(link), reader=owner_of(os.getpid())) == b"hidden"


def test_code_no_one_else_can_change_runs_as_the_probes_user(tmp_path):
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    runner, why = code_runner(None, sys.executable, str(site))
    if os.geteuid() != 0:  # as root, a site of root's runs as root too
        assert why is None and runner.uid is None
    (site / "vllm").chmod(0o777)
    runner, why = code_runner(None, sys.executable, str(site))
    assert runner is None and "vllm is writable by others" in why
    (site / "vllm").chmod(0o775)
    assert "is writable by group" in code_runner(None, sys.executable, str(site))[1]


def test_another_users_install_runs_as_that_user_or_not_at_all(tmp_path):
    other = Owner(4242, 54321, 54321, frozenset([54321, 0]), "eve")
    runner, why = code_runner(other, sys.executable, str(tmp_path))
    if os.geteuid() == 0:
        assert why is None and (runner.uid, runner.gid, runner.name) == (54321, 54321, "eve")
    else:
        assert runner is None and "found through pid 4242 (user eve)'s server" in why
    gone = Owner(4243, -1, -1, frozenset(), "(gone)")
    assert code_runner(gone, sys.executable, str(tmp_path))[0] is None


def test_a_probe_that_cannot_switch_users_runs_no_install_code_and_says_why():
    """Root in a container without CAP_SETUID and CAP_SETGID (here: a root process whose
    bounding set lacks them; a non-root process lacks them anyway): the runner that would
    switch to another user is refused up front, naming what is missing."""
    ask = ("from fleetcheck.probe.trust import RunAs, cannot_switch\n"
           "print(cannot_switch(RunAs(65534, 65534, '/', 'nobody')))")
    without = ["setpriv", "--bounding-set=-setuid,-setgid"] if os.geteuid() == 0 else []
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    said = subprocess.run([*without, sys.executable, "-c", ask], capture_output=True,
                          text=True, env=env, timeout=60, check=True).stdout
    assert "without CAP_SETUID and CAP_SETGID, so it cannot run the install's code as " \
        "user nobody (and never runs it as root)" in said, said
    if os.geteuid() == 0:  # with them (this root process): the switch is left to the child
        from fleetcheck.probe.trust import cannot_switch
        assert cannot_switch(RunAs(65534, 65534, "/", "nobody")) is None
        assert cannot_switch(RunAs()) is None  # the probe's own user: no switch at all


def test_a_sticky_directory_does_not_make_what_is_in_it_writable_by_others(tmp_path):
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    inside = sticky / "venv"
    inside.mkdir()
    assert writable_by_others(str(inside), (0, os.geteuid())) is None


def test_a_grandchild_holding_the_pipe_costs_the_child_its_bound_only():
    """The child leaves a grandchild in a session of its own, holding stdout open, and
    hangs: at the timeout the child's group is killed, the pipes closed, the child
    reaped, and the call returns while the grandchild still runs."""
    script = ("import os, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid(); time.sleep(60); os._exit(0)\n"
              "print('started', flush=True); time.sleep(60)\n")
    done = {}

    def call():
        done["result"] = run_child([sys.executable, "-c", script], 1.0, dict(os.environ),
                                   RunAs())

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(30)
    assert "result" in done, "run_child waited on the grandchild's pipe"
    out, _, code, timed_out = done["result"]
    assert timed_out and out == b"started\n" and code == -9
