"""Real Podman containers (Debian's podman with runc; no registry, so `--rootfs /:O`, an
overlay on this machine's root) holding a real vLLM wheel installed the official image's
way (`uv pip install --system` into /usr/local/lib/python3.11/dist-packages of Debian's
/usr/bin/python3). Checked locally and from a loopback sshd box; each test run keeps its
containers in a storage of its own (CONTAINERS_STORAGE_CONF), so other runs' containers
are never seen."""

from __future__ import annotations

import os
import socket

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from podman_installs import (ROOTFS, RUN_FLAGS, assert_official_image_install, mounts, podman,
                            private_storage, release_storage, system_site_by_uv)

pytestmark = pytest.mark.containers


@pytest.fixture(scope="module")
def boxes(tmp_path_factory):
    work = tmp_path_factory.mktemp("containers")
    env, conf = private_storage(work)
    site = system_site_by_uv(env)
    server = work / "bin" / "vllm"
    server.parent.mkdir()
    server.write_text("import time\ntime.sleep(100000)\n")  # `vllm serve`'s command line
    common = ["run", "-d", *RUN_FLAGS, *mounts(site)]
    podman(env, *common, "--name", "vllm", ROOTFS, "/usr/bin/python3", str(server), "serve",
           "/models/qwen", "--port", "8000")
    podman(env, *common, "--name", "sidecar", ROOTFS, "/usr/bin/python3", "-c",
           "import time; time.sleep(100000)")
    podman(env, *common, "--name", "stopped", ROOTFS, "/usr/bin/python3", "-c", "pass")
    podman(env, "wait", "stopped")
    try:
        yield work, env, conf
    finally:
        podman(env, "rm", "-f", "-t", "0", "vllm", "sidecar", "stopped", check=False)
        release_storage(work / "graph")


def test_named_and_auto_containers_locally(tmp_path, boxes):
    _, env, _ = boxes
    inventory = {"all": {"vars": {"connection": "local", "container_engine": "podman"},
                         "hosts": {"here": {"container": "vllm", "container_user": "root"},
                                   "box": {"container": "auto"}}}}
    run = run_fleetcheck(tmp_path, inventory, env=env)
    assert [h["name"] for h in run.results["hosts"]] == ["here", "box/vllm"], run.stdout
    assert_official_image_install(run, "here")
    assert_official_image_install(run, "box/vllm")
    assert "box/vllm" in run.html and "box/vllm" in run.stdout
    assert "found by running server pid" in run.stdout and "found by running server" in run.html
    # one build in two containers' views: the ask/answer dialogue crosses podman exec -i
    notes = sorted(str(run.host(n)["analysis"]) for n in ("here", "box/vllm"))
    assert notes[0] == "None" and notes[1].startswith("fix analysis shared with "), notes
    assert run.code == 0, run.stdout[-2000:]


def test_named_and_auto_containers_over_ssh(tmp_path, fleet, boxes):
    _, env, conf = boxes
    box = fleet.add("gpu-box", own_pids=False,
                    sshd_options={"SetEnv": "CONTAINERS_STORAGE_CONF=%s" % conf})
    fleet.start()
    inventory = {"all": {"vars": {"container_engine": "podman"}, "hosts": {}}}
    inventory["all"]["hosts"].update(ssh_hosts(fleet, [box], container="auto"))
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    assert [h["name"] for h in run.results["hosts"]] == ["gpu-box/vllm"], run.stdout
    assert_official_image_install(run, "gpu-box/vllm")


def test_container_faults_are_container_errors_quoting_the_engine(tmp_path, boxes):
    _, env, _ = boxes
    marker = tmp_path / "pwned"
    hosts = {"no-such": {"container": "nope; touch pwned"},  # run from tmp_path
             "stopped": {"container": "stopped"},
             "no-daemon": {"container": "vllm", "container_engine": "docker"}}
    hosts["no-such"]["container_engine"] = "podman"
    hosts["stopped"]["container_engine"] = "podman"
    inventory = {"all": {"vars": {"connection": "local"}, "hosts": hosts}}
    run = run_fleetcheck(tmp_path, inventory, env=env, timeout=120)
    assert not marker.exists()
    assert run.results, run.stderr[-2000:]
    errors = {name: run.host(name)["error"] for name in hosts}
    assert all(e and e["kind"] == "container" for e in errors.values()), errors
    assert "nope; touch" in errors["no-such"]["message"]
    assert "no such container" in errors["no-such"]["message"]
    assert "stopped" in errors["stopped"]["message"]
    assert "state improper" in errors["stopped"]["message"]
    # /usr/local/bin/docker, pinned: a Docker client with no daemon here
    assert "Cannot connect to the Docker daemon" in errors["no-daemon"]["message"]
    assert run.code == 3

    # no engine on the box at all; and `auto` on a box whose store has no vLLM container
    empty = tmp_path / "empty-storage.conf"
    empty.write_text('[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n'
                     % (tmp_path / "g", tmp_path / "r"))
    inventory = {"all": {"vars": {"connection": "local"}, "hosts": {
        "bare": {"container": "vllm"},
        "none-found": {"container": "auto", "container_engine": "podman"}}}}
    bare_env = dict(env, CONTAINERS_STORAGE_CONF=str(empty))
    run = run_fleetcheck(tmp_path, {"all": {"vars": {"connection": "local"}, "hosts": {
        "bare": {"container": "vllm"}}}}, env=dict(bare_env, PATH="/nonexistent"))
    assert run.host("bare")["error"]["kind"] == "container", run.host("bare")
    assert "not found on the box" in run.host("bare")["error"]["message"]
    run = run_fleetcheck(tmp_path, {"all": {"vars": {"connection": "local"}, "hosts": {
        "none-found": {"container": "auto", "container_engine": "podman"}}}}, env=bare_env)
    error = run.host("none-found")["error"]
    assert error["kind"] == "container" and "found no running container" in error["message"]
    release_storage(tmp_path / "g")


def unix_listener(path: str, mode: int) -> "socket.socket":
    """A Docker socket that accepts and never answers (a wedged daemon)."""
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    sock.listen(8)
    os.chmod(path, mode)
    return sock


def test_engine_socket_denied_over_ssh_and_a_daemon_that_never_answers(tmp_path, fleet):
    """Docker's own client (the machine's /usr/local/bin/docker): as an unprivileged
    login its socket is refused; and a daemon that never answers is given a quarter of
    the host's deadline (2 s of 4) to say whether it holds the container."""
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(sockets, 0o755)
    denied = unix_listener(str(sockets / "root-only.sock"), 0o600)
    silent = unix_listener(str(sockets / "silent.sock"), 0o666)
    try:
        box = fleet.add("gpu-denied", sshd_options={
            "SetEnv": "DOCKER_HOST=unix://%s HOME=/tmp" % (sockets / "root-only.sock"),
            "ForceCommand": 'setpriv --reuid=65534 --regid=65534 --clear-groups '
                            '/bin/sh -c "$SSH_ORIGINAL_COMMAND"'})
        fleet.start()
        inventory = {"all": {"vars": {"container_engine": "docker"}, "hosts": {}}}
        inventory["all"]["hosts"].update(ssh_hosts(fleet, [box], container="vllm"))
        inventory["all"]["hosts"]["wedged"] = {"connection": "local", "container": "vllm",
                                               "timeout": 4}
        env = dict(os.environ, DOCKER_HOST="unix://%s" % (sockets / "silent.sock"))
        run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts, env=env)
        error = run.host("gpu-denied")["error"]
        assert error["kind"] == "container", error
        assert "container vllm on gpu-denied" in error["message"]
        assert "permission denied while trying to connect to the Docker daemon socket" in \
            error["message"]
        wedged = run.host("wedged")
        assert wedged["error"]["kind"] == "container", wedged["error"]
        assert "docker: did not answer within 2 s" in wedged["error"]["message"]
        assert wedged["duration_s"] < 4
    finally:
        denied.close()
        silent.close()


def test_an_exec_that_hangs_is_cut_at_the_host_deadline(tmp_path, boxes):
    """The container's `sh` (first in its PATH) never returns: the engine found the
    container and started the command, which the deadline ends."""
    work, env, _ = boxes
    hang = work / "hang"
    hang.mkdir(exist_ok=True)
    (hang / "sh").write_text("#!/bin/sh\nexec sleep 1000\n")
    (hang / "sh").chmod(0o755)
    podman(env, "run", "-d", *RUN_FLAGS, "-v", "%s:/hang:ro" % hang, "-e",
           "PATH=/hang:/usr/bin:/bin", "--name", "hangs", ROOTFS, "/bin/sleep", "100000")
    try:
        inventory = {"all": {"hosts": {"here": {"connection": "local", "container": "hangs",
                                                "container_engine": "podman", "timeout": 5}}}}
        run = run_fleetcheck(tmp_path, inventory, env=env)
    finally:
        podman(env, "rm", "-f", "-t", "0", "hangs", check=False)
    error = run.host("here")["error"]
    assert error["kind"] == "container", error
    assert "container hangs on here: exec did not finish within the host deadline of 5s" in \
        error["message"]
    assert run.host("here")["duration_s"] < 15


def test_container_user_runs_the_probe_as_that_user(tmp_path, boxes):
    """`container_user` is `exec -u`: as nobody the probe cannot read the root server's
    /proc/PID/maps, and still finds the install from the server's interpreter."""
    _, env, _ = boxes
    inventory = {"all": {"hosts": {"nobody": {"connection": "local", "container": "vllm",
                                              "container_engine": "podman",
                                              "container_user": "65534"}}}}
    run = run_fleetcheck(tmp_path, inventory, env=env)
    assert run.host("nobody")["error"] is None, run.host("nobody")
    assert run.host("nobody")["vllm"]["version"] == "0.33.0"
    assert run.check("nobody", "dflash-layer-offset")["status"] == "pass"


def test_what_a_server_inside_a_container_serves_is_read_from_the_containers_proc(
        tmp_path, boxes):
    """The served facts come from the container's own /proc (its PID namespace): the
    server's command line with its speculative config, its environment, and the drafter
    directory as the container sees it, judged against the container's install."""
    import drafter_trees
    work, env, _ = boxes
    drafter = drafter_trees.write_model_dir(str(tmp_path / "drafter"), drafter_trees.ZLAB)
    server = work / "bin" / "vllm"
    spec = '{"method": "dflash", "model": "/models/drafter", "num_speculative_tokens": 15}'
    podman(env, "run", "-d", *RUN_FLAGS, *mounts(system_site_by_uv(env)), "-v",
           "%s:/models/drafter:ro" % drafter, "-e", "VLLM_USE_V2_MODEL_RUNNER=1",
           "-e", "HF_HUB_OFFLINE=1", "--name", "served", ROOTFS, "/usr/bin/python3",
           str(server), "serve", "/models/qwen", "--port", "8000",
           "--speculative-config", spec)
    try:
        inventory = {"all": {"hosts": {"here": {"connection": "local", "container": "served",
                                                "container_engine": "podman"}}}}
        run = run_fleetcheck(tmp_path, inventory, "--no-import-check", "--no-config-load",
                             env=env)
    finally:
        podman(env, "rm", "-f", "-t", "0", "served", check=False)
    host = run.host("here")
    assert host["error"] is None, host["error"]
    (served,) = [s for s in host["served"] if "pid" in s]
    assert served["drafter"]["spec"] == "/models/drafter" and served["method"] == "dflash"
    assert served["num_speculative_tokens"] == 15 and served["port"] == 8000
    assert served["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert served["target"]["spec"] == "/models/qwen"
    assert served["drafter"]["dir"] == "/models/drafter"  # the container's path
    check = run.check("here", "drafter-config")
    assert check["status"] in ("pass", "warn"), check
    assert any(e["file"] == "/models/drafter/config.json" for e in check["evidence"]) or \
        "/models/drafter" in check["message"], check
    assert "architecture DFlashDraftModel" in " ".join(
        a["text"] for a in check["details"]["aspects"])
