"""scripts/setup.sh checks each package it needs on its own: a machine holding part of a
group (podman without runc or podman-docker) is still told to get the rest. The machine's
files are hidden, never removed: `--check` runs in a mount namespace where an overlay
whites them out."""

from __future__ import annotations

import os
import subprocess

import pytest

from fleet_helpers import ROOT

pytestmark = pytest.mark.root


def check_without(tmp_path, *paths: str) -> subprocess.CompletedProcess:
    """`setup.sh --check` on this machine, with each of `paths` whited out."""
    mounts = []
    for index, path in enumerate(paths):
        upper, work = tmp_path / ("up%d" % index), tmp_path / ("work%d" % index)
        upper.mkdir()
        work.mkdir()
        os.mknod(str(upper / os.path.basename(path)), 0o600 | 0o020000, os.makedev(0, 0))
        mounts.append("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s"
                      % (os.path.dirname(path), upper, work, os.path.dirname(path)))
    script = " && ".join(mounts + ['exec bash "$0" --check'])
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                           os.path.join(ROOT, "scripts", "setup.sh")],
                          capture_output=True, text=True, timeout=60)


def test_this_machine_has_every_package_setup_installs(tmp_path):
    check = check_without(tmp_path)
    assert (check.returncode, check.stdout) == (
        0, "fleetcheck setup: every system package is there\n"), check.stderr


def test_podman_without_podman_docker_and_runc_still_gets_both(tmp_path):
    assert os.path.exists("/usr/bin/podman")
    check = check_without(tmp_path, "/usr/bin/docker", "/usr/sbin/runc")
    assert (check.returncode, check.stdout) == (
        1, "fleetcheck setup: missing: runc podman-docker\n"), check.stderr


def test_podman_docker_alone_is_missed_on_a_machine_with_podman_and_runc(tmp_path):
    check = check_without(tmp_path, "/usr/bin/docker")
    assert (check.returncode, check.stdout) == (
        1, "fleetcheck setup: missing: podman-docker\n"), check.stderr
