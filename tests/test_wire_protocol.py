"""The wire protocol (wire_protocol.py) without sshd: the command line quotes every inventory
value (run here by a real /bin/sh, with an interpreter path full of shell
metacharacters), the fallback to python3 only for an interpreter that cannot be executed,
become's wrapping, and every way an answer is refused by decode_answer, each with the kind
and words a user sees."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from fleetcheck.connectors.base import CommandResult, TransportError
from fleetcheck.connection_settings import ConnectionSettings
from fleetcheck.inventory import Host
from fleetcheck.text import printable
from fleetcheck.wire_protocol import (FALLBACK, cut_answer_field, decode_answer, host_plan,
                                      probe_command, probe_payload, serving_port)
from install_builders import venv_missing_stdlib_module
from probe_helpers import assert_holds

pytestmark = pytest.mark.unit

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "facts")
HOSTILE = "we ird; touch PWNED $(touch PWNED2) `touch PWNED3` 'q\" \\ *"


def real_facts() -> dict:
    with open(os.path.join(FIXTURES, "vllm-0.33.0.json"), encoding="utf-8") as handle:
        return json.load(handle)["facts"]


def run_locally(host: Host, cwd: str) -> CommandResult:
    proc = subprocess.run(["/bin/sh", "-c", probe_command(host.connection_settings())],
                          input=probe_payload(host_plan(host, [])), capture_output=True,
                          cwd=cwd, timeout=60)
    return CommandResult(proc.stdout, proc.stderr, proc.returncode)


def test_an_interpreter_path_of_shell_metacharacters_is_one_word_that_runs_nothing(tmp_path):
    directory = tmp_path / HOSTILE
    directory.mkdir()
    python = str(directory / "python")
    os.symlink(sys.executable, python)
    host = Host(name="h", address="h", connection="local", python=python)
    assert shlex.split(probe_command(host.connection_settings()))[0] == python
    facts = decode_answer(run_locally(host, str(tmp_path)), host.connection_settings())
    assert facts.python.executable == python  # the probe ran under that very path
    assert sorted(os.listdir(tmp_path)) == [HOSTILE]  # and no PWNED file was made


def cannot_be_executed(tmp_path, kind: str) -> str:
    """An interpreter path the shell cannot execute at all (exit 127 or 126)."""
    path = tmp_path / ("venv of %s" % kind) / "bin" / "python"
    path.parent.mkdir(parents=True)
    if kind == "a dangling link":  # a venv whose base Python was removed
        os.symlink(str(tmp_path / "removed" / "python3.11"), str(path))
    elif kind == "a directory":
        path.mkdir()
    elif kind == "a file without x":
        path.write_text("#!/bin/sh\nexit 0\n")
    elif kind == "a script whose interpreter is gone":
        path.write_text("#!/nonexistent/python\n")
        path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("kind", ["nothing", "a dangling link", "a directory",
                                  "a file without x", "a script whose interpreter is gone"])
def test_an_interpreter_that_cannot_be_executed_falls_back_to_python3(tmp_path, kind):
    host = Host(name="h", address="h", connection="local",
                python=cannot_be_executed(tmp_path, kind))
    result = run_locally(host, str(tmp_path))
    facts = decode_answer(result, host.connection_settings())
    assert facts.probe_version and os.path.basename(facts.python.executable) \
        .startswith("python3")
    assert FALLBACK in result.stderr  # the shell said why before python3 ran


def test_an_interpreter_that_starts_and_fails_is_a_probe_error_in_its_own_words(tmp_path):
    """The venv's Python reads the probe from stdin, then fails on its broken stdlib:
    python3 is not run on what stdin has left (that gave an IndexError from the
    bootstrap, and hid the real failure)."""
    env = venv_missing_stdlib_module(str(tmp_path), "hashlib")
    host = Host(name="h", address="h", connection="local", venv=env)
    result = run_locally(host, str(tmp_path))
    assert result.exit_status == 1 and FALLBACK not in result.stderr
    error = refused(result, host.connection_settings())
    assert error.kind == "probe"
    assert error.message.startswith("the probe's interpreter %s/bin/python started and "
                                    "failed (exit 1): Traceback" % env), error.message
    assert "ModuleNotFoundError: No module named 'hashlib'" in error.message
    assert "IndexError" not in error.message


def test_become_wraps_the_very_same_command_under_sudo_n():
    plain = Host(name="h", address="h", python="/opt/env/bin/python")
    become = Host(name="h", address="h", python="/opt/env/bin/python", become=True,
                  become_user="svc; id")
    words = shlex.split(probe_command(become.connection_settings()))
    assert words[:6] == ["sudo", "-n", "-u", "svc; id", "--", "/bin/sh"]
    assert words[6:] == ["-c", probe_command(plain.connection_settings())]


def test_the_plan_carries_inventory_values_as_data_only():
    host = Host(name="h", address="h", venv="/opt/$(reboot)", vllm_url="http://x:8123/v1")
    plan = host_plan(host, [{"id": "s"}])
    assert plan["venv"] == "/opt/$(reboot)" and plan["serving_port"] == 8123
    assert shlex.split(probe_command(host.connection_settings()))[0] == \
        "/opt/$(reboot)/bin/python"
    payload = probe_payload(plan)
    assert payload.endswith(json.dumps(plan).encode("utf-8") + b"\n")


@pytest.mark.parametrize("url, port", [("http://127.0.0.1:8001", 8001), ("https://gpu", 443),
                                       ("http://gpu/v1", 80)])
def test_serving_port(url, port):
    assert serving_port(url) == port


def answer(stdout: bytes, stderr: bytes = b"", status: int = 0) -> CommandResult:
    return CommandResult(stdout, stderr, status)


HOST = Host(name="h", address="h", python="/opt/env/bin/python").connection_settings()
SUDO = Host(name="h", address="h", become=True, become_user="svc").connection_settings()


def refused(result: CommandResult, host: ConnectionSettings = HOST,
            required=()) -> TransportError:
    with pytest.raises(TransportError) as caught:
        decode_answer(result, host, required)
    return caught.value


def test_a_real_answer_decodes_to_its_facts():
    facts = real_facts()
    assert_holds(decode_answer(answer(json.dumps(facts).encode()), HOST), facts)


@pytest.mark.parametrize("result, kind, words", [
    (answer(b"", b"sh: 1: /opt/env/bin/python: not found\n" + FALLBACK +
            b"sh: 1: exec: python3: not found\n", 127), "probe",
     ["no Python interpreter: tried /opt/env/bin/python (sh: 1: /opt/env/bin/python: not "
      "found) and python3 (sh: 1: exec: python3: not found)"]),
    (answer(b"", b"sh: 1: /opt/env/bin/python: Permission denied\n" + FALLBACK +
            b"Traceback (most recent call last):\nIndexError: list index out of range\n", 1),
     "probe", ["python3 (run because /opt/env/bin/python cannot be executed: sh: 1: "
               "/opt/env/bin/python: Permission denied) started and failed (exit 1): "
               "Traceback (most recent call last): | IndexError"]),
    (answer(b"", b"Fatal Python error: init_fs_encoding\n\x1b[2J" + b"x" * 5000 + b"\nEND",
            1), "probe",
     ["the probe's interpreter /opt/env/bin/python started and failed (exit 1): Fatal Python "
      "error: init_fs_encoding | ?[2J", "x ... x", "x | END"]),
    (answer(b"", b"", 139), "probe", ["failed (exit 139): no message on stderr"]),
    (answer(b"Traceback (most recent call last)\n", b"boom", 1), "probe",
     ["the probe's interpreter /opt/env/bin/python started and failed (exit 1): boom"]),
    (answer(b"{\"probe_version\": 1, \"cut\": ", b"Killed", 137), "protocol",
     ["answer is not the probe's JSON (exit 137", "stderr 'Killed'"]),
    (answer(b"Traceback (most recent call last)\n", b"boom", 0), "protocol",
     ["answer is not the probe's JSON (exit 0; stdout starts 'Traceback", "stderr 'boom'"]),
    (answer(b"\xff\xfe not utf-8"), "protocol", ["answer is not the probe's JSON"]),
    (answer(b"[1, 2]"), "protocol", ["answer is JSON but not the probe's facts"]),
    (answer(b"{\"python\": {}}"), "protocol", ["answer is JSON but not the probe's facts"]),
    (answer(b"{\"probe_version\": 1, \"fatal\": \"cannot read /etc\\u001b[31m\"}"), "probe",
     ["probe failed on the host: cannot read /etc?[31m"]),
    (answer(b"{\"probe_version\": 1, \"x\": " + b"[" * 5000 + b"]" * 5000 + b"}"), "protocol",
     ["not shaped like the probe's facts", "nested deeper than 32 levels"]),
])
def test_what_is_not_an_answer_says_why(result, kind, words):
    error = refused(result)
    assert error.kind == kind
    for word in words:
        assert word in error.message, error.message


def test_without_a_venv_or_python_only_python3_is_tried():
    host = Host(name="h", address="h")
    assert shlex.split(probe_command(host.connection_settings()))[:2] == ["exec", "python3"]
    error = refused(answer(b"", b"bash: line 1: exec: python3: not found\n", 127),
                    host.connection_settings())
    assert error.kind == "probe" and error.message == (
        "no Python interpreter: tried python3 (bash: line 1: exec: python3: not found)")


def test_a_misshapen_answer_names_its_field():
    facts = real_facts()
    facts["python"]["version"] = 3.11
    error = refused(answer(json.dumps(facts).encode()))
    assert error.kind == "protocol" and "python.version" in error.message


def test_a_fact_the_plan_asked_for_must_be_there():
    error = refused(answer(json.dumps(real_facts()).encode()), required=("smoke",))
    assert error.kind == "protocol" and "smoke" in error.message


@pytest.mark.parametrize("stderr, words", [
    (b"sudo: a password is required\n", ["sudo -n wants a password", "as svc", "NOPASSWD"]),
    (b"sh: 1: sudo: not found\n", ["sudo is not installed on this host"]),
    (b"sudo: user is not in the sudoers file\n", ["sudo refused to run the probe as svc",
                                                  "not in the sudoers file"]),
])
def test_sudo_refusals_are_auth_errors(stderr, words):
    error = refused(answer(b"", stderr, 1), SUDO)
    assert error.kind == "auth"
    for word in words:
        assert word in error.message, error.message


def test_without_become_a_sudo_message_is_no_auth_error():
    error = refused(answer(b"", b"sudo: a password is required\n", 1))
    assert error.kind == "probe" and error.message.endswith("(exit 1): sudo: a password is "
                                                            "required"), error.message


def test_printable_neutralises_control_bytes_and_cuts():
    assert printable(b"ok\x1b[2J\x07\ttab\nline\x7f", 200) == "ok?[2J?\ttab\nline?"
    assert printable(b"x" * 500, 10) == "x" * 10
    assert printable(b"\xff") == "\ufffd"


def test_cut_answer_field_names_where_the_cut_fell():
    text = json.dumps(real_facts()).encode()
    cut = text[:text.index(b"\"executable\"") + 20]
    assert cut_answer_field(cut) == "python.executable"
    assert cut_answer_field(b"not json at all") is None
