"""Which engine holds the container, on boxes reached over real OpenSSH: real Podman
containers beside this machine's Docker CLI that has no daemon (/usr/local/bin/docker,
first in the box's PATH), and a real containerd (Debian's package, fleetcheck/lab's
PrivateContainerd) holding containers labelled as kubelet labels them, with real vLLM
installs (the official image's system install of 0.33.0 and a pip venv of 0.20.1) and a
sidecar without vLLM. No Kubernetes API server or kubelet runs here: the node is a box
whose containerd holds the containers kubelet would have made. The inventory's checks of
the container variables need none of that and are unit tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest
import yaml

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.connectors import declarations
from fleetcheck.input_error import InputError
from fleetcheck.inventory.hosts import load_inventory
from fleetcheck.lab.containerd import PrivateContainerd, missing_requirements
from fleetcheck.lab.wheels import real_install
from podman_installs import (ROOTFS, RUN_FLAGS, SYSTEM_SITE, assert_official_image_install,
                             mounts, podman, private_storage, release_storage,
                             remove_containers, system_site_by_uv)

pytestmark = pytest.mark.unit  # the tests with real engines say what they need

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what a run reads from the install alone: the same on the install and in its container
INSTALL_CHECKS = ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop", "install-record",
                  "install-leftovers", "install-metadata", "install-in-progress")


def sleeping_server(work) -> str:
    """A script whose command line is `vllm serve`'s (the probe finds the install from
    the server's interpreter; no model is loaded)."""
    server = work / "bin" / "vllm"
    server.parent.mkdir(exist_ok=True)
    server.write_text("import time\ntime.sleep(100000)\n")  # a long-lived server's shape
    return str(server)


@pytest.fixture(scope="module")
def podman_store(tmp_path_factory):
    work = tmp_path_factory.mktemp("engines-podman")
    env, conf = private_storage(work)
    site = system_site_by_uv(env)
    common = ["run", "-d", *RUN_FLAGS, *mounts(site)]
    try:
        podman(env, *common, "--name", "vllm", ROOTFS, "/usr/bin/python3",
               sleeping_server(work), "serve", "/models/qwen", "--port", "8000")
        podman(env, *common, "--name", "sidecar", ROOTFS, "/usr/bin/python3", "-c",
               "import time; time.sleep(100000)")
        yield env, conf
    finally:
        remove_containers(env, "vllm", "sidecar")
        release_storage(work / "graph")


@pytest.fixture(scope="module")
def podman_box(tmp_path_factory, fleet_factory, podman_store):
    """A box over SSH seeing the Podman storage, and no containerd (whatever this machine
    runs at /run/containerd): (fleet, its inventory entry)."""
    work = tmp_path_factory.mktemp("engines-podman-box")
    no_containerd = work / "no-containerd"
    no_containerd.mkdir()
    fleet = fleet_factory(str(work / "fleet"))
    try:
        box = fleet.add("podman-box", own_pids=False,
                        mounts={"/run/containerd": str(no_containerd)},
                        sshd_options={"SetEnv": "CONTAINERS_STORAGE_CONF=%s" % podman_store[1]})
        fleet.start()
        (entry,) = ssh_hosts(fleet, [box]).values()
        yield fleet, entry
    finally:
        fleet.stop()


@pytest.mark.containers
@pytest.mark.downloads
def test_podman_holds_what_a_daemonless_docker_cli_does_not(tmp_path, podman_store, podman_box):
    env, _ = podman_store
    fleet, entry = podman_box
    docker = subprocess.run(["docker", "version"], capture_output=True, text=True)
    assert shutil.which("docker") == "/usr/local/bin/docker"  # before podman in sshd's PATH
    assert "Cannot connect to the Docker daemon" in docker.stderr
    inventory = {"all": {"hosts": {
        "named": dict(entry, container="vllm"), "auto": dict(entry, container="auto"),
        "pinned": dict(entry, container="vllm", container_engine="docker"),
        "nowhere": dict(entry, container="nope")}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    names = [h["name"] for h in run.results["hosts"]]
    assert names == ["named", "auto/vllm", "pinned", "nowhere"], run.stdout  # no sidecar
    vllm_id = podman(env, "container", "inspect", "--format", "{{.Id}}", "vllm").stdout.strip()
    for name in ("named", "auto/vllm"):
        assert_official_image_install(run, name)
        assert run.host(name)["container"] == {"engine": "podman", "id": vllm_id,
                                               "name": "vllm"}
    assert "container vllm, through podman (id %s)" % vllm_id in run.html

    pinned = run.host("pinned")["error"]
    assert pinned["kind"] == "container", pinned
    assert "container vllm on pinned" in pinned["message"]
    assert "docker: Cannot connect to the Docker daemon" in pinned["message"]
    assert "podman" not in pinned["message"]

    nowhere = run.host("nowhere")["error"]["message"]
    assert "no container engine on the box holds it" in nowhere
    assert "docker: Cannot connect to the Docker daemon" in nowhere
    assert "podman: " in nowhere and "no such container" in nowhere
    assert "ctr: no containerd socket at /run/containerd/containerd.sock" in nowhere
    assert run.code == 3


@pytest.mark.containers
@pytest.mark.downloads
def test_podman_dockers_docker_and_podman_are_one_engine(tmp_path, podman_store):
    """podman-docker's `docker` is a script running podman after a notice on stderr: the
    container is found by the first (docker) and listed by both, probed once."""
    env, _ = podman_store
    assert "exec /usr/bin/podman" in open("/usr/bin/docker").read()
    inventory = {"all": {"vars": {"connection": "local"}, "hosts": {
        "named": {"container": "vllm"}, "box": {"container": "auto"}}}}
    run = run_fleetcheck(tmp_path, inventory, env=dict(env, PATH="/usr/bin:/bin:/usr/sbin"))
    assert [h["name"] for h in run.results["hosts"]] == ["named", "box/vllm"], run.stdout
    vllm_id = podman(env, "container", "inspect", "--format", "{{.Id}}", "vllm").stdout.strip()
    for name in ("named", "box/vllm"):
        assert_official_image_install(run, name)
        assert run.host(name)["container"] == {"engine": "docker", "id": vllm_id,
                                               "name": "vllm"}


@pytest.mark.containers
@pytest.mark.downloads
def test_a_wedged_docker_daemon_is_skipped_within_its_share_of_the_deadline(
        tmp_path, podman_store):
    """A Docker socket that accepts and never answers: docker is given a quarter of the
    host's deadline (3 s of 12) to say whether it holds the container, then Podman is
    asked and runs the probe."""
    env, _ = podman_store
    wedged = socket.socket(socket.AF_UNIX)
    wedged.bind(str(tmp_path / "docker.sock"))
    wedged.listen(8)
    try:
        inventory = {"all": {"hosts": {"here": {"connection": "local", "container": "vllm",
                                                "timeout": 12}}}}
        run = run_fleetcheck(tmp_path, inventory, env=dict(
            env, DOCKER_HOST="unix://%s" % (tmp_path / "docker.sock")))
    finally:
        wedged.close()
    assert_official_image_install(run, "here")
    assert run.host("here")["container"]["engine"] == "podman"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A containerd holding two pods' containers (and their sandboxes) in k8s.io, and an
    unlabelled vLLM container in namespace default."""
    assert not missing_requirements(), missing_requirements()  # scripts/setup.sh installs them
    work = tmp_path_factory.mktemp("engines-node")
    site = system_site_by_uv(private_storage(work)[0])
    venv = real_install("0.20.1")
    server = sleeping_server(work)
    system = {SYSTEM_SITE: os.path.join(site, "dist-packages"),
              "/usr/local/bin": os.path.join(site, "bin")}
    containerd = PrivateContainerd(str(work / "containerd"))
    try:
        containerd.start()
        containerd.run_sandbox("sandbox-vllm-0", "vllm-0", "serving")
        containerd.run_in_pod("vllm-0-main", "vllm-0", "vllm", "serving",
                              ["/usr/bin/python3", server, "serve", "/models/qwen",
                               "--port", "8000"], mounts=system)
        containerd.run_sandbox("sandbox-decode-0", "decode-0", "llm-d")
        containerd.run_in_pod("decode-0-vllm", "decode-0", "vllm", "llm-d",
                              [os.path.join(venv, "bin", "python"), server, "serve",
                               "/models/qwen", "--port", "8001"])
        containerd.run_in_pod("decode-0-proxy", "decode-0", "routing-proxy", "llm-d",
                              ["/usr/bin/python3", "-c", "import time; time.sleep(100000)"])
        containerd.run("plain-vllm", ["/usr/bin/python3", server, "serve", "/models/qwen"],
                       namespace="default", mounts=system)
        os.makedirs(os.path.join(containerd.run_dir, "fifo"), exist_ok=True)
        yield containerd, site, venv
    finally:
        containerd.stop()


@pytest.fixture(scope="module")
def node_boxes(tmp_path_factory, fleet_factory, node):
    """Two nodes over SSH seeing the containerd: one at ctr's default socket, one at
    k3s's (ctr's FIFOs stay in /run/containerd/fifo, which the daemon must see too)."""
    run_dir = node[0].run_dir
    fleet = fleet_factory(str(tmp_path_factory.mktemp("engines-nodes") / "fleet"))
    try:
        boxes = [fleet.add("node", mounts={"/run/containerd": run_dir}),
                 fleet.add("k3s-node", mounts={
                     "/run/k3s/containerd": run_dir,
                     "/run/containerd/fifo": os.path.join(run_dir, "fifo")})]
        fleet.start()
        yield fleet, ssh_hosts(fleet, boxes)
    finally:
        fleet.stop()


def image_layout(tmp_path, site: str) -> str:
    """The system install's site-packages where the image has it, under a directory here
    (RECORD names its console script as ../../../bin/vllm)."""
    usr_local = tmp_path / "image" / "usr" / "local"
    (usr_local / "lib" / "python3.11").mkdir(parents=True)
    os.symlink(os.path.join(site, "bin"), str(usr_local / "bin"))
    os.symlink(os.path.join(site, "dist-packages"), str(usr_local / SYSTEM_SITE[11:]))
    return str(usr_local / SYSTEM_SITE[11:])


def verdicts(run, name: str) -> dict[str, str]:
    return {check_id: run.check(name, check_id)["status"] for check_id in INSTALL_CHECKS}


@pytest.mark.containers
@pytest.mark.downloads
@pytest.mark.root
def test_pods_on_a_kubernetes_node_over_ssh(tmp_path, node, node_boxes):
    _, site, venv = node
    fleet, entries = node_boxes
    on_node, on_k3s = entries["node"], entries["k3s-node"]
    inventory = {"all": {"hosts": {
        "node": dict(on_node, container="auto"),
        "by-pod": dict(on_node, container="vllm-0/vllm"),
        "by-namespace": dict(on_node, container="llm-d/decode-0/vllm"),
        "by-id": dict(on_node, container="plain-vllm"),
        "k3s": dict(on_k3s, container="serving/vllm-0/vllm"),
        "pinned": dict(on_k3s, container="vllm-0/vllm", container_engine="ctr",
                       containerd_address="/run/k3s/containerd/containerd.sock",
                       containerd_namespace="k8s.io"),
        "as-nobody": dict(on_node, container="vllm-0/vllm", container_user="65534"),
        "no-such-pod": dict(on_node, container="serving/vllm-9/vllm")}},
        "direct": {"hosts": {
            "system-install": {"connection": "local",
                               "site_packages": image_layout(tmp_path, site)},
            "venv-install": {"connection": "local", "venv": venv}}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    names = [h["name"] for h in run.results["hosts"]]
    assert all(h in names for h in inventory["all"]["hosts"] if h != "node"), names
    found = sorted(n for n in names if n.startswith("node/"))
    assert found == ["node/llm-d/decode-0/vllm", "node/plain-vllm",
                     "node/serving/vllm-0/vllm"], run.stdout  # no sidecar, no sandbox

    system, old = verdicts(run, "system-install"), verdicts(run, "venv-install")
    assert set(system.values()) == {"pass"}, system
    assert old["dflash-layer-offset"] == "fail" and old != system, old
    for name in ("node/serving/vllm-0/vllm", "node/plain-vllm", "by-pod", "by-id", "k3s",
                 "pinned", "as-nobody"):
        assert run.host(name)["error"] is None, (name, run.host(name)["error"])
        assert verdicts(run, name) == system, name
        assert run.host(name)["vllm"]["site_packages"] == SYSTEM_SITE
    for name in ("node/llm-d/decode-0/vllm", "by-namespace"):
        assert run.host(name)["error"] is None, (name, run.host(name)["error"])
        assert verdicts(run, name) == old, name
        assert run.host(name)["vllm"]["version"] == "0.20.1"
        assert run.host(name)["vllm"]["found_by"].startswith("running server pid "), name

    # one build seen in several containers: the probe's question and the controller's
    # answer cross `ctr tasks exec` mid-run
    assert any(str(run.host(n)["analysis"]).startswith("fix analysis shared with ")
               for n in ("by-pod", "by-id", "k3s", "pinned")), run.results
    assert run.host("node/serving/vllm-0/vllm")["container"] == {
        "engine": "ctr", "id": "vllm-0-main", "containerd_address":
        "/run/containerd/containerd.sock", "containerd_namespace": "k8s.io",
        "k8s_namespace": "serving", "k8s_pod": "vllm-0", "k8s_container": "vllm"}
    assert run.host("node/plain-vllm")["container"]["containerd_namespace"] == "default"
    assert run.host("by-namespace")["container"]["id"] == "decode-0-vllm"
    assert run.host("k3s")["container"]["containerd_address"] == \
        "/run/k3s/containerd/containerd.sock"
    assert "pod llm-d/decode-0, container vllm, through ctr (id decode-0-vllm" in run.html

    missing = run.host("no-such-pod")["error"]
    assert missing["kind"] == "container", missing
    assert "container serving/vllm-9/vllm on no-such-pod" in missing["message"]
    assert "ctr: no container of namespace serving, pod vllm-9, container vllm in " \
           "namespaces k8s.io default at /run/containerd/containerd.sock" in missing["message"]
    assert "ctr: no containerd socket at /run/k3s/containerd/containerd.sock" in \
        missing["message"]


@pytest.mark.containers
@pytest.mark.downloads
@pytest.mark.root
def test_two_pods_of_one_name_in_two_namespaces_need_the_namespace(tmp_path, node, node_boxes):
    containerd = node[0]
    fleet, entries = node_boxes
    containerd.run_in_pod("twin-vllm", "vllm-0", "vllm", "staging",
                          ["/bin/sleep", "1000000"])
    try:
        inventory = {"all": {"hosts": {"twins": dict(entries["node"], container="vllm-0/vllm")}}}
        run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    finally:
        containerd.ctr("tasks", "kill", "-s", "SIGKILL", "twin-vllm", check=False)
    error = run.host("twins")["error"]
    assert error["kind"] == "container", error
    assert "matches 2 running containers in containerd namespace k8s.io" in error["message"]
    assert "twin-vllm" in error["message"] and "vllm-0-main" in error["message"]
    assert "NAMESPACE/POD/CONTAINER" in error["message"]


def cri(*lines: str) -> str:
    """Lines as kubelet's CRI log keeps them (time, stream, F for a full line)."""
    return "".join("2026-12-02T07:40:%02d.000000000Z stdout F %s\n" % (i, line)
                   for i, line in enumerate(lines))


@pytest.mark.containers
@pytest.mark.downloads
@pytest.mark.root
def test_a_pods_log_is_read_from_kubelets_newest_file_for_it(tmp_path, node, fleet):
    """kubelet cannot run here: its log directory is a stand-in (its layout and CRI lines,
    written by the test) mounted at /var/log/pods on a node whose containerd is real. The
    pod's server writes to its container's own stream, so the probe finds no log file and
    fleetcheck reads kubelet's newest file for that container."""
    containerd = node[0]
    pods = tmp_path / "pods"
    logs = pods / "serving_vllm-0_6f1c2d3e-0000-4000-8000-000000000001" / "vllm"
    logs.mkdir(parents=True)
    engine = ("INFO 12-02 07:40:01 [core.py:139] Initializing a V1 LLM engine (v0.33.0) with "
              "config: model='/models/qwen', speculative_config=SpeculativeConfig("
              "method='dflash', model='org/drafter', num_spec_tokens=3), seed=0")
    (logs / "0.log").write_text(cri(engine.replace("num_spec_tokens=3", "num_spec_tokens=9")))
    os.utime(logs / "0.log", (1, 1))  # the restart before: older
    (logs / "1.log").write_text(cri("INFO 12-02 07:40:00 [api_server.py:1] starting", engine))
    (pods / "other_vllm-1_0000" / "vllm").mkdir(parents=True)
    (pods / "other_vllm-1_0000" / "vllm" / "0.log").write_text(cri(engine))
    box = fleet.add("node-logs", mounts={"/run/containerd": containerd.run_dir,
                                         "/var/log/pods": str(pods)})
    fleet.start()
    inventory = {"all": {"hosts": {"pod": dict(ssh_hosts(fleet, [box])["node-logs"],
                                                container="serving/vllm-0/vllm")}}}
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    assert run.host("pod")["error"] is None, run.host("pod")["error"]
    (served,) = [s for s in run.host("pod")["served"] if "pid" in s]
    assert served["log"]["source"] == (
        "kubelet's log of namespace serving, pod vllm-0, container vllm (/var/log/pods/"
        "serving_vllm-0_6f1c2d3e-0000-4000-8000-000000000001/vllm/1.log)"), served["log"]
    assert served["log"]["startups"] == 1 and served["log"]["lines_read"] == 2
    assert served["log"]["speculative_config"]["num_spec_tokens"] == "3"


def write_inventory(tmp_path, host_vars: dict) -> str:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"gpu-node01": host_vars}}}))
    return str(path)


@pytest.mark.parametrize("field, value, problem", [
    ("container", "Serving/vllm-0/vllm", "namespace 'Serving' is not a Kubernetes namespace"),
    ("container", "a/b/c/d", "Kubernetes names are POD/CONTAINER or NAMESPACE/POD/CONTAINER"),
    ("container", "vllm-0/", "container '' is not a Kubernetes container name"),
    ("container_engine", "crictl", "must be one of docker, podman, nerdctl, ctr"),
    ("containerd_namespace", "k8s io", "is not a containerd namespace"),
    ("containerd_address", "run/containerd.sock", "must be the absolute path"),
    ("container", "-l", "must not start with '-' (the engine would read it as an option)"),
    ("container", "--help", "must not start with '-'"),
    ("container_user", "-0", "must not start with '-'"),
    ("container", "AUTO", "write `auto` (lowercase)"),
])
def test_bad_container_variables_name_file_host_and_field(tmp_path, field, value, problem):
    path = write_inventory(tmp_path, {field: value})
    with pytest.raises(InputError) as raised:
        load_inventory(path, declarations=declarations())
    assert str(raised.value).startswith("%s: host 'gpu-node01': field '%s': " % (path, field))
    assert problem in str(raised.value)


def test_numbers_yaml_reads_are_a_uid_and_an_id(tmp_path):
    """`container_user: 1000` (a uid) and an all-digit short id are what the engine takes."""
    path = write_inventory(tmp_path, {"container": 123456789012, "container_user": 1000})
    (host,) = load_inventory(path, declarations=declarations())
    assert (host.container, host.container_user) == ("123456789012", "1000")


def test_kubernetes_names_with_a_pinned_docker_say_ctr_finds_them(tmp_path):
    inventory = {"all": {"hosts": {"here": {"connection": "local", "container": "vllm-0/vllm",
                                            "container_engine": "docker"}}}}
    run = run_fleetcheck(tmp_path, inventory)
    error = run.host("here")["error"]
    assert error["kind"] == "container" and "through containerd's ctr" in error["message"]


def test_the_kubernetes_node_example_loads():
    example = os.path.join(ROOT, "fleetcheck", "examples", "k8s-node.yaml")
    hosts = {h.name: h for h in load_inventory(example, declarations=declarations())}
    assert hosts["gpu-node01.k8s"].container == "serving/vllm-0/vllm"
    assert {hosts["gpu-node0%d.k8s" % n].container for n in (2, 3, 4)} == {"auto"}
    edge = hosts["edge-node01"]
    assert edge.containerd_address == "/run/k3s/containerd/containerd.sock"
    assert edge.containerd_namespace == "k8s.io" and edge.user == "root"


def test_containerd_variables_are_typo_guarded_and_take_the_fleetcheck_prefix(tmp_path):
    with pytest.raises(InputError) as raised:
        load_inventory(write_inventory(tmp_path, {"containerd_namspace": "k8s.io"}),
                       declarations=declarations())
    assert "field 'containerd_namspace': unknown variable: did you mean " \
           "containerd_namespace?" in str(raised.value)
    (host,) = load_inventory(write_inventory(tmp_path, {
        "fleetcheck_containerd_address": "/run/k3s/containerd/containerd.sock",
        "containerd_address": "/elsewhere.sock", "containerd": "yes"}),
        declarations=declarations())
    assert host.containerd_address == "/run/k3s/containerd/containerd.sock"


def test_a_listing_row_a_containers_command_could_forge_is_never_probed():
    """`ps` prints a container's command as it is: a newline in it starts a row of its
    own, whose id or name would reach the engine as an option. Such rows are dropped."""
    from fleetcheck.connectors.container import Asked, listed_containers
    listing = ("fleetcheck-engine-m1 podman\n"
               "3f2a1b\tvllm-a\tvllm serve /m --x 'y\n"
               "--privileged\t-l\tvllm serve /forged'\n"
               "9c8d7e\tvllm-b\tvllm serve /m\n")
    asked = Asked(("docker", "podman"), ("/run/containerd/containerd.sock",), ("k8s.io",))
    found = [(p.id, p.name) for p, _ in listed_containers(listing, "m1", asked)]
    assert found == [("3f2a1b", "vllm-a"), ("9c8d7e", "vllm-b")]


def test_a_section_line_a_containers_command_forges_chooses_no_engine():
    """A command holding a newline and a section line (with or without the listing's
    mark, naming an engine or a socket that was not asked) never picks the program or
    socket the next exec uses, and never hides the rows after it."""
    from fleetcheck.connectors.container import Asked, listed_containers
    listing = ("fleetcheck-engine-m1 podman\n"
               "3f2a1b\tvllm-a\tvllm serve /m --x 'y\n"
               "fleetcheck-engine /tmp/evil\n"
               "fleetcheck-engine-m1 /tmp/evil\n"
               "fleetcheck-said podman\n"
               "4d4d4d\tvllm-c\tvllm serve /forged'\n"
               "9c8d7e\tvllm-b\tvllm serve /m\n"
               "fleetcheck-ctr-m1\t/tmp/evil.sock\tk8s.io\tabc\n"
               '{"Labels": {}, "Spec": {"process": {"args": ["vllm", "serve"]}}}\n')
    asked = Asked(("docker", "podman", "ctr"), ("/run/containerd/containerd.sock",),
                  ("k8s.io",))
    found = [(p.engine, p.id) for p, _ in listed_containers(listing, "m1", asked)]
    # the forged engine line ends podman's section (its rows are dropped, none run /tmp/evil)
    assert all(engine in ("podman", "ctr") for engine, _ in found), found
    assert ("podman", "3f2a1b") in found and not any(cid == "abc" for _, cid in found)
    assert not any(engine == "/tmp/evil" for engine, _ in found)


@pytest.mark.parametrize("command, serves", [
    ("vllm serve /models/qwen --port 8000", True),
    ("/opt/venv/bin/python3 -m vllm.entrypoints.openai.api_server --model m", True),
    ("python3 -m vllm.entrypoints.cli.main serve m", True),
    ("python3 -m dynamo.vllm --model Qwen/Qwen3-8B", True),
    ("envoy -c /etc/envoy.yaml", False),
    ("python3 -m vllm_router.app --port 8001", False),
    ("/pause", False)])
def test_which_commands_auto_takes_for_a_vllm_server(command, serves):
    from fleetcheck.connectors.container import looks_like_vllm_server
    assert looks_like_vllm_server(command) is serves
