"""The connector seam: the dialogue written once (here over a subprocess's real pipes,
and over real sshd), local hosts getting shared analysis, cancel and deadlines, the
registry finding connections by module, and a command never sent twice."""

from __future__ import annotations

import os
import shlex
import threading
import time

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.connectors import Registry, connection_names, connector_class
from fleetcheck.connectors.base import Deadline, TransportError
from fleetcheck.connectors.dialogue import STOPPABLE
from fleetcheck.connectors.local import LocalConnector
from fleetcheck.inventory import Host
from waits import gone_or_zombie, wait_for

pytestmark = pytest.mark.unit

LOCAL = Host(name="here", address="here", connection="local")


def local_run(command: str, seconds: float = 20, payload: bytes = b"", cancel=None,
              answer=None):
    with LocalConnector().open(LOCAL, Deadline(seconds)) as session:
        return session.run(command, payload, cancel, answer)


def test_local_dialogue_answers_the_first_line_and_holds_stdin_to_the_end():
    asked = []

    def answer(line: bytes) -> bytes:
        asked.append(line)
        return b"forty-two\n"

    # stdin stays open after the reply: cat waits for an end that does not come, until
    # its timeout (1 s: exit 124)
    result = local_run("read plan; echo \"ask $plan\"; read reply; echo \"got $reply\"; "
                       "timeout 1 cat; echo $? >&2", payload=b"p1\n", answer=answer)
    assert asked == [b"ask p1"]
    assert result.stdout == b"got forty-two\n" and result.stderr == b"124\n"
    assert result.exit_status == 0


def test_local_cancel_closes_a_held_stdin_and_waits_for_the_command_to_stop(tmp_path):
    """The probe's dialogue (an answerer given) on cancel: its stdin closes, and a
    command that said it runs something to stop has its grace to stop it; the run is
    still interrupted."""
    cancel = threading.Event()
    stopped = tmp_path / "stopped"
    threading.Timer(0.5, cancel.set).start()
    with pytest.raises(TransportError) as raised:
        local_run("echo started; printf %s >&2; cat; touch %s"
                  % (shlex.quote(STOPPABLE.decode()), stopped), answer=lambda line: None,
                  cancel=cancel)
    assert raised.value.kind == "interrupted"
    assert stopped.exists()  # it saw stdin end and finished before the session closed


def test_local_cancel_leaves_a_held_command_that_has_nothing_to_stop_at_once(tmp_path):
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(TransportError) as raised:
        local_run("echo started; sleep 300", answer=lambda line: None, cancel=cancel)
    assert raised.value.kind == "interrupted" and time.monotonic() - started < 10


def test_a_local_command_stays_in_fleetchecks_process_group():
    result = local_run("ps -o pgid= -p $$")
    assert int(result.stdout) == os.getpgrp()


def test_local_line_that_is_no_question_stays_in_stdout():
    result = local_run("echo hello; echo world; exit 3", answer=lambda line: None)
    assert result.stdout == b"hello\nworld\n" and result.exit_status == 3


def test_local_deadline_kills_the_command_and_what_it_started(tmp_path):
    marker = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(TransportError) as raised:
        local_run("sleep 300 & echo $! > %s; wait" % marker, seconds=1.5)
    assert raised.value.kind == "timeout"
    assert time.monotonic() - started < 10
    pid = int(marker.read_text())
    wait_for(lambda: gone_or_zombie(pid), 10, "the backgrounded sleep killed at the deadline")


def test_local_cancel_interrupts_a_running_command():
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    with pytest.raises(TransportError) as raised:
        local_run("sleep 300", cancel=cancel)
    assert raised.value.kind == "interrupted"


def test_local_flood_is_capped_as_protocol_error():
    with pytest.raises(TransportError) as raised:
        local_run("yes flood")
    assert raised.value.kind == "protocol" and "exceeded" in raised.value.message


def test_registry_finds_connections_by_module():
    assert {"ssh", "local"} <= set(connection_names())
    assert "container" not in connection_names() and "base" not in connection_names()
    assert connector_class("local") is LocalConnector
    registry = Registry(settings=None)
    assert registry.for_host(LOCAL) is registry.for_host(LOCAL)


def test_local_hosts_share_the_analysis_of_their_build(tmp_path, real_venvs):
    venv = real_venvs["0.33.0"]
    inventory = {"all": {"vars": {"connection": "local", "venv": venv},
                         "hosts": {"here-a": {}, "here-b": {}, "here-c": {}}}}
    run = run_fleetcheck(tmp_path, inventory, "-j", "1")
    assert run.code == 0, run.stdout[-3000:]
    notes = [run.host(n)["analysis"] for n in ("here-a", "here-b", "here-c")]
    assert notes[0] is None, notes
    for note in notes[1:]:
        assert note.startswith("fix analysis shared with here-a: "), notes


def test_a_command_that_was_sent_is_never_sent_again(tmp_path, fleet):
    """The connection dies after the command started: with --retries 3 the host is a
    protocol error, and the command ran exactly once."""
    runs = tmp_path / "runs.log"
    host = fleet.add("dies", sshd_options={
        "ForceCommand": "echo ran >> %s; kill -9 $PPID" % runs})
    fleet.start()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host])}},
                         "--known-hosts", fleet.known_hosts, "--retries", "3", "--timeout", "20")
    assert run.results, run.stderr[-3000:]
    assert run.host("dies")["error"]["kind"] == "protocol", run.host("dies")
    assert runs.read_text() == "ran\n"
