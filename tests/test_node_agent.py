"""`fleetcheck node` on real parts: Podman containers, each running a vLLM-server-shaped
process over a real vLLM wheel install that lives only in its own filesystem (/opt/venv:
0.33.0 in one, 0.20.1 in another, the same path; the official image's
/usr/local/lib/python3.11/dist-packages in a third), and the agent in a container
started with `--pid=host` (Podman honours it for `podman run`), which judges each
server's install through /proc/PID/root. Its textfile is scraped by a real
prometheus-node-exporter over loopback; node-problem-detector's plugin mode is run on
its rounds; SIGTERM ends `--every`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.lab.testhosts import free_loopback_port
from podman_installs import (ROOTFS, RUN_FLAGS, SYSTEM_SITE, mounts, podman, private_storage,
                             release_storage, remove_containers, system_site_by_uv)
from waits import wait_answering, wait_for

pytestmark = [pytest.mark.containers, pytest.mark.root]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = "node-a"
FIXES = ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop")
DAEMONSET_CAPS = "SYS_PTRACE,SYS_CHROOT,DAC_READ_SEARCH,SETUID,SETGID"


@pytest.fixture(scope="module")
def pods(tmp_path_factory, real_venvs):
    """Two vLLM 'pods' whose installs are at /opt/venv in their own filesystems only."""
    work = tmp_path_factory.mktemp("node")
    env, _ = private_storage(work)
    # the installs are in the containers alone
    assert not os.path.exists("/opt/venv/lib/python3.11/site-packages/vllm")
    server = work / "srv" / "bin" / "vllm"
    server.parent.mkdir(parents=True)
    # `vllm serve`'s command line, and a line on its stream
    server.write_text("import time\nprint('INFO fleetcheck-test: serving', flush=True)\n"
                      "time.sleep(100000)\n")
    for name, version in (("vllm-new", "0.33.0"), ("vllm-old", "0.20.1")):
        podman(env, "run", "-d", *RUN_FLAGS[:-1], "--name", name, "--hostname", name,
               "--log-driver", "k8s-file",
               "-v", "%s:/opt/venv:ro" % real_venvs[version],
               "-v", "%s:/srv:ro" % server.parent.parent, "--workdir", "/srv",
               "--rootfs", ROOTFS, "/opt/venv/bin/python3", "/srv/bin/vllm", "serve",
               "/models/qwen", "--port", "8000")
    # the official image's way: uv pip install --system, served by `python3 vllm serve`
    podman(env, "run", "-d", *RUN_FLAGS[:-1], *mounts(system_site_by_uv(env)), "--name",
           "vllm-sys", "--hostname", "vllm-sys", "-v", "%s:/srv:ro" % server.parent.parent,
           "--rootfs", ROOTFS, "/usr/bin/python3", "/srv/bin/vllm", "serve", "/models/qwen")
    try:
        yield work, env
    finally:
        remove_containers(env, "vllm-new", "vllm-old", "vllm-sys")
        release_storage(work / "graph")


def agent(env: dict, out, *args: str, check: bool = True,
          caps: str = DAEMONSET_CAPS) -> subprocess.CompletedProcess:
    """`fleetcheck node` in a container of its own that shares the node's PID namespace
    (this test worker's), with this checkout's fleetcheck and its output directory, and
    the DaemonSet's privileges: root with SYS_PTRACE, SYS_CHROOT, DAC_READ_SEARCH, SETUID
    and SETGID only, no privilege escalation, a read-only root."""
    return subprocess.run(
        ["podman", "run", "--rm", "--pid=host", "--cap-drop=all",
         "--cap-add=" + caps, "--security-opt=no-new-privileges",
         "--read-only", "--read-only-tmpfs=false", *RUN_FLAGS[:-1], "-v", "%s:/out" % out,
         "-e", "TMPDIR=%s" % scratch(out), *log_links(out),
         "-e", "PYTHONPATH=%s" % ROOT, "-e", "XDG_CACHE_HOME=/out/cache",
         "--rootfs", ROOTFS, sys.executable, "-m", "fleetcheck", "node", "--node-name", NODE,
         *args], env=env, capture_output=True, text=True, timeout=600, check=check)


def scratch(out) -> str:
    """The agent's temporary directory (the DaemonSet's emptyDir): its root is read-only."""
    os.makedirs(os.path.join(str(out), "tmp"), exist_ok=True)
    return "/out/tmp"


def log_links(out) -> list[str]:
    """kubelet's /var/log/containers, when the test made one: `POD_NS_CONTAINER-ID.log`
    links to each container's CRI-format log (here, Podman's k8s-file log)."""
    links = os.path.join(str(out), "containers")
    return ["-v", "%s:/var/log/containers:ro" % links] if os.path.isdir(links) else []


def link_logs(env: dict, out, names: list[str]) -> None:
    """The stand-in for kubelet's links (no Kubernetes here): named as kubelet names them,
    to the container engine's real log of each container."""
    links = out / "containers"
    links.mkdir(parents=True, exist_ok=True)
    for name in names:
        cid, path = podman(env, "inspect", "--format", "{{.Id}} {{.HostConfig.LogConfig.Path}}",
                           name).stdout.split()
        os.symlink(path, links / ("%s_default_vllm-%s.log" % (name, cid)))


def samples(text: str) -> dict[tuple, float]:
    """{(name, sorted labels): value} of the fleetcheck_* series."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels: str) -> float:
    matching = [v for (n, l), v in found.items()
                if n == name and all(dict(l).get(k) == want for k, want in labels.items())]
    assert len(matching) == 1, (name, labels, matching)
    return matching[0]


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return samples(response.read().decode("utf-8"))


def npd(json_path: str, *extra: str) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "fleetcheck", "node", "--npd", "--json",
                           json_path, *extra], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    return proc.returncode, proc.stdout, time.monotonic() - started


@pytest.fixture
def node_exporter(tmp_path, loopback_address):
    textfiles = tmp_path / "out" / "textfile"
    textfiles.mkdir(parents=True)
    port = free_loopback_port(loopback_address)
    proc = subprocess.Popen(["/usr/bin/prometheus-node-exporter",
                             "--web.listen-address=%s:%d" % (loopback_address, port),
                             "--collector.disable-defaults", "--collector.textfile",
                             "--collector.textfile.directory=%s" % textfiles],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://%s:%d/metrics" % (loopback_address, port)
    try:
        wait_answering(url)
        yield url, textfiles
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_agent_judges_each_pods_install_through_its_root(tmp_path, pods, node_exporter):
    work, env = pods
    url, textfiles = node_exporter
    out = tmp_path / "out"
    link_logs(env, out, ["vllm-new"])
    wait_for(lambda: b"fleetcheck-test" in open(os.path.realpath(next(
        (out / "containers").iterdir())), "rb").read(), 60, "the server's line in its log")
    first = agent(env, out, "--once", "--json", "/out/node.json", "--expect-version",
                  "==0.33.0", "--textfile", "/out/textfile/fleetcheck.prom", check=False)
    assert first.returncode == 1, first.stderr[-3000:]  # the 0.20.1 pod misses the fixes
    results = json.loads((out / "node.json").read_text())
    hosts = {h["name"]: h for h in results["hosts"]}
    # every server of the PID namespace is judged: under -n, each worker has one of its own
    assert set(hosts) == {NODE + "/vllm-new", NODE + "/vllm-old", NODE + "/vllm-sys"}, \
        "other servers share this PID namespace (run with -n): %s" % first.stdout
    new, old = hosts[NODE + "/vllm-new"], hosts[NODE + "/vllm-old"]
    # --once shows the round as `run` does: the table, then the failures' evidence
    assert "fleetcheck node: 1 fail, 2 pass in " in first.stdout, first.stdout
    assert "%s dflash-layer-offset fail" % old["name"] in first.stdout, first.stdout
    venv_site = "/opt/venv/lib/python3.11/site-packages"
    for host, version, commit, site in (
            (new, "0.33.0", "4ba787ec9", venv_site), (old, "0.20.1", "132765e35", venv_site),
            (hosts[NODE + "/vllm-sys"], "0.33.0", "4ba787ec9", SYSTEM_SITE)):
        assert host["error"] is None, host["error"]
        info = host["vllm"]
        assert (info["version"], info["commit"]) == (version, commit), info
        assert info["site_packages"] == site, info
        assert info["found_by"].startswith("running server pid "), info
        assert host["container"]["engine"] == "node"
        assert len(host["container"]["id"]) == 64, host["container"]
        assert host["status"] == ("fail" if host is old else "pass"), host["checks"]
    # the pod's own stream, read from kubelet's log of it (here for vllm-new only)
    log = new["served"][0]["log"]
    assert log["source"].startswith("kubelet's log /"), log
    assert log["lines_read"] >= 1, log
    assert old["served"][0]["log"]["source"] is None, old["served"][0]["log"]
    checks = {(h["name"], c["id"]): c for h in results["hosts"] for c in h["checks"]}
    for fix in FIXES:
        assert checks[(new["name"], fix)]["status"] == "pass", checks[(new["name"], fix)]
        assert checks[(old["name"], fix)]["status"] == "fail", checks[(old["name"], fix)]
        # decided by the pod's own code, run as nobody inside its root (never as root)
        assert checks[(new["name"], fix)]["details"]["run_as"] == "user nobody", \
            checks[(new["name"], fix)]["details"]
    # the expected build, per pod (each judged alone: no pod is compared with another)
    assert checks[(new["name"], "build-expected")]["status"] == "pass"
    assert checks[(old["name"], "build-expected")]["status"] == "fail"
    for check in ("install-record", "install-metadata", "install-leftovers"):
        assert checks[(new["name"], check)]["status"] == "pass", checks[(new["name"], check)]
    # the container's compiled modules are never loaded by the agent
    assert checks[(new["name"], "install-import")]["status"] == "skip"
    served = {s["pid"] for s in new["served"]}
    assert len(served) == 1 and new["container"]["pid"] not in {str(p) for p in served}

    # node_exporter serves the round as fleetcheck_* series
    found = scrape(url)
    assert value(found, "node_textfile_scrape_error") == 0
    assert value(found, "fleetcheck_check_status", host=new["name"], check="dflash-swa",
                 status="pass") == 1
    assert value(found, "fleetcheck_check_status", host=old["name"], check="dflash-swa",
                 status="fail") == 1
    assert value(found, "fleetcheck_check_status", host=old["name"], check="dflash-swa",
                 status="pass") == 0
    assert value(found, "fleetcheck_vllm_build_info", host=old["name"], version="0.20.1",
                 commit="132765e35",
                 install="/opt/venv/lib/python3.11/site-packages") == 1
    assert value(found, "fleetcheck_served_info", host=new["name"], model="/models/qwen",
                 method="", drafter="") == 1
    assert value(found, "fleetcheck_run_duration_seconds") == results["duration_s"]

    # NPD's plugin on the round: a fix fails
    code, line, took = npd(str(out / "node.json"))
    assert code == 1 and line.startswith("fleetcheck: FAIL dflash-"), line
    assert len(line.rstrip("\n")) <= 80 and line.count("\n") == 1 and took < 5, (line, took)

    # the stale pod goes; the next round replaces the first whole
    podman(env, "rm", "-f", "-t", "0", "vllm-old")
    second = agent(env, out, "--once", "--json", "/out/node.json", "--expect-version",
                   "==0.33.0", "--textfile", "/out/textfile/fleetcheck.prom", check=False)
    assert second.returncode == 0, second.stdout + second.stderr[-3000:]
    found = scrape(url)
    assert value(found, "node_textfile_scrape_error") == 0
    assert not [k for k in found if dict(k[1]).get("host") == old["name"]]
    assert value(found, "fleetcheck_check_status", host=new["name"], check="dflash-swa",
                 status="pass") == 1
    assert os.listdir(textfiles) == ["fleetcheck.prom"]  # the temp file was renamed away
    code, line, took = npd(str(out / "node.json"))
    assert (code, line) == (0, "fleetcheck: ok: every check passes on 2 installs\n"), line
    assert took < 5

def node_install_round(tmp_path, env, venv: str, caps: str = DAEMONSET_CAPS) -> dict:
    out = tmp_path / "out"
    done = agent(env, out, "--once", "--json", "/out/node.json", "--venv", venv, check=False,
                 caps=caps)
    assert (out / "node.json").exists(), done.stderr[-3000:]
    results = json.loads((out / "node.json").read_text())
    return {h["name"]: h for h in results["hosts"]}[NODE + "/node"]


def test_venv_judges_the_nodes_own_install(tmp_path, pods, real_venvs):
    """--venv: the node's own install, read through the root of the node's PID 1 (the
    pods' servers beside it); its compiled modules, root's own files, are loaded as
    `run` loads them."""
    venv = real_venvs["0.33.0"]
    mine = node_install_round(tmp_path, pods[1], venv)
    assert mine["error"] is None, mine["error"]
    assert mine["vllm"]["site_packages"] == venv + "/lib/python3.11/site-packages"
    assert mine["vllm"]["found_by"].startswith("inventory venv"), mine["vllm"]
    checks = {c["id"]: c for c in mine["checks"]}
    for fix in FIXES + ("install-record", "install-metadata"):
        assert checks[fix]["status"] == "pass", checks[fix]
    # it ran (no torch here, so the modules linking it are a skip saying so)
    loaded = checks["install-import"]
    assert loaded["details"]["expected"] > 0 and "disabled" not in loaded["message"], loaded


def test_an_agent_that_cannot_switch_users_says_so_and_runs_nothing_as_root(
        tmp_path, pods, real_venvs):
    """Without SETUID and SETGID (an older DaemonSet) the fix checks warn naming them:
    the install's code is not run as root instead."""
    mine = node_install_round(tmp_path, pods[1], real_venvs["0.33.0"],
                              caps="SYS_PTRACE,SYS_CHROOT,DAC_READ_SEARCH")
    assert mine["error"] is None, mine["error"]
    for fix in FIXES:
        check = {c["id"]: c for c in mine["checks"]}[fix]
        assert check["status"] == "warn", check
        assert "the install's code was not run: the probe runs as root without CAP_SETUID " \
            "and CAP_SETGID, so it cannot run the install's code as user nobody" in \
            check["message"], check["message"]


@pytest.mark.xfail(strict=True, reason="the probe tells servers apart by port, not by network "
                   "namespace: every pod's server on vllm_url's port 8000 is judged as if it "
                   "served the node's own --venv install, so install-running fails it")
def test_pods_servers_do_not_count_against_the_nodes_own_install(tmp_path, pods, real_venvs):
    mine = node_install_round(tmp_path, pods[1], real_venvs["0.33.0"])
    running = [c for c in mine["checks"] if c["id"] == "install-running"]
    assert running[0]["status"] == "pass", running


def test_npd_without_a_round_is_unknown(tmp_path):
    code, line, took = npd(str(tmp_path / "none.json"))
    assert code == 3 and line.startswith("fleetcheck: unknown: no round yet"), line
    assert len(line.rstrip("\n")) <= 80 and took < 5


def probes_running() -> list[int]:
    """The agent's probe children, chrooted into a server's root (node_chroot.py)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                if b"def open_root(root, namespace)" in handle.read():
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture
def local_server(tmp_path, real_venvs):
    """A vLLM-server-shaped process in this worker's PID namespace, over a real install."""
    script = tmp_path / "srv" / "bin" / "vllm"
    script.parent.mkdir(parents=True)
    script.write_text("import time\ntime.sleep(100000)\n")
    proc = subprocess.Popen([os.path.join(real_venvs["0.33.0"], "bin", "python3"), str(script),
                             "serve", "/models/qwen", "--port", "8000"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_sigterm_cancels_a_round_in_flight_within_a_second(tmp_path, local_server):
    out = tmp_path / "node.json"
    proc = subprocess.Popen([sys.executable, "-m", "fleetcheck", "node", "--every", "1h",
                             "--json", str(out), "--node-name", NODE, "--no-cache"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        wait_for(probes_running, 120, "a probe chrooted into the server's root")
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
        assert time.monotonic() - started < 1.0
        assert code == 0, proc.stderr.read()
        assert not out.exists()  # a round cut short never replaces the last whole one
        wait_for(lambda: not probes_running(), 10, "the probe killed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_ends_every_within_a_second(tmp_path):
    out = tmp_path / "node.json"
    proc = subprocess.Popen([sys.executable, "-m", "fleetcheck", "node", "--every", "1h",
                             "--json", str(out), "--no-integrity", "--node-name", NODE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT,
                                     XDG_CACHE_HOME=str(tmp_path / "cache")))
    try:
        wait_for(out.exists, 120, "the first round written")
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
        assert time.monotonic() - started < 1.0
        assert code == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
