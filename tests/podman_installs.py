"""Podman containers as the tests run them (Debian's podman with runc; no registry, so
`--rootfs /:O`, an overlay on this machine's root), each test module's in a storage of its
own, and the official vLLM image's install of a real wheel (`uv pip install --system`
into /usr/local/lib/python3.11/dist-packages of Debian's /usr/bin/python3), built once
inside such a container and cached."""

from __future__ import annotations

import os
import signal
import subprocess

from install_builders import cached, uv_binary, wheel_path
from waits import wait_for

SYSTEM_SITE = "/usr/local/lib/python3.11/dist-packages"
RUN_FLAGS = ["--runtime", "runc", "--cgroup-manager=cgroupfs", "--network", "none",
             "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=20000:20000", "--rootfs"]
ROOTFS = "/:O"  # the rootfs takes the image's place: after every option


def podman(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True,
                          check=check, timeout=300)


def remove_containers(env: dict, *names: str) -> None:
    """`podman rm -f` the containers, and make sure their processes are gone: a server
    left running (a removal that failed) would be seen by every later test of this
    worker's PID namespace as one more vLLM server on port 8000."""
    pids = []
    for name in names:
        found = podman(env, "inspect", "--format", "{{.State.Pid}}", name, check=False)
        pids += [int(p) for p in found.stdout.split() if p.isdigit() and int(p) > 0]
    podman(env, "rm", "-f", "-t", "0", *names, check=False)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    wait_for(lambda: not any(os.path.exists("/proc/%d" % pid) and not zombie(pid)
                             for pid in pids), 30, "the containers' processes ended")


def zombie(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def system_site_by_uv(env: dict) -> str:
    """dist-packages as the official image makes it, built once inside a container."""
    wheel = wheel_path("vllm-0.33.0-", "vllm==0.33.0")
    uv = uv_binary()

    def build(target: str) -> None:
        for sub in ("dist-packages", "bin"):
            os.makedirs(os.path.join(target, sub))
        podman(env, "run", "--rm", *RUN_FLAGS, *mounts(target, ""),
               "-v", "%s:/wheels/%s:ro" % (wheel, os.path.basename(wheel)),
               ROOTFS, uv, "pip", "install", "-q", "--offline", "--system", "--break-system-packages",
               "--no-deps", "--python", "/usr/bin/python3", "/wheels/" + os.path.basename(wheel))
    return cached("container-system-vllm-0.33.0", build)


def mounts(install: str, mode: str = ":ro") -> list[str]:
    """The install's site and its console scripts (RECORD's ../../../bin/vllm)."""
    return ["-v", "%s/dist-packages:%s%s" % (install, SYSTEM_SITE, mode),
            "-v", "%s/bin:/usr/local/bin%s" % (install, mode)]


def private_storage(work) -> tuple[dict, str]:
    """(environment, storage.conf) of a Podman storage under work, seen by no other run."""
    conf = work / "storage.conf"
    conf.write_text('[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n'
                    % (work / "graph", work / "run"))
    return dict(os.environ, CONTAINERS_STORAGE_CONF=str(conf)), str(conf)


def release_storage(graph) -> None:
    """Podman's overlay driver leaves its graph dir bind-mounted on itself: unmount it so
    the test's directory can be removed."""
    overlay = os.path.join(str(graph), "overlay")
    if os.path.ismount(overlay):
        subprocess.run(["umount", overlay], check=False)


def assert_official_image_install(run, name: str) -> None:
    host = run.host(name)
    assert host["error"] is None, host["error"]
    info = host["vllm"]
    assert info["version"] == "0.33.0" and info["commit"] == "4ba787ec9", info
    assert info["site_packages"] == SYSTEM_SITE
    assert info["found_by"].startswith("running server pid "), info
    for check_id in ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop",
                     "install-record", "install-leftovers", "install-metadata",
                     "install-in-progress"):
        assert run.check(name, check_id)["status"] == "pass", run.check(name, check_id)
    running = run.check(name, "install-running")
    assert running["status"] == "pass" and running["details"]["servers"][0]["port"] == 8000
