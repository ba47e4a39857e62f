"""One box, several users: root serves vLLM on the host's vllm_url port, and a second real
user (`nobody`, through setpriv) runs servers of its own on real loopback sshd hosts.
What nobody starts never decides which install is judged, whose credentials read the
box's files, or how long the probe runs; what nobody's files and ports answer is
bounded; nothing nobody chose is opened before it is checked."""

from __future__ import annotations

import json
import os
import shlex
import shutil

import pytest

import drafter_trees
from drafter_trees import ZLAB
from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.lab.testhosts import free_loopback_port
from second_user import NOBODY, as_nobody, chown_tree, wait_listening, world_dir

pytestmark = [pytest.mark.root, pytest.mark.sshd]


def venv_with_server(top: str, version: str) -> tuple[str, str, str]:
    """(venv, its site-packages, its `vllm` script): a synthetic install of `version`
    whose `vllm serve` answers /v1/models and /version on its --port."""
    venv = os.path.join(top, "venv-" + version)
    site = write_install(venv, version, FIXED, python="/usr/bin/python3")
    with open(os.path.join(venv, "pyvenv.cfg"), "w") as handle:
        handle.write("home = /usr/bin\n")
    script = drafter_trees.server_shaped_script(os.path.join(venv, "bin"))
    return venv, site, script


def test_the_server_on_vllm_url_decides_the_install_not_another_users_older_one(
        tmp_path, fleet):
    """nobody starts a server first (the lowest pid) from nobody's own venv; root's server,
    from root's venv, listens on vllm_url's port with a HF_HOME of its own. The install
    judged is root's, the results say it was chosen for listening there, nobody's install
    is listed as another one, root's environment is read (its HF_HOME kept), and
    install-running does not tell the operator to restart root's server."""
    eve_top = world_dir("fc-eve-")
    _, eve_site, eve_script = venv_with_server(eve_top, "0.33.0")
    chown_tree(eve_top, NOBODY.pw_uid, NOBODY.pw_gid)
    root_top = str(tmp_path / "root-install")
    root_venv, root_site, root_script = venv_with_server(root_top, "0.32.0")
    host = fleet.add("gpu-shared-box")
    fleet.start()
    eve_port, root_port = free_loopback_port(), free_loopback_port()
    fleet.spawn_on(host, as_nobody("/usr/bin/python3 %s serve org/eve --port %d"
                                   % (eve_script, eve_port)))
    wait_listening(eve_port)
    hf_home = str(tmp_path / "root-hf")
    fleet.spawn_on(host, "exec env HF_HOME=%s /usr/bin/python3 %s serve org/target --port %d"
                   % (hf_home, root_script, root_port))
    wait_listening(root_port)
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host],
                                            vllm_url="http://127.0.0.1:%d" % root_port)}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check")
    shutil.rmtree(eve_top, ignore_errors=True)
    assert run.results is not None, run.stderr
    result = run.host("gpu-shared-box")
    assert result.get("error") is None, result
    info = result["vllm"]
    assert info["version"] == "0.32.0", info
    assert info["site_packages"] == root_site, info
    assert "listening on vllm_url's port %d" % root_port in info["found_by"], info
    assert [o["site_packages"] for o in info["other_installs"]] == [eve_site], info
    running = run.check("gpu-shared-box", "install-running")
    assert "restart" not in running["message"], running
    served = {s["port"]: s for s in result["served"] if "pid" in s}
    assert served[root_port]["env"].get("HF_HOME") == hf_home, served[root_port]
    assert served[root_port]["environ_error"] is None, served[root_port]
    assert served[root_port]["judged"] and not served[eve_port]["judged"], served


NESTED_SERVER = '''#!/usr/bin/python3
"""`vllm serve MODEL --port N` whose every answer is 5,000 nested JSON brackets."""
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        data = b"[" * 5000 + b"]" * 5000
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''
SLEEPER = "import time\ntime.sleep(100000)\n"  # a long-lived server's shape, silent


def script_named_vllm(directory: str, text: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "vllm")
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o755)
    return path


class Silent:
    """A port that accepts connections (the kernel's backlog) and never answers."""

    def __init__(self) -> None:
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def test_what_other_users_ports_answer_is_bounded_and_the_judged_server_is_asked_first(
        tmp_path, fleet):
    """Beside root's server on vllm_url's port: a server of nobody's whose port answers
    5,000 nested JSON brackets, and 20 servers of nobody's naming a port that accepts
    and never answers. The nested answer is a refusal of that witness (no RecursionError:
    the served facts stand), root's server is asked first and answers, and the silent
    ports cost at most the host's witness budget: the others say it is spent."""
    eve_top = world_dir("fc-eve-")
    nested = script_named_vllm(os.path.join(eve_top, "nested"), NESTED_SERVER)
    sleeper = script_named_vllm(os.path.join(eve_top, "sleeper"), SLEEPER)
    chown_tree(eve_top, NOBODY.pw_uid, NOBODY.pw_gid)
    _, root_site, root_script = venv_with_server(str(tmp_path / "root-install"), "0.32.0")
    host = fleet.add("gpu-noisy")
    fleet.start()
    silent = Silent()
    nested_port, root_port = free_loopback_port(), free_loopback_port()
    try:
        fleet.spawn_on(host, as_nobody("/usr/bin/python3 %s serve org/nested --port %d"
                                       % (nested, nested_port)))
        for _ in range(20):
            fleet.spawn_on(host, as_nobody("/usr/bin/python3 %s serve org/silent --port %d"
                                           % (sleeper, silent.port)))
        fleet.spawn_on(host, "exec /usr/bin/python3 %s serve org/target --port %d"
                       % (root_script, root_port))
        wait_listening(nested_port)
        wait_listening(root_port)
        inventory = {"all": {"hosts": ssh_hosts(fleet, [host],
                                                vllm_url="http://127.0.0.1:%d" % root_port)}}
        run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                             "--no-import-check", "--timeout", "60")
    finally:
        silent.close()
        shutil.rmtree(eve_top, ignore_errors=True)
    assert run.results is not None, run.stderr
    result = run.host("gpu-noisy")
    assert result.get("error") is None, result
    served = [s for s in result["served"] if "pid" in s]
    assert len(served) == 22, served
    by_port = {}
    for entry in served:
        by_port.setdefault(entry["port"], []).append(entry)
    (root_entry,) = by_port[root_port]
    assert root_entry["judged"] and root_entry["http"]["models"] == ["org/target"], root_entry
    (nested_entry,) = by_port[nested_port]
    assert "nested" in nested_entry["http"]["error"], nested_entry
    quiet = by_port[silent.port]
    spent = [e for e in quiet if "budget" in (e["http"]["error"] or "")]
    timed_out = [e for e in quiet if "timed out" in (e["http"]["error"] or "")]
    assert len(spent) + len(timed_out) == 20 and len(timed_out) <= 3, quiet
    checks = json.dumps(result["checks"])
    assert "RecursionError" not in checks and "no vLLM server runs" not in checks, checks


def test_an_oversized_line_from_the_installs_own_code_is_cut_not_the_hosts_answer(
        tmp_path, fleet):
    """nobody's server is the only install on the box, and its torch raises an error of
    70 KB when imported: the import check (run as nobody) keeps a cut message, and the
    host's answer is no protocol error."""
    eve_top = world_dir("fc-eve-")
    venv, site, script = venv_with_server(eve_top, "0.33.0")
    os.makedirs(os.path.join(site, "torch"))
    with open(os.path.join(site, "torch", "__init__.py"), "w") as handle:
        handle.write("raise ImportError('x' * 70000)\n")
    chown_tree(eve_top, NOBODY.pw_uid, NOBODY.pw_gid)
    host = fleet.add("gpu-loud")
    fleet.start()
    port = free_loopback_port()
    fleet.spawn_on(host, as_nobody("/usr/bin/python3 %s serve org/eve --port %d"
                                   % (script, port)))
    wait_listening(port)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host])}},
                         "--known-hosts", fleet.known_hosts)
    shutil.rmtree(eve_top, ignore_errors=True)
    assert run.results is not None, run.stderr
    result = run.host("gpu-loud")
    assert result.get("error") is None, result
    assert result["vllm"]["site_packages"] == site, result["vllm"]
    assert "no other install was found" in result["vllm"]["found_by"], result["vllm"]
    imported = run.check("gpu-loud", "install-import")
    assert "xxxx" in json.dumps(imported), imported
    assert len(json.dumps(imported)) < 30000, len(json.dumps(imported))


def test_a_fifo_or_a_device_behind_another_users_symlink_is_refused_never_opened(
        tmp_path, fleet):
    """nobody's server names, through symlinks: a drafter config.json, a logging config
    and a hub ref that are root-only FIFOs, each with a writer blocked until someone opens
    it for reading, and a --config file that is a character device with no driver (its
    open fails with ENXIO; O_PATH and fstat succeed). After the run every writer is still
    blocked, and each refusal says the file is not a regular file, not that the device
    could not be opened."""
    import subprocess
    secret = tempfile_dir(0o700)
    fifos = {}
    writers = []
    for name in ("config-fifo", "logging-fifo", "ref-fifo"):
        path = os.path.join(secret, name)
        os.mkfifo(path, 0o600)
        fifos[name] = path
        writers.append(subprocess.Popen(["/bin/sh", "-c", "echo {} > %s" % path]))
    device = os.path.join(secret, "device")
    os.mknod(device, 0o600 | 0o020000, os.makedev(240, 7))  # char, no driver
    eve_top = world_dir("fc-eve-")
    _, _, script = venv_with_server(eve_top, "0.33.0")  # the only install: judged
    drafter = os.path.join(eve_top, "dflash")
    os.makedirs(drafter)
    os.symlink(fifos["config-fifo"], os.path.join(drafter, "config.json"))
    logging_config = os.path.join(eve_top, "logging.json")
    os.symlink(fifos["logging-fifo"], logging_config)
    config = os.path.join(eve_top, "serve.yaml")
    os.symlink(device, config)
    hub = os.path.join(eve_top, "hub")
    drafter_trees.add_to_hub_cache(hub, "org/linked", {"config.json": b"{}"})
    ref = os.path.join(hub, "models--org--linked", "refs", "main")
    os.unlink(ref)
    os.symlink(fifos["ref-fifo"], ref)
    chown_tree(eve_top, NOBODY.pw_uid, NOBODY.pw_gid)
    host = fleet.add("gpu-fifo")
    fleet.start()
    eve_port, linked_port = free_loopback_port(), free_loopback_port()
    spec = shlex.quote(json.dumps({"method": "dflash", "model": drafter,
                                   "num_speculative_tokens": 3}))
    fleet.spawn_on(host, as_nobody(
        "env VLLM_LOGGING_CONFIG_PATH=%s /usr/bin/python3 %s serve org/target --port %d "
        "--config %s --speculative-config %s" % (logging_config, script, eve_port, config,
                                                 spec)))
    fleet.spawn_on(host, as_nobody("env HF_HUB_CACHE=%s /usr/bin/python3 %s serve org/linked "
                                   "--port %d" % (hub, script, linked_port)))
    for port in (eve_port, linked_port):
        wait_listening(port)
    try:
        inventory = {"all": {"hosts": ssh_hosts(fleet, [host])}}
        run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                             "--no-import-check")
        blocked = [w.poll() is None for w in writers]
    finally:
        for path in fifos.values():  # release the writers: opened here, by the test
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        for writer in writers:
            writer.kill()
            writer.wait()
        shutil.rmtree(secret, ignore_errors=True)
        shutil.rmtree(eve_top, ignore_errors=True)
    assert run.results is not None, run.stderr
    result = run.host("gpu-fifo")
    assert result.get("error") is None, result
    assert blocked == [True, True, True], blocked
    served = {s["port"]: s for s in result["served"] if "pid" in s}
    notes = json.dumps(served[eve_port])
    assert "cannot read --config %s: %s: not a regular file" % (config, config) in notes, notes
    assert "No such device" not in json.dumps(run.results)
    assert "not a regular file" in served[linked_port]["target"]["error"], served[linked_port]
    drafters = json.dumps(run.check("gpu-fifo", "drafter-config"))
    assert "%s/config.json: not a regular file" % drafter in drafters, drafters


def tempfile_dir(mode: int) -> str:
    import tempfile
    path = tempfile.mkdtemp(prefix="fc-secret-", dir="/tmp")
    os.chmod(path, mode)
    return path


MARKER_CODE = """import os
with open(os.path.join(%r, "torch-ran-as-%%d" %% os.getpid()), "w") as handle:
    handle.write(str(os.geteuid()))
"""


def with_marking_torch(site: str, markers: str) -> None:
    """A torch in `site` whose import records who ran it in `markers`."""
    os.makedirs(os.path.join(site, "torch"), exist_ok=True)
    with open(os.path.join(site, "torch", "__init__.py"), "w") as handle:
        handle.write(MARKER_CODE % markers)


def runs(markers: str) -> list[str]:
    return sorted(open(os.path.join(markers, n)).read() for n in os.listdir(markers))


def test_a_world_writable_file_in_a_root_installs_closure_keeps_its_code_from_running(
        tmp_path, fleet):
    """Root's install, root's server on vllm_url's port, and one file deep in the install
    (not vllm/, torch/ or transformers/ themselves) that anyone may write: neither the
    import check nor the drafter loader runs the install's code (its torch never runs),
    and the import check says which file kept it from running."""
    markers = world_dir("fc-markers-")
    os.chmod(markers, 0o777)
    _, site, script = venv_with_server(str(tmp_path / "root-install"), "0.32.0")
    with_marking_torch(site, markers)
    loose = os.path.join(site, "vllm", "model_executor", "loose.py")
    os.makedirs(os.path.dirname(loose), exist_ok=True)
    with open(loose, "w") as handle:
        handle.write("")
    os.chmod(loose, 0o666)
    drafter = drafter_trees.write_model_dir(str(tmp_path / "dflash"), ZLAB)
    host = fleet.add("gpu-loose")
    fleet.start()
    port = free_loopback_port()
    spec = shlex.quote(json.dumps({"method": "dflash", "model": drafter,
                                   "num_speculative_tokens": 3}))
    fleet.spawn_on(host, "exec /usr/bin/python3 %s serve org/target --port %d "
                   "--speculative-config %s" % (script, port, spec))
    wait_listening(port)
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host],
                                            vllm_url="http://127.0.0.1:%d" % port)}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    ran = runs(markers)
    shutil.rmtree(markers, ignore_errors=True)
    assert run.results is not None, run.stderr
    assert run.host("gpu-loose").get("error") is None, run.host("gpu-loose")
    assert ran == [], ran
    why = "%s is writable by others" % loose
    imported = run.check("gpu-loose", "install-import")
    assert why in imported["message"], imported
    assert run.check("gpu-loose", "drafter-loaded")["status"] != "pass"  # torch never ran


def test_each_drafter_is_loaded_as_its_own_servers_owner(tmp_path, fleet):
    """Root's clean install serves on vllm_url's port with a drafter of root's; nobody's
    server, from the same install, names a drafter directory of nobody's. The loader
    runs twice: as root for root's drafter, as nobody for nobody's, never nobody's
    directory as root."""
    markers = world_dir("fc-markers-")
    os.chmod(markers, 0o777)
    root_top = world_dir("fc-root-install-")
    _, site, script = venv_with_server(root_top, "0.32.0")
    with_marking_torch(site, markers)
    mine = drafter_trees.write_model_dir(os.path.join(root_top, "dflash-root"), ZLAB)
    eve_top = world_dir("fc-eve-")
    theirs = drafter_trees.write_model_dir(os.path.join(eve_top, "dflash-eve"), ZLAB)
    chown_tree(eve_top, NOBODY.pw_uid, NOBODY.pw_gid)
    host = fleet.add("gpu-two-drafters")
    fleet.start()
    root_port, eve_port = free_loopback_port(), free_loopback_port()
    spec = lambda d: shlex.quote(json.dumps({"method": "dflash", "model": d,
                                             "num_speculative_tokens": 3}))
    fleet.spawn_on(host, "exec /usr/bin/python3 %s serve org/target --port %d "
                   "--speculative-config %s" % (script, root_port, spec(mine)))
    fleet.spawn_on(host, as_nobody("/usr/bin/python3 %s serve org/target --port %d "
                                   "--speculative-config %s" % (script, eve_port,
                                                                spec(theirs))))
    wait_listening(root_port)
    wait_listening(eve_port)
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host],
                                            vllm_url="http://127.0.0.1:%d" % root_port)}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check")
    ran = runs(markers)
    for top in (markers, root_top, eve_top):
        shutil.rmtree(top, ignore_errors=True)
    assert run.results is not None, run.stderr
    assert run.host("gpu-two-drafters").get("error") is None, run.host("gpu-two-drafters")
    assert ran == sorted(["0", str(NOBODY.pw_uid)]), ran


def test_a_server_in_another_mount_namespace_is_never_read_through_the_hosts_paths(
        tmp_path, fleet):
    """A server started under `unshare -m` with another drafter bind-mounted over the
    directory its command line names: the host's directory at that path holds a
    different config.json. The probe never judges the host's file for it: the server is
    listed, and its entry says it runs in another mount namespace and what to set."""
    from drafter_trees import variant
    _, _, script = venv_with_server(str(tmp_path / "root-install"), "0.32.0")
    named = drafter_trees.write_model_dir(str(tmp_path / "dflash"), ZLAB)  # the host's
    theirs = drafter_trees.write_model_dir(str(tmp_path / "dflash-theirs"),
                                           variant(ZLAB, block_size=8))
    host = fleet.add("gpu-mounts")
    fleet.start()
    port = free_loopback_port()
    spec = json.dumps({"method": "dflash", "model": named, "num_speculative_tokens": 3})
    inner = "mount --bind %s %s && exec /usr/bin/python3 %s serve org/target --port %d " \
        "--speculative-config %s" % (theirs, named, script, port, shlex.quote(spec))
    fleet.spawn_on(host, "exec unshare -m --propagation private sh -c %s"
                   % shlex.quote(inner))
    wait_listening(port)
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host],
                                            vllm_url="http://127.0.0.1:%d" % port)}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-import-check")
    assert run.results is not None, run.stderr
    result = run.host("gpu-mounts")
    assert result.get("error") is None, result
    (served,) = [s for s in result["served"] if "pid" in s]
    assert any("runs in another mount namespace" in n and "container:" in n
               for n in served["notes"]), served
    assert served["drafter"]["dir"] is None and served["drafter"]["config_sha256"] is None, \
        served
    assert named not in json.dumps(run.check("gpu-mounts", "served-log")), \
        run.check("gpu-mounts", "served-log")


def test_reading_as_another_user_reads_with_that_users_rights_and_always_switches_back(
        tmp_path):
    """trust.reading_as, as root: inside it a root-only file is refused by the kernel
    itself, even through a symlink nobody made, and a file nobody may read is read; after
    it (an exception included) the probe is root again, with its own groups."""
    from fleetcheck.probe import files
    from fleetcheck.probe.trust import code_runner, reading_as
    secret = tmp_path / "secret"
    secret.write_text("root only")
    os.chmod(secret, 0o600)
    open_dir = world_dir("fc-reading-")
    shared = os.path.join(open_dir, "shared")
    with open(shared, "w") as handle:
        handle.write("anyone")
    os.chmod(shared, 0o644)
    link = os.path.join(open_dir, "link")
    os.symlink(str(secret), link)
    import subprocess
    sleeper = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=%d" % NOBODY.pw_gid,
                                "--clear-groups", "sleep", "60"])
    try:
        owner = wait_for_owner(sleeper.pid, NOBODY.pw_uid)
        groups = os.getgroups()
        with pytest.raises(RuntimeError):
            with reading_as(owner):
                assert os.geteuid() == NOBODY.pw_uid and os.getuid() == 0
                assert files.read_text(shared) == "anyone"
                for path in (str(secret), link):
                    with pytest.raises(files.ProbeFileError, match="Permission denied"):
                        files.read_text(path)
                assert code_runner(None, "/usr/bin/python3", open_dir)[0] is None
                raise RuntimeError("a reader's bug")
        assert os.geteuid() == 0 and os.getgroups() == groups
        assert files.read_text(str(secret)) == "root only"
    finally:
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(open_dir, ignore_errors=True)


def wait_for_owner(pid: int, uid: int):
    from fleetcheck.probe.trust import owner_of
    from waits import wait_for
    return wait_for(lambda: (lambda o: o if o is not None and o.uid == uid else None)(
        owner_of(pid)), 10, "pid %d running as uid %d" % (pid, uid))
