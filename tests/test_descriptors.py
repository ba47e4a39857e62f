"""Descriptors: `fleetcheck run` started while it already holds more than select()'s 1024
gives every host its real verdict (real sshd hosts, one behind a bastion, and local hosts);
its soft RLIMIT_NOFILE is raised when -j needs it, and a limit still too low is refused
before any host is contacted (descriptors.py)."""

from __future__ import annotations

import re
import socket
import sys

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
from probe_helpers import ENV

pytestmark = pytest.mark.unit

# Sets the descriptor limits (0: soft up to hard, -1: unchanged), opens HELD inheritable
# descriptors and proves the next one is past select()'s FD_SETSIZE, then execs argv[4:].
HOLD = """\
import os, resource, sys
held, soft, hard = (int(v) for v in sys.argv[1:4])
old_soft, old_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
hard = old_hard if hard < 0 else hard
soft = hard if soft == 0 else (min(old_soft, hard) if soft < 0 else soft)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
for _ in range(held):
    os.set_inheritable(os.open(os.devnull, os.O_RDONLY), True)
probe = os.open(os.devnull, os.O_RDONLY)
if held and probe <= 1024:
    sys.exit("only reached descriptor %d" % probe)
os.close(probe)
os.execv(sys.argv[4], sys.argv[4:])
"""


def holding(held: int = 0, soft: int = -1, hard: int = -1) -> list[str]:
    """The interpreter command of a controller started with these descriptors and limits."""
    return [sys.executable, "-c", HOLD, str(held), str(soft), str(hard), sys.executable]


def test_a_controller_holding_1100_descriptors_checks_every_host(tmp_path, fleet, real_venvs):
    old = fleet.add("gpu-old", mounts={ENV: real_venvs["0.20.1"]})
    new = fleet.add("gpu-new", mounts={ENV: real_venvs["0.33.0"]})
    new2 = fleet.add("gpu-new-2", mounts={ENV: real_venvs["0.33.0"]})
    bastion = fleet.add("bastion")
    behind = fleet.add("gpu-behind", mounts={ENV: real_venvs["0.33.0"]})
    fleet.start()
    dead = fleet.next_address()
    inventory = {"all": {"children": {
        "ssh": {"vars": {"venv": ENV}, "hosts": {
            **ssh_hosts(fleet, [old, new, new2]),
            **ssh_hosts(fleet, [behind], ansible_ssh_common_args="-J root@%s:22"
                        % bastion.address),
            "gpu-down": {"ansible_host": dead, "port": free_loopback_port(dead),
                         "key": fleet.client_key}}},
        "here": {"vars": {"connection": "local", "venv": real_venvs["0.33.0"]},
                 "hosts": {"local-a": {}, "local-b": {}}}}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts, "-j", "7",
                         python=holding(1100, soft=0))
    assert run.results is not None, run.stderr[-3000:]
    errors = {h["name"]: h["error"] for h in run.results["hosts"] if h["error"]}
    assert list(errors) == ["gpu-down"], errors
    assert "refused" in errors["gpu-down"]["message"]
    for name, verdict in (("gpu-old", "fail"), ("gpu-new", "pass"), ("gpu-new-2", "pass"),
                          ("gpu-behind", "pass"), ("local-a", "pass"), ("local-b", "pass")):
        assert run.check(name, "dflash-layer-offset")["status"] == verdict, run.host(name)
    assert run.host("gpu-new")["status"] == "pass" and run.host("gpu-old")["status"] == "fail"
    # local hosts see this whole machine: another user's pip install here is a warning
    assert {run.host(n)["status"] for n in ("local-a", "local-b")} <= {"pass", "warn"}
    assert run.code == 1, run.stderr[-3000:]


def limit_recorder(tmp_path) -> str:
    """An interpreter for local hosts that records the soft descriptor limit it inherited
    from the controller, then fails."""
    script = tmp_path / "records-limit"
    script.write_text('#!/bin/sh\nulimit -n > "%s"\nexit 3\n' % (tmp_path / "limit.txt"))
    script.chmod(0o755)
    return str(script)


def local_hosts(count: int, python: str) -> dict:
    return {"all": {"vars": {"connection": "local", "python": python},
                    "hosts": {"here-%03d" % i: {} for i in range(count)}}}


def test_the_soft_limit_is_raised_to_the_hard_limit_when_j_needs_it(tmp_path):
    run = run_fleetcheck(tmp_path, local_hosts(30, limit_recorder(tmp_path)), "-j", "30",
                         python=holding(soft=64, hard=4096))
    assert run.code == 3 and run.results is not None, run.stderr[-2000:]
    assert len(run.results["hosts"]) == 30
    assert all(h["error"]["kind"] == "probe" and "started and failed (exit 3)" in
               h["error"]["message"] for h in run.results["hosts"])
    assert (tmp_path / "limit.txt").read_text().strip() == "4096"


def test_a_limit_too_low_for_j_is_refused_before_connecting(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    inventory = {"all": {"hosts": {"gpu%03d" % i: {"ansible_host": "127.0.0.1", "port": port}
                                   for i in range(100)}}}
    with listener:
        run = run_fleetcheck(tmp_path, inventory, "-j", "100",
                             python=holding(soft=128, hard=128))
        with pytest.raises(BlockingIOError):
            listener.accept()  # no host was contacted
    assert run.code == 2 and run.results is None, run.stderr[-2000:]
    found = re.search(r"-j 100 needs ~(\d+) descriptors; the limit is 128: raise `ulimit -n` "
                      r"or lower -j", run.stderr)
    assert found and int(found.group(1)) >= 300, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr  # one message, not a flood


def test_a_large_j_over_few_hosts_needs_only_what_those_hosts_hold(tmp_path):
    run = run_fleetcheck(tmp_path, local_hosts(3, limit_recorder(tmp_path)), "-j", "1000",
                         python=holding(soft=128, hard=128))
    assert run.code == 3 and len(run.results["hosts"]) == 3, run.stderr[-2000:]
    assert (tmp_path / "limit.txt").read_text().strip() == "128"


def test_at_j_1_the_refusal_only_asks_for_a_higher_limit(tmp_path):
    inventory = {"all": {"hosts": {"gpu1": {"ansible_host": "127.0.0.1", "port": 9}}}}
    run = run_fleetcheck(tmp_path, inventory, "-j", "1", python=holding(soft=16, hard=16))
    assert run.code == 2, run.stderr[-2000:]
    assert re.search(r"-j 1 needs ~\d+ descriptors; the limit is 16: raise `ulimit -n`$",
                     run.stderr.strip()), run.stderr
