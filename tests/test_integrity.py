"""Half-built and tampered installs, found and named over real SSH.

Every host starts from a real pip install of the vllm 0.20.1 or 0.33.0 wheel (a hard-link
copy of the cached venv; broken files are replaced, never written through the link)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from probe_helpers import ENV, linked_copy, rewrite, site_packages
from waits import wait_for

pytestmark = pytest.mark.unit

INSTALL_IDS = ("install-record", "install-leftovers", "install-metadata", "install-import",
               "install-in-progress")


def evidence_files(check: dict) -> list[str]:
    return [e["file"] for e in check["evidence"]]


def wait_for_process(argv0: str, timeout: float = 10.0) -> None:
    """The dummy install has exec'd (seen from the parent PID namespace)."""
    def running() -> bool:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    if handle.read().startswith(argv0.encode()):
                        return True
            except OSError:
                continue
        return False
    wait_for(running, timeout, "dummy process %s started" % argv0)


def version_not_text(site: str) -> None:
    """vllm 0.20.1's own _version.py with a list as the version and bytes as the commit
    (lines 21 and 24 of the file the wheel ships)."""
    path = os.path.join(site, "vllm/_version.py")
    text = open(path).read()
    assert text.splitlines()[20] == "__version__ = version = '0.20.1'"
    text = text.replace("__version__ = version = '0.20.1'", "__version__ = version = [0, 20, 1]")
    text = text.replace("commit_id = 'g132765e35'", "commit_id = b'g132765e35'")
    rewrite(path, text.encode())


@pytest.fixture(scope="module")
def broken_fleet_run(tmp_path_factory, fleet_factory, real_venvs):
    """One run over a fleet with one breakage per host (and clean hosts)."""
    tmp = tmp_path_factory.mktemp("integrity")
    fleet = fleet_factory(str(tmp / "fleet"))
    venvs = {}

    def copy(name: str, version: str = "0.33.0") -> str:
        venvs[name] = linked_copy(real_venvs[version], str(tmp / name))
        return site_packages(venvs[name])

    site = copy("so-deleted")
    os.unlink(os.path.join(site, "vllm/spinloop.abi3.so"))
    site = copy("so-truncated")
    path = os.path.join(site, "vllm/cumem_allocator.abi3.so")
    rewrite(path, open(path, "rb").read()[:4096])
    site = copy("py-deleted", "0.20.1")
    os.unlink(os.path.join(site, "vllm/v1/core/sched/scheduler.py"))
    site = copy("hand-edited")  # same size, one name changed: only the hash can tell
    path = os.path.join(site, "vllm/config/speculative.py")
    text = open(path, "rb").read()
    rewrite(path, text.replace(b"def use_dflash(self)", b"def use_dflasx(self)", 1))
    site = copy("stash-left", "0.20.1")
    os.makedirs(os.path.join(site, "~llm", "v1"))
    site = copy("version-not-text", "0.20.1")  # hand-edited: no build writes these
    version_not_text(site)
    site = copy("uv-tmp-left", "0.20.1")  # a killed uv install, deep in the package
    os.mkdir(os.path.join(site, "vllm/vllm_flash_attn/.tmpAbC123"))
    site = copy("two-dist-infos")
    shutil.copytree(os.path.join(site, "vllm-0.33.0.dist-info"),
                    os.path.join(site, "vllm-0.20.1.dist-info"), copy_function=shutil.copy)
    site = copy("version-deleted", "0.20.1")
    os.unlink(os.path.join(site, "vllm/_version.py"))
    # editable-style installs: the dist-info points at a source tree (PEP 610)
    for name, with_so in (("editable-ok", True), ("editable-unbuilt", False)):
        source = str(tmp / (name + "-src"))
        os.makedirs(source)
        linked_copy(os.path.join(site_packages(real_venvs["0.33.0"]), "vllm"),
                    os.path.join(source, "vllm"))
        if not with_so:
            for entry in os.listdir(os.path.join(source, "vllm")):
                if entry.endswith(".so"):
                    os.unlink(os.path.join(source, "vllm", entry))
        site = copy(name)
        shutil.rmtree(os.path.join(site, "vllm"))
        dist = os.path.join(site, "vllm-0.33.0.dist-info")
        finder = "__editable___vllm_0_33_0_finder.py"
        with open(os.path.join(site, finder), "w") as handle:
            handle.write("MAPPING = {'vllm': %r}\n" % os.path.join(source, "vllm"))
        rewrite(os.path.join(dist, "direct_url.json"), json.dumps(
            {"url": "file://" + source, "dir_info": {"editable": True}}).encode())
        rewrite(os.path.join(dist, "RECORD"),
                ("%s,,\nvllm-0.33.0.dist-info/RECORD,,\n" % finder).encode())
    copy("install-running")
    copy("clean-old", "0.20.1")
    copy("clean-new")

    for name, venv in venvs.items():
        fleet.add(name, mounts={ENV: venv})
    fleet.start()
    busy = next(h for h in fleet.hosts if h.name == "install-running")
    dummy = fleet.spawn_on(busy, "cd %s && exec -a %s/bin/pip sleep 600" % (ENV, ENV))
    wait_for_process(ENV + "/bin/pip")
    try:
        inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, fleet.hosts)}}
        yield run_fleetcheck(tmp, inventory, "--known-hosts", fleet.known_hosts, "-j", "8")
    finally:
        dummy.kill()
        fleet.stop()


def test_clean_real_installs_give_no_alarm(broken_fleet_run):
    run = broken_fleet_run
    for host in ("clean-old", "clean-new"):
        for check_id in INSTALL_IDS:
            status = run.check(host, check_id)["status"]
            assert status in ("pass", "skip"), (host, check_id, run.check(host, check_id))
        # the files the fix checks examined, and _version.py, are hashed
        evidence = {e["file"] for c in ("dflash-layer-offset", "dflash-swa", "dflash-cache-drop")
                    for e in run.check(host, c)["evidence"] if e["file"]}
        assert run.check(host, "install-record")["details"]["hashed"] >= len(evidence) + 1 >= 4
        assert run.check(host, "install-import")["status"] == "skip"
        assert "torch is not installed" in run.check(host, "install-import")["message"]


@pytest.mark.parametrize("host, check_id, file, words", [
    ("so-deleted", "install-record", "vllm/spinloop.abi3.so", "missing"),
    ("so-truncated", "install-record", "vllm/cumem_allocator.abi3.so", "size 4096 bytes"),
    ("py-deleted", "install-record", "vllm/v1/core/sched/scheduler.py", "missing"),
    ("hand-edited", "install-record", "vllm/config/speculative.py", "sha256 differs"),
    ("version-deleted", "install-record", "vllm/_version.py", "missing"),
])
def test_record_findings_name_the_file(broken_fleet_run, host, check_id, file, words):
    check = broken_fleet_run.check(host, check_id)
    assert check["status"] == "fail", check
    hits = [e for e in check["evidence"] if e["file"] == file]
    assert hits and words in hits[0]["text"], check["evidence"]
    assert broken_fleet_run.host(host)["status"] == "fail"


def test_truncated_so_also_fails_to_load(broken_fleet_run):
    check = broken_fleet_run.check("so-truncated", "install-import")
    assert check["status"] == "fail"
    assert "vllm.cumem_allocator" in evidence_files(check)


def test_stash_left_by_killed_install(broken_fleet_run):
    check = broken_fleet_run.check("stash-left", "install-leftovers")
    assert check["status"] == "fail"
    assert check["evidence"][0]["file"].endswith("/site-packages/~llm")


def test_a_version_file_assigning_a_list_fails_install_metadata_over_ssh(broken_fleet_run):
    """Judged, with file, line and value; never passed, never a host error, and never
    reported as the host's version or commit."""
    run = broken_fleet_run
    check = run.check("version-not-text", "install-metadata")
    assert check["status"] == "fail", check
    found = [(e["file"].endswith("/site-packages/vllm/_version.py"), e["line"], e["text"])
             for e in check["evidence"]]
    assert found == [
        (True, 21, "__version__ = [0, 20, 1] is a list, not a version string: suspect build"),
        (True, 24, "__commit_id__ = b'g132765e35' is bytes, not a commit string: "
                   "suspect build")], check
    host = run.host("version-not-text")
    assert host["status"] == "fail" and host["error"] is None, host
    assert host["vllm"]["version"] is None and host["vllm"]["commit"] is None, host["vllm"]
    assert run.check("version-not-text", "dflash-layer-offset")["status"] == "fail"


def test_expect_version_names_a_version_file_value_that_is_no_string(tmp_path, real_venvs):
    """With no METADATA to fall back on, build-expected says what _version.py assigns."""
    venv = linked_copy(real_venvs["0.20.1"], str(tmp_path / "env"))
    site = site_packages(venv)
    version_not_text(site)
    os.unlink(os.path.join(site, "vllm-0.20.1.dist-info/METADATA"))
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"edited": {"connection": "local",
                                                                 "venv": venv}}}},
                         "--expect-version", ">=0.20")
    check = run.check("edited", "build-expected")
    assert check["status"] == "fail", check
    assert "this build records no version (vllm/_version.py line 21: __version__ = " \
        "[0, 20, 1] is a list, not a version string: suspect build)" in check["message"], check


def test_uv_tmp_dir_deep_in_the_package_is_found_over_ssh(broken_fleet_run):
    check = broken_fleet_run.check("uv-tmp-left", "install-leftovers")
    assert check["status"] == "fail", check
    files = [e["file"] for e in check["evidence"]]
    assert len(files) == 1 and files[0].startswith(ENV + "/lib/") and \
        files[0].endswith("/site-packages/vllm/vllm_flash_attn/.tmpAbC123"), check
    clean = broken_fleet_run.check("clean-old", "install-leftovers")
    listed = re.search(r"its top level and the (\d+) directories RECORD names files in",
                       clean["message"])
    assert clean["status"] == "pass" and listed and int(listed.group(1)) > 100, clean


def test_two_dist_infos(broken_fleet_run):
    check = broken_fleet_run.check("two-dist-infos", "install-metadata")
    assert check["status"] == "fail"
    names = sorted(os.path.basename(f) for f in evidence_files(check))
    assert names == ["vllm-0.20.1.dist-info", "vllm-0.33.0.dist-info"]


def test_missing_version_file_is_a_metadata_finding(broken_fleet_run):
    check = broken_fleet_run.check("version-deleted", "install-metadata")
    assert check["status"] == "fail"
    assert evidence_files(check)[0].endswith("vllm/_version.py")
    assert "missing" in check["evidence"][0]["text"]


def test_editable_installs_check_the_source_tree(broken_fleet_run):
    good = broken_fleet_run.check("editable-ok", "install-record")
    assert good["status"] == "pass" and "editable install" in good["message"]
    assert broken_fleet_run.host("editable-ok")["vllm"]["install"].startswith("editable")
    assert broken_fleet_run.check("editable-ok", "dflash-layer-offset")["status"] == "pass"
    bad = broken_fleet_run.check("editable-unbuilt", "install-record")
    assert bad["status"] == "fail"
    assert any("no compiled vllm/*.so" in e["text"] for e in bad["evidence"])


def test_install_still_running_is_named(broken_fleet_run):
    check = broken_fleet_run.check("install-running", "install-in-progress")
    assert check["status"] == "fail", check
    assert "%s/bin/pip 600" % ENV in check["evidence"][0]["text"]
    assert check["evidence"][0]["file"] == ENV
    # the other hosts, in their own PID namespaces, see no such process
    assert broken_fleet_run.check("clean-new", "install-in-progress")["status"] == "pass"


def test_findings_reach_the_html_report(broken_fleet_run):
    html = broken_fleet_run.html
    assert "vllm/spinloop.abi3.so" in html and "install-record" in html
    assert "~llm" in html


def test_deep_hashes_every_file_and_finds_an_edit_outside_the_fix_files(tmp_path, fleet,
                                                                        real_venvs):
    venv = linked_copy(real_venvs["0.20.1"], str(tmp_path / "env"))
    path = os.path.join(site_packages(venv), "vllm/envs.py")
    data = open(path, "rb").read()
    rewrite(path, data.replace(b"# ", b"#!", 1))  # same size, different bytes
    host = fleet.add("edited", mounts={ENV: venv})
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, [host])}}
    quick = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts)
    assert quick.check("edited", "install-record")["status"] == "pass"  # sizes still match
    deep = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts, "--deep",
                          "--no-import-check")
    record = deep.check("edited", "install-record")
    assert record["status"] == "fail" and record["details"]["deep"] is True
    assert record["details"]["hashed"] == record["details"]["checked"]
    assert evidence_files(record) == ["vllm/envs.py"]
    assert deep.check("edited", "install-import")["status"] == "skip"
    assert "disabled" in deep.check("edited", "install-import")["message"]
