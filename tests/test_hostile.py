"""Hostile hosts and faults over real sshd: one bad box never costs the fleet.

One mixed fleet (every case below plus healthy hosts) is checked in a single run; each test
then asserts one case. The run happens inside a mount namespace whose /etc/resolv.conf
points at 127.0.0.1, so the unresolvable name fails on loopback, never on a real resolver.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import yaml

from fleet_helpers import CliRun, ssh_hosts
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.lab.testhosts import LoopbackFleet, free_loopback_port, keygen
from install_builders import venv_missing_stdlib_module
from probe_helpers import ENV, LoopbackListener, recorded
from waits import wait_process_in

pytestmark = pytest.mark.unit

TIMEOUT = 5
PROBE_USER = "fleetcheck-probe"
MARKUP_VERSION = "0.33.0<script>alert(1)</script>\x1b[31mRED"


def ensure_probe_user() -> str:
    try:
        pwd.getpwnam(PROBE_USER)
    except KeyError:
        # password '*': no password login, yet not "locked" (sshd refuses locked accounts)
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", "--password", "*",
                        PROBE_USER], check=True)
    return PROBE_USER


def run_isolated_dns(tmp, inventory: dict, *args: str, on_start=None) -> CliRun:
    """fleetcheck run, inside a mount namespace where DNS means 127.0.0.1 (nothing there)."""
    inv = tmp / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory, sort_keys=False))
    resolv = tmp / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    out_json, out_html = tmp / "out" / "results.json", tmp / "out" / "report.html"
    cmd = ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
           'mount --bind "$0" /etc/resolv.conf && shift && exec "$@"', str(resolv), "x",
           sys.executable, "-m", "fleetcheck", "run", str(inv), "--json", str(out_json),
           "--html", str(out_html), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp))
    if on_start:
        on_start()
    stdout, stderr = proc.communicate(timeout=300)
    return CliRun(proc.returncode, stdout, stderr,
                  json.loads(out_json.read_text()) if out_json.exists() else None,
                  out_html.read_text() if out_html.exists() else None)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, fleet_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    healthy = str(tmp / "healthy-env")
    write_install(healthy, "0.33.0", FIXED)
    loop_env = str(tmp / "loop-env")
    site = write_install(loop_env, "0.33.0", FIXED)
    os.symlink("..", os.path.join(site, "vllm", "v1", "worker", "up"))
    os.symlink("loop-b", os.path.join(site, "vllm", "v1", "loop-a"))
    os.symlink("loop-a", os.path.join(site, "vllm", "v1", "loop-b"))
    fifo_env = str(tmp / "fifo-env")
    site = write_install(fifo_env, "0.33.0", FIXED)
    os.unlink(os.path.join(site, "vllm/config/speculative.py"))
    os.mkfifo(os.path.join(site, "vllm/config/speculative.py"))
    locked_env = str(tmp / "locked-env")
    site = write_install(locked_env, "0.33.0", FIXED)
    os.chmod(site, 0o700)
    markup_env = str(tmp / "markup-env")
    files = dict(FIXED)
    files["vllm/v1/worker/gpu_model_runner.py"] = "import os\n"
    files["vllm/v1/worker/<b>moved</b>.py"] = (
        "def ids(dflash_config):  # <img src=x onerror=alert(2)>\n"
        "    return [i + 1 for i in dflash_config['target_layer_ids']]  # <img src=x onerror=alert(2)>\n")
    write_install(markup_env, MARKUP_VERSION, files)
    broken_env = venv_missing_stdlib_module(str(tmp / "broken-stdlib"), "hashlib")
    wrong_key = str(tmp / "wrong_key")
    keygen(wrong_key)
    user = ensure_probe_user()

    fleet = fleet_factory(str(tmp / "fleet"))
    add = fleet.add

    def answers_with(name: str, answer: str) -> str:
        """A host whose sshd ForceCommand prints this answer, whatever was asked."""
        path = tmp / ("%s.answer.json" % name)
        path.write_text(answer)
        return add(name, sshd_options={"ForceCommand": "cat %s" % path})

    def readable_authorized_keys(fleet: LoopbackFleet) -> str:
        """sshd reads a non-root user's keys as that user: /tmp/pytest-of-root is 0700."""
        directory = tempfile.mkdtemp(prefix="fleetcheck-authz-")
        os.chmod(directory, 0o755)
        path = os.path.join(directory, "authorized_keys")
        shutil.copy(fleet.client_key + ".pub", path)
        os.chmod(path, 0o644)
        cleanup.append(directory)
        return path

    cleanup: list[str] = []
    hosts = {
        "healthy-1": add("healthy-1", mounts={ENV: healthy}),
        "healthy-2": add("healthy-2", mounts={ENV: healthy}),
        "readonly": add("readonly", mounts={ENV: healthy + ":ro"}),
        "wrong-key": add("wrong-key", mounts={ENV: healthy}),
        "hang": add("hang", sshd_options={"ForceCommand": "sleep 3600"}),
        "flood": add("flood", sshd_options={"ForceCommand": "head -c 300000000 /dev/zero"}),
        "garbage": add("garbage", sshd_options={
            "ForceCommand": "printf '<b>not json</b>\\033[2J\\n'"}),
        "wrong-shape": add("wrong-shape", sshd_options={
            "ForceCommand": """printf '{"probe_version": 1, "install": "x", "signatures": 5}'"""}),
        # a follower's claim that its build was verified, with no build to share
        "forged-share": answers_with("forged-share", json.dumps(dict(
            recorded("0.33.0"), signatures=None, integrity={}, servers={"servers": []},
            shared_analysis={"files": 1, "listings": 1}))),
        # a real probe's answer without the integrity family its plan asked for
        "partial-answer": answers_with("partial-answer", json.dumps(recorded("0.33.0"))),
        "no-python": add("no-python", sshd_options={
            "ForceCommand": 'env PATH=/nonexistent /bin/sh -c "$SSH_ORIGINAL_COMMAND"'}),
        "no-venv": add("no-venv"),
        "broken-stdlib": add("broken-stdlib", mounts={ENV: broken_env}),
        "locked": add("locked", mounts={ENV: locked_env},
                      sshd_options={"AuthorizedKeysFile": readable_authorized_keys(fleet)}),
        "symlink-loop": add("symlink-loop", mounts={ENV: loop_env}),
        "fifo": add("fifo", mounts={ENV: fifo_env}),
        "markup": add("markup", mounts={ENV: markup_env}),
        "metachar-venv": add("metachar-venv", mounts={ENV: healthy}),
        "metachar-python": add("metachar-python", mounts={ENV: healthy}),
        "disconnect": add("disconnect", sshd_options={
            "ForceCommand": "printf '{\"probe_version\": 1, '; kill -9 $PPID"}),
        # its session waits until the test kills the host (the kill lands mid-session)
        "killed": add("killed", sshd_options={
            "ForceCommand": 'sleep 3600; /bin/sh -c "$SSH_ORIGINAL_COMMAND"'}),
    }
    for name, answer in TYPED_ANSWERS.items():
        hosts[name] = answers_with(name, answer)
    fleet.start()
    silent = LoopbackListener(fleet.next_address())
    refused_address = fleet.next_address()
    pwned = str(tmp / "pwned")
    inventory_hosts = ssh_hosts(fleet, hosts.values(), venv=ENV)
    inventory_hosts["wrong-key"]["key"] = wrong_key
    inventory_hosts["no-venv"]["venv"] = "/opt/no-such-env"
    inventory_hosts["no-python"]["venv"] = "/opt/no-such-env"
    inventory_hosts["locked"]["ansible_user"] = user
    inventory_hosts["metachar-venv"]["venv"] = "/opt/ml-env; touch %s-1 $(touch %s-2)" % (
        pwned, pwned)
    inventory_hosts["metachar-python"]["python"] = "/usr/bin/python3`touch %s-3`" % pwned
    inventory_hosts["silent"] = {"ansible_host": silent.address, "port": silent.port,
                                 "key": fleet.client_key}
    inventory_hosts["refused"] = {"ansible_host": refused_address,
                                  "port": free_loopback_port(refused_address),
                                  "key": fleet.client_key}
    inventory_hosts["no-dns"] = {"ansible_host": "gpu-nowhere.invalid",
                                 "key": fleet.client_key}

    def kill_later() -> None:
        def kill() -> None:
            wait_process_in(fleet.sshd_pid(hosts["killed"]), "sleep 3600", TIMEOUT)
            fleet.kill(hosts["killed"])
        threading.Thread(target=kill, daemon=True).start()

    started = time.monotonic()
    try:
        run = run_isolated_dns(tmp, {"all": {"hosts": inventory_hosts}}, "--known-hosts",
                               fleet.known_hosts, "--timeout", str(TIMEOUT), "-j", "32",
                               on_start=kill_later)
        run.wall_s = time.monotonic() - started
        run.pwned = pwned
        yield run
    finally:
        silent.close()
        fleet.stop()
        for directory in cleanup:
            shutil.rmtree(directory, ignore_errors=True)


def finding(**fields) -> str:
    """A probe answer with one dflash-swa finding holding these fields."""
    hit = dict({"file": "vllm/model_executor/models/qwen3_dflash.py", "line": 234,
                "text": "self.attn = Attention("}, **fields)
    return json.dumps({"probe_version": 1, "signatures": {"dflash-swa": {"findings": {
        "attention_call": [hit]}}}})


# Answers of the right shape with the wrong types: host -> (answer, the field named)
TYPED = {
    "typed-version-list": (json.dumps({"probe_version": 1, "install": {"dist_infos": [
        {"path": "/opt/ml-env/x/vllm-0.33.0.dist-info", "version": ["0.33.0"]}]}}),
        "install.dist_infos[0].version: expected a string or null, got a list"),
    "typed-line-string": (finding(line="234"),
                          "signatures.dflash-swa.findings.attention_call[0].line: expected an "
                          "integer or null, got a string"),
    "typed-nan": (finding(offset=float("nan")),
                  "signatures.dflash-swa.findings.attention_call[0].offset: nan is not a number"),
    "typed-deep": ('{"probe_version": 1, "install": {"dist_infos": %s%s}}'
                   % ("[" * 100000, "]" * 100000),
                   "install.dist_infos[...]: nested deeper than 32 levels"),
    "typed-long-text": (finding(text="x" * 1000000),
                        "signatures.dflash-swa.findings.attention_call[0].text: a text of "
                        "1000000 characters (at most 65536)"),
    "typed-10mb-text": (finding(text="x" * 10000000),
                        "exceeded 8 MiB: not a probe answer; the answer was cut inside the "
                        "field signatures.dflash-swa.findings.attention_call[0].text"),
}
TYPED_ANSWERS = {name: answer for name, (answer, _) in TYPED.items()}


def error_of(run: CliRun, host: str) -> dict:
    return run.host(host)["error"] or {}


def test_every_host_is_in_the_report_with_a_state(hostile):
    assert hostile.results["complete"] is True
    names = [h["name"] for h in hostile.results["hosts"]]
    assert len(names) == 24 + len(TYPED) and len(set(names)) == len(names)
    for name in names:
        assert name in hostile.html
    assert hostile.code == 1  # the fifo host has a failing install check


def test_wall_time_is_bounded_by_the_slowest_deadline_not_the_sum(hostile):
    # hang, silent and (possibly) killed each use their whole deadline: serially that
    # would be 3 x TIMEOUT and more; in parallel it is one deadline plus start-up.
    assert hostile.wall_s < 2.5 * TIMEOUT, hostile.wall_s


def test_healthy_and_readonly_hosts_pass(hostile):
    for name in ("healthy-1", "healthy-2", "readonly"):
        assert hostile.host(name)["status"] == "pass", hostile.host(name)


@pytest.mark.parametrize("host, kind, words", [
    ("refused", "unreachable", "connection refused"),
    ("silent", "unreachable", "banner"),
    ("no-dns", "unreachable", "does not resolve"),
    ("wrong-key", "auth", "user root"),
    ("hang", "timeout", "deadline of 5s"),
    ("flood", "protocol", "exceeded 8 MiB"),
    ("garbage", "protocol", "not the probe's JSON"),
    ("wrong-shape", "protocol", "not shaped like the probe's facts"),
    ("forged-share", "protocol", "none to share"),
    ("partial-answer", "protocol", "the answer holds no `integrity` facts, which this host's "
                                   "plan asked for"),
    ("no-python", "probe", "no Python interpreter"),
    ("broken-stdlib", "probe", "started and failed"),
    ("disconnect", "protocol", ""),
    ("killed", "protocol", ""),
])
def test_fault_kinds(hostile, host, kind, words):
    error = error_of(hostile, host)
    assert error.get("kind") == kind, hostile.host(host)
    assert words in error["message"]
    expected = "unreachable" if kind == "unreachable" else "error"
    assert hostile.host(host)["status"] == expected
    assert all(c["status"] == "skip" for c in hostile.host(host)["checks"])


def test_a_partial_answer_is_an_error_whose_row_lists_every_planned_check(hostile):
    """It was a 3-check pass once: the fixes judged, the integrity checks it lacks dropped."""
    healthy = [c["id"] for c in hostile.host("healthy-1")["checks"]]
    partial = hostile.host("partial-answer")
    assert len(healthy) == 9 and [c["id"] for c in partial["checks"]] == healthy
    assert partial["status"] == "error" and partial["vllm"] is None
    assert all(c["message"].startswith("not run: protocol (the answer holds no `integrity`")
               for c in partial["checks"])


@pytest.mark.parametrize("host", sorted(TYPED))
def test_wrong_types_are_a_protocol_error_naming_the_field(hostile, host):
    error = error_of(hostile, host)
    assert error.get("kind") == "protocol", hostile.host(host)
    assert TYPED[host][1] in error["message"]
    assert hostile.host(host)["status"] == "error"
    assert all(c["status"] == "skip" for c in hostile.host(host)["checks"])


def test_an_interpreter_that_starts_and_fails_is_told_in_its_own_words(hostile):
    """The venv's Python read the probe from stdin, then failed on its broken stdlib: the
    error names it and quotes its stderr; python3 never ran on what stdin had left."""
    message = error_of(hostile, "broken-stdlib")["message"]
    assert message.startswith("the probe's interpreter /opt/ml-env/bin/python started and "
                              "failed (exit 1): Traceback"), message
    assert "ModuleNotFoundError: No module named 'hashlib'" in message
    assert "python3" not in message and "IndexError" not in message


def test_no_python_names_both_interpreters_tried_and_why(hostile):
    message = error_of(hostile, "no-python")["message"]
    assert message.startswith("no Python interpreter: tried /opt/no-such-env/bin/python ("), \
        message
    assert "/opt/no-such-env/bin/python: not found) and python3 (" in message, message
    assert message.endswith("python3: not found)"), message


def test_auth_error_names_user_and_key(hostile):
    message = error_of(hostile, "wrong-key")["message"]
    assert "wrong_key" in message and hostile.host("wrong-key")["address"] in message


def test_output_of_a_hostile_host_is_neutral_in_messages(hostile):
    message = error_of(hostile, "garbage")["message"]
    assert "\x1b" not in message
    assert "\x1b" not in hostile.stdout and "\x1b" not in hostile.stderr


def test_disconnect_reports_what_was_learned(hostile):
    message = error_of(hostile, "disconnect")["message"]
    assert "connection" in message and ("closed" in message or "lost" in message)


@pytest.mark.parametrize("host, check_id, words", [
    ("no-venv", "dflash-layer-offset", "venv /opt/no-such-env: no such directory"),
    ("locked", "dflash-layer-offset", "Permission denied"),
    ("fifo", "dflash-cache-drop", "not a regular file"),
])
def test_broken_paths_are_clear_findings(hostile, host, check_id, words):
    check = hostile.check(host, check_id)
    assert check["status"] == "error", check
    assert words in check["message"]


def test_symlink_loop_does_not_hang_and_still_passes(hostile):
    assert hostile.host("symlink-loop")["status"] == "pass"
    assert hostile.host("symlink-loop")["duration_s"] < TIMEOUT


def test_shell_metacharacters_in_inventory_run_nothing(hostile):
    for i in (1, 2, 3):
        assert not os.path.exists("%s-%d" % (hostile.pwned, i))
    venv_host = hostile.check("metachar-venv", "dflash-layer-offset")
    assert venv_host["status"] == "error"
    assert "; touch" in venv_host["message"]  # treated as a path that does not exist
    # the probe fell back to python3; the import check names the configured interpreter
    assert hostile.check("metachar-python", "dflash-layer-offset")["status"] == "pass"
    import_check = hostile.check("metachar-python", "install-import")
    assert import_check["status"] == "fail" and "`touch" in import_check["message"]


def test_markup_from_a_host_is_escaped_in_html_neutral_in_terminal_intact_in_json(hostile):
    host = hostile.host("markup")
    assert host["vllm"]["version"] == MARKUP_VERSION  # intact in JSON
    evidence = hostile.check("markup", "dflash-layer-offset")["evidence"]
    assert evidence[0]["file"] == "vllm/v1/worker/<b>moved</b>.py"
    # the lines that ran carry the file's own text, markup and all
    assert any("<img src=x onerror=alert(2)>" in step["text"] for step in evidence)
    html = hostile.html
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "<b>moved</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;moved&lt;/b&gt;.py" in html
    assert "\x1b" not in html and "\\x1b[31mRED" in html
    assert "\x1b" not in hostile.stdout
    assert "alert(1)" in hostile.stdout  # shown as text, its escape sequence made inert


class CountingProxy(LoopbackListener):
    """Forwards TCP to a real sshd and counts connections: shows what is retried."""

    def __init__(self, address: str, target: tuple[str, int]):
        self.target = target
        super().__init__(address)

    def handle(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(self.target)
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_transient_failures_are_retried_hard_ones_never(tmp_path, fleet):
    env = str(tmp_path / "env")
    write_install(env, "0.33.0", FIXED)
    late = fleet.add("late", mounts={ENV: env})
    target = fleet.add("target", mounts={ENV: env})
    fleet.hosts.remove(late)  # started later, by hand
    fleet.start()
    wrong_key = str(tmp_path / "wrong_key")
    keygen(wrong_key)
    proxy = CountingProxy(fleet.next_address(), (target.address, target.port))
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": dict(
        ssh_hosts(fleet, [late]),
        **{"bad-auth": {"ansible_host": proxy.address, "port": proxy.port, "key": wrong_key}})}}
    with open(fleet.known_hosts, "a") as handle:  # the proxy's address serves target's key
        kind, blob = target.host_key_pub
        handle.write("[%s]:%d %s %s\n" % (proxy.address, proxy.port, kind, blob))

    def start_late() -> None:
        # the sleep is the point: the host comes up a moment after the run began, so the
        # run's first connections to it are refused and only a retry reaches it
        time.sleep(1.0)
        fleet.hosts.append(late)
        fleet.start()

    starter = threading.Thread(target=start_late)
    starter.start()
    try:
        run = run_isolated_dns(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                               "--retries", "4", "--timeout", "30")
    finally:
        starter.join()
        proxy.close()
    assert run.host("late")["status"] == "pass", run.host("late")  # refused, retried, reached
    assert error_of(run, "bad-auth")["kind"] == "auth"
    assert len(proxy.connections) == 1  # auth failures are never retried


@pytest.mark.parametrize("where", ["playbook", "inventory"])
def test_undefined_template_name_is_exit_2_before_any_connection(tmp_path, fleet, where):
    env = str(tmp_path / "env")
    write_install(env, "0.33.0", FIXED)
    target = fleet.add("target", mounts={ENV: env})
    fleet.start()
    proxy = CountingProxy(fleet.next_address(), (target.address, target.port))
    with open(fleet.known_hosts, "a") as handle:  # the proxy's address serves target's key
        kind, blob = target.host_key_pub
        handle.write("[%s]:%d %s %s\n" % (proxy.address, proxy.port, kind, blob))
    command = "{{ venv }}/bin/vllm serve {{ model }} --tensor-parallel-size {{ gpu_count }}"
    smoke = {"enabled": True, "mode": "launch", "command": command}
    entry = {"ansible_host": proxy.address, "port": proxy.port, "key": fleet.client_key,
             "venv": ENV}
    # gpu0 (no smoke) comes first with -j 1: had the template been found at gpu1, gpu0
    # would have been contacted already
    first = dict(entry, smoke={"enabled": False})
    args = ["--known-hosts", fleet.known_hosts, "-j", "1"]
    if where == "playbook":
        from fleetcheck.playbook import PACKAGED_PLAYBOOK
        with open(PACKAGED_PLAYBOOK) as handle:
            playbook = yaml.safe_load(handle)
        playbook["smoke"].update(smoke)
        path = tmp_path / "launch.yaml"
        path.write_text(yaml.safe_dump(playbook, sort_keys=False))
        args += ["--playbook", str(path)]
        named = str(path)
    else:
        entry["smoke"] = smoke
        named = "host 'gpu1'"
    try:
        run = run_isolated_dns(tmp_path, {"all": {"hosts": {"gpu0": first, "gpu1": entry}}},
                               *args)
    finally:
        proxy.close()
    assert run.code == 2, run.stderr
    assert named in run.stderr and "smoke.command" in run.stderr
    assert "'gpu_count', which is not defined" in run.stderr
    assert run.results is None
    assert len(proxy.connections) == 0  # proven before any host was contacted
