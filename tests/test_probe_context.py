"""The probe's context (probe/context.py): each server read once, and every reader of it
(the served facts, the smoke load) agreeing on what it reads, from a real probe run on
this machine against a real process shaped like `vllm serve`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import drafter_trees
from fleetcheck.inventory import Host
from fleetcheck.lab.local_probe import probe_answer
from fleetcheck.lab.testhosts import free_loopback_port
from waits import wait_listening

pytestmark = pytest.mark.unit


def test_the_smoke_load_and_the_served_facts_read_dotted_flags_the_same_way(tmp_path):
    """`--speculative-config JSON` beside `--speculative-config.KEY` flags: vLLM's parser
    appends the dotted keys as one more JSON, which argparse takes. The smoke load's
    served spec and the served facts read the same (dotted) config of the server on the
    smoke URL's port."""
    script = drafter_trees.server_shaped_script(str(tmp_path / "bin"))
    port = free_loopback_port()
    server = subprocess.Popen([script, "serve", "org/target", "--port", str(port),
                               "--speculative-config", json.dumps({"method": "eagle",
                                                                   "model": "org/eagle"}),
                               "--speculative-config.method", "dflash",
                               "--speculative-config.model", "org/dflash",
                               "--speculative-config.num_speculative_tokens", "4"])
    try:
        wait_listening("127.0.0.1", port)
        host = Host(name="local", address="local", connection="local",
                    python="/usr/bin/python3")
        answer = probe_answer(host, [], smoke={"mode": "attach", "time_budget_s": 5,
                                               "url": "http://127.0.0.1:%d" % port})
    finally:
        server.kill()
        server.wait()
    facts = json.loads(answer.stdout)
    (served,) = [s for s in facts["served"]["servers"] if s["pid"] == server.pid]
    assert (served["method"], served["drafter"], served["num_speculative_tokens"]) == \
        ("dflash", "org/dflash", 4), served
    spec = facts["smoke"]["served_spec"]
    assert spec["pid"] == server.pid and spec["from"] == "--speculative-config.KEY", spec
    assert spec["config"] == {"method": "dflash", "model": "org/dflash",
                              "num_speculative_tokens": 4}, spec
    (seen,) = [s for s in facts["servers"]["servers"] if s["pid"] == server.pid]
    assert port in seen["listening"], seen  # its own socket, from /proc/PID/net/tcp
    assert os.getpid() != server.pid


def test_the_probe_stops_itself_at_its_deadline(tmp_path):
    """A controller that asks for the shared analysis and then never answers (a stalled
    link, a killed controller): the probe does not wait for ever, possibly as root. Past
    its time budget it answers why and exits."""
    from fleetcheck.lab.synthetic import FIXED, write_install
    from fleetcheck.wire_protocol import host_plan, probe_command, probe_payload
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED)
    host = Host(name="local", address="local", connection="local", venv=venv)
    plan = dict(host_plan(host, [], None, 2), share_analysis=True)
    probe = subprocess.Popen(["/bin/sh", "-c", probe_command(host.connection_settings())],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    probe.stdin.write(probe_payload(plan))
    probe.stdin.flush()  # stdin stays open: the reply the probe waits for never comes
    try:
        probe.wait(timeout=30)  # its answer is a few lines: the pipe never fills
        out = probe.stdout.read()
    finally:
        probe.kill()
        probe.stdin.close()
    lines = out.decode().splitlines()
    assert lines[0].startswith("fleetcheck-ask "), lines
    assert json.loads(lines[-1])["fatal"] == \
        "the probe passed its deadline (2 s) and stopped itself", lines


def test_the_witness_connects_only_to_loopback_or_the_servers_own_addresses():
    """A --host another process names is never resolved and never reached when it is
    neither loopback nor an address that process's own sockets listen on."""
    from fleetcheck.probe.server_config import witness_address

    class Listening:
        listening = [("10.9.8.7", 8000), ("10.9.8.6", 9000)]

    assert witness_address(None, 8000, Listening) == ("127.0.0.1", None)
    assert witness_address("::", 8000, Listening) == ("::1", None)
    assert witness_address("127.0.0.5", 8000, Listening) == ("127.0.0.5", None)
    assert witness_address("10.9.8.7", 8000, Listening) == ("10.9.8.7", None)
    assert witness_address("localhost", 8000, Listening) == ("127.0.0.1", None)
    for bind in ("10.9.8.6", "192.0.2.1", "metadata.internal", "localhost.evil.example"):
        address, why = witness_address(bind, 8000, Listening)
        assert address is None and "not asked" in why, bind


def test_the_journal_is_read_for_this_boot_this_user_and_since_the_process_started():
    """A pid is reused across boots and over time: journalctl is asked for the server's
    pid and user, this boot, from just before the process started."""
    import time
    from fleetcheck.probe.server_log import journal_query
    from fleetcheck.probe.trust import owner_of
    argv = journal_query(os.getpid(), owner_of(os.getpid()))
    assert argv[:4] == ["journalctl", "_PID=%d" % os.getpid(), "_UID=%d" % os.geteuid(), "-b"]
    assert argv[4] == "--since" and argv[-3:] == ["-o", "cat", "--no-pager"]
    with open("/proc/uptime") as handle:
        booted = time.time() - float(handle.read().split()[0])
    assert booted - 2 <= int(argv[5][1:]) <= time.time()  # this process's start, this boot
