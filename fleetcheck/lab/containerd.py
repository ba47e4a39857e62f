"""A private containerd (Debian's package), for the tests, demos and benchmarks: its own
root, state and socket under one work directory, containers made as kubelet makes them.

containerd keeps shim sockets, runc state and ctr's stdio FIFOs under /run/containerd
whatever its config says, and ctr clients must see that directory as the daemon does.
So the daemon runs in a mount namespace of its own where the work directory's run/ is
mounted on /run/containerd; a client elsewhere (an sshd test host) mounts the same run/
there (or on /run/k3s/containerd, with run/fifo on /run/containerd/fifo). The daemon is
also PID 1 of a PID namespace of its own: stopping it ends every shim and container,
and with them the namespace's mounts, whatever state a test left behind. No image is
pulled (no registry is reachable): each container's root is an overlay of this machine's
/, mounted in the daemon's namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from fleetcheck.lab.testhosts import log_tail

CONTAINERD = shutil.which("containerd") or "/usr/bin/containerd"
SOCKET = "/run/containerd/containerd.sock"  # as the daemon and its clients see it
PATH_IN_CONTAINERS = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_KIND = "io.cri-containerd.kind"


def missing_requirements() -> list[str]:
    """What this machine lacks to run a private containerd, as install advice."""
    problems = []
    if not os.path.exists(CONTAINERD) or not shutil.which("ctr"):
        problems.append("containerd and ctr: apt-get install -y containerd")
    if not shutil.which("runc"):
        problems.append("runc: apt-get install -y runc")
    if os.geteuid() != 0:
        problems.append("root (containerd, mounts): run as root")
    return problems


class PrivateContainerd:
    """One containerd under `workdir`; `run_dir` is what its clients mount."""

    def __init__(self, workdir: str):
        self.workdir = os.path.abspath(workdir)
        self.run_dir = os.path.join(self.workdir, "run")
        self.socket = os.path.join(self.run_dir, "containerd.sock")  # from this machine
        self.process: subprocess.Popen | None = None
        self.daemon_pid = 0

    def config(self) -> str:
        path = os.path.join(self.workdir, "config.toml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('version = 2\nroot = "%s"\nstate = "%s"\n'
                         'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                         '[grpc]\n  address = "%s"\n'
                         '[plugins."io.containerd.internal.v1.opt"]\n  path = "%s"\n'
                         % (os.path.join(self.workdir, "root"),
                            os.path.join(self.workdir, "state"), SOCKET,
                            os.path.join(self.workdir, "opt")))
        return path

    def start(self, timeout: float = 30.0) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        os.makedirs("/run/containerd", exist_ok=True)  # a mount point only: never written
        log = open(os.path.join(self.workdir, "containerd.log"), "ab")
        self.process = subprocess.Popen(
            ["unshare", "-m", "-p", "--fork", "--kill-child", "--mount-proc",
             "--propagation", "private", "/bin/sh", "-c",
             "mount --bind \"$1\" /run/containerd && exec \"$2\" --config \"$3\"", "sh",
             self.run_dir, CONTAINERD, self.config()],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        end = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("containerd exited: %s" % self.log())
            if os.path.exists(self.socket) and self.daemon() and \
                    self.ctr("version", check=False).returncode == 0:
                return
            if time.monotonic() > end:
                raise RuntimeError("containerd did not start: %s" % self.log())
            time.sleep(0.1)

    def daemon(self) -> int:
        """containerd's PID on this machine (the child of unshare)."""
        assert self.process is not None
        pid = self.process.pid
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as handle:
                children = handle.read().split()
        except OSError:
            children = []
        self.daemon_pid = int(children[0]) if children else 0
        return self.daemon_pid

    def inside(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        """A command in the daemon's mount and PID namespaces (as its clients see it)."""
        return subprocess.run(["nsenter", "-t", str(self.daemon_pid), "-m", "-p", *command],
                              capture_output=True, text=True, timeout=120, check=check)

    def ctr(self, *args: str, namespace: str = "k8s.io",
            check: bool = True) -> subprocess.CompletedProcess:
        return self.inside("ctr", "-a", SOCKET, "-n", namespace, *args, check=check)

    def run(self, container_id: str, args: list[str], namespace: str = "k8s.io",
            labels: dict[str, str] | None = None, mounts: dict[str, str] | None = None,
            env: dict[str, str] | None = None) -> None:
        """A running container whose root is an overlay of this machine's /; mounts:
        path in the container -> directory here (read-only)."""
        layers = os.path.join(self.workdir, "rootfs", namespace, container_id)
        for part in ("upper", "work", "merged"):
            os.makedirs(os.path.join(layers, part), exist_ok=True)
        self.inside("mount", "-t", "overlay", "overlay", "-o",
                    "lowerdir=/,upperdir=%s/upper,workdir=%s/work" % (layers, layers),
                    os.path.join(layers, "merged"))
        options = []
        for key, value in (labels or {}).items():
            options += ["--label", "%s=%s" % (key, value)]
        for target, source in (mounts or {}).items():
            options += ["--mount", "type=bind,src=%s,dst=%s,options=rbind:ro" % (source, target)]
        for key, value in dict({"PATH": PATH_IN_CONTAINERS}, **(env or {})).items():
            options += ["--env", "%s=%s" % (key, value)]
        self.ctr("run", "-d", *options, "--rootfs", os.path.join(layers, "merged"),
                 container_id, *args, namespace=namespace)

    def run_in_pod(self, container_id: str, pod: str, container: str, pod_namespace: str,
                   args: list[str], mounts: dict[str, str] | None = None) -> None:
        """A container of a pod, labelled as kubelet labels it, in namespace k8s.io."""
        self.run(container_id, args, labels={
            "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": container,
            "io.kubernetes.pod.namespace": pod_namespace}, mounts=mounts)

    def run_sandbox(self, container_id: str, pod: str, pod_namespace: str) -> None:
        """The pod's sandbox (kubelet's pause container): pod labels, no container name."""
        self.run(container_id, ["/bin/sleep", "1000000"], labels={
            "io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": pod_namespace,
            SANDBOX_KIND: "sandbox"})

    def log(self) -> str:
        return log_tail(os.path.join(self.workdir, "containerd.log"))

    def stop(self) -> None:
        """SIGKILL to unshare: --kill-child ends containerd, PID 1 of its namespace, and
        the kernel every shim and container process with it; the namespace's mounts
        (the containers' roots) go with the last of them."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=30)
            self.process = None

    def __enter__(self) -> "PrivateContainerd":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
