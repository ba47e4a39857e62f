"""The build gate end to end, over real sshd hosts holding real vLLM installs: the 0.20.1 and
0.33.0 wheels, and builds made here from a hard-link copy of the real 0.33.0 install (edited
files replaced, never written through, and RECORD rewritten to match, so each is a whole,
consistent install): a dev build from git (`+g<sha>` version in _version.py and METADATA,
PEP 610 direct_url.json with vcs_info), a build that records no commit, and a rebuild of
0.33.0 whose files differ (same version and commit, another RECORD)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.testhosts import free_loopback_port
from probe_helpers import ENV

pytestmark = pytest.mark.unit

NEXT = "/opt/ml-next"  # where a rollout puts the new build, next to the old one
DEV = "0.1.dev16016+g3cfc8f8b7"
DEV_SHA = "3cfc8f8b7e2d4c6a8b0f1e3d5c7a9b2d4f6e8a0c"
CHECK = "build-expected"


def site_packages(venv: str) -> str:
    lib = os.path.join(venv, "lib")
    return os.path.join(lib, os.listdir(lib)[0], "site-packages")


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def derive_build(source_venv: str, dest: str, files: dict[str, str],
                 version: str | None = None) -> str:
    """A copy of a real install with `files` (site-packages relative, dist-info files
    named under the source's dist-info) replaced and RECORD rewritten to match; with
    `version`, the dist-info is renamed and METADATA's Version changed too."""
    shutil.copytree(source_venv, dest, symlinks=True, copy_function=os.link)
    site = site_packages(dest)
    old_dist = next(n for n in os.listdir(site) if n.startswith("vllm-") and
                    n.endswith(".dist-info"))
    new_dist = old_dist
    files = dict(files)
    if version is not None:
        new_dist = "vllm-%s.dist-info" % version
        os.rename(os.path.join(site, old_dist), os.path.join(site, new_dist))
        meta = open(os.path.join(site, new_dist, "METADATA"), encoding="utf-8").read()
        old_version = old_dist[len("vllm-"):-len(".dist-info")]
        assert "\nVersion: %s\n" % old_version in meta
        files[old_dist + "/METADATA"] = meta.replace("\nVersion: %s\n" % old_version,
                                                     "\nVersion: %s\n" % version, 1)
    written = {}
    for rel, text in files.items():
        rel = rel.replace(old_dist + "/", new_dist + "/", 1)
        path = os.path.join(site, rel)
        if os.path.lexists(path):
            os.unlink(path)  # a hard link into the cached install: replace, never write through
        data = text.encode("utf-8")
        with open(path, "wb") as handle:
            handle.write(data)
        written[rel] = data
    record_path = os.path.join(site, new_dist, "RECORD")
    rows = []
    for line in open(record_path, encoding="utf-8").read().splitlines():
        path, rest = line.split(",", 1)
        path = path.replace(old_dist + "/", new_dist + "/", 1)
        if path in written:
            data = written.pop(path)
            rest = "%s,%d" % (record_hash(data), len(data))
        rows.append(path + "," + rest)
    for path, data in written.items():  # new files (direct_url.json where there was none)
        rows.append("%s,%s,%d" % (path, record_hash(data), len(data)))
    os.unlink(record_path)
    with open(record_path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(rows) + "\n")
    return dest


def version_file(venv: str, version: str, commit_id: str | None) -> str:
    """The real install's _version.py with another version and commit."""
    text = open(os.path.join(site_packages(venv), "vllm", "_version.py"),
                encoding="utf-8").read()
    assert "__version__ = version = '0.33.0'" in text and "'g4ba787ec9'" in text
    text = text.replace("__version__ = version = '0.33.0'",
                        "__version__ = version = %r" % version)
    text = text.replace("__version_tuple__ = version_tuple = (0, 33, 0)",
                        "__version_tuple__ = version_tuple = (0, 1, 'dev16016', 'g3cfc8f8b7')"
                        if version != "0.33.0" else
                        "__version_tuple__ = version_tuple = (0, 33, 0)")
    return text.replace("'g4ba787ec9'", repr(commit_id) if commit_id else "None")


@pytest.fixture(scope="module")
def builds(tmp_path_factory, real_venvs) -> dict[str, str]:
    base = real_venvs["0.33.0"]
    root = tmp_path_factory.mktemp("builds")
    dist = "vllm-0.33.0.dist-info"
    direct_url = json.dumps({"url": "https://github.com/vllm-project/vllm.git",
                             "vcs_info": {"vcs": "git", "commit_id": DEV_SHA,
                                          "requested_revision": "dflash-fixes"}})
    init = open(os.path.join(site_packages(base), "vllm", "__init__.py"), encoding="utf-8").read()
    return {
        "0.20.1": real_venvs["0.20.1"], "0.33.0": base,
        "dev": derive_build(base, str(root / "dev"), {
            "vllm/_version.py": version_file(base, DEV, "g3cfc8f8b7"),
            dist + "/direct_url.json": direct_url}, version=DEV),
        "no-commit": derive_build(base, str(root / "no-commit"), {
            "vllm/_version.py": version_file(base, "0.33.0", None)}),
        "rebuilt": derive_build(base, str(root / "rebuilt"), {
            "vllm/__init__.py": init + "\n# rebuilt from the same commit\n"}),
    }


def inventory(fleet, groups: dict[str, tuple[dict, list]]) -> dict:
    return {"all": {"vars": {"venv": ENV}, "children": {
        name: {"vars": group_vars, "hosts": ssh_hosts(fleet, hosts)}
        for name, (group_vars, hosts) in groups.items()}}}


@pytest.fixture(scope="module")
def gate_fleet(tmp_path_factory, fleet_factory, builds):
    fleet = fleet_factory(str(tmp_path_factory.mktemp("gate-fleet")))
    layout = (("canary-1", "dev"), ("canary-2", "0.33.0"), ("prod-1", "0.33.0"),
              ("prod-2", "0.33.0"), ("prod-old", "0.20.1"), ("prod-nocommit", "no-commit"),
              ("prod-rebuilt", "rebuilt"))
    hosts = {name: fleet.add(name, mounts={ENV: builds[build], NEXT: builds["dev"]})
             for name, build in layout}
    fleet.start()
    try:
        yield fleet, hosts
    finally:
        fleet.stop()


def evidence(check: dict) -> str:
    return "\n".join(e["text"] for e in check["evidence"])


def fleetcheck_diff(tmp_path, old) -> subprocess.CompletedProcess:
    """`fleetcheck diff OLD <the last run's results>`."""
    return subprocess.run([sys.executable, "-m", "fleetcheck", "diff", str(old),
                           str(tmp_path / "out" / "results.json")], capture_output=True,
                          text=True, cwd=str(tmp_path))


def statuses(run) -> dict[str, str]:
    return {h["name"]: run.check(h["name"], CHECK)["status"] for h in run.results["hosts"]}


def test_canary_expects_the_new_build_the_rest_the_old(tmp_path, gate_fleet):
    fleet, hosts = gate_fleet
    inv = inventory(fleet, {
        "canary": ({"fleetcheck_expect_version": "==" + DEV,
                    "fleetcheck_expect_commit": "3cfc8f8b7"},
                   [hosts["canary-1"], hosts["canary-2"]]),
        "prod": ({"fleetcheck_expect_version": "==0.33.0",
                  "fleetcheck_expect_commit": "4ba787e"},
                 [hosts["prod-1"], hosts["prod-old"], hosts["prod-nocommit"]])})
    dead = fleet.next_address()
    inv["all"]["children"]["prod"]["hosts"]["prod-down"] = {
        "ansible_host": dead, "port": free_loopback_port(dead), "key": fleet.client_key}
    run = run_fleetcheck(tmp_path, inv, "--known-hosts", fleet.known_hosts, "-j", "5",
                         "--junit", str(tmp_path / "junit.xml"))
    assert run.code == 1, run.stderr
    assert statuses(run) == {"canary-1": "pass", "canary-2": "fail", "prod-1": "pass",
                             "prod-old": "fail", "prod-nocommit": "fail", "prod-down": "skip"}
    assert run.host("prod-down")["status"] == "unreachable"
    canary = run.check("canary-1", CHECK)
    assert run.host("canary-1")["vllm"]["commit"] == DEV_SHA
    assert ("commit: expected 3cfc8f8b7 (from inventory %s, group 'canary': "
            "fleetcheck_expect_commit), found "
            "%s (from vllm-%s.dist-info/direct_url.json)" % (
                tmp_path / "inventory.yaml", DEV_SHA, DEV)) in evidence(canary)
    assert "found %s (from vllm-%s.dist-info/METADATA)" % (DEV, DEV) in evidence(canary)
    # every other check of the dev build is clean: the derived build is a whole install
    assert run.host("canary-1")["status"] == "pass", run.host("canary-1")["checks"]
    wrong = run.check("canary-2", CHECK)
    assert wrong["message"] == ("off the expected build: version 0.33.0 is not ==%s; commit "
                                "4ba787ec9 is not 3cfc8f8b7" % DEV)
    assert "found 0.33.0 (from vllm-0.33.0.dist-info/METADATA)" in evidence(wrong)
    assert "found 4ba787ec9 (from vllm/_version.py)" in evidence(wrong)
    old = run.check("prod-old", CHECK)["message"]
    assert "version 0.20.1 is not ==0.33.0" in old and "commit 132765e35 is not 4ba787e" in old
    nocommit = run.check("prod-nocommit", CHECK)
    assert nocommit["message"] == ("off the expected build: this build records no commit "
                                   "(expected 4ba787e)")
    assert "found none: this build records no commit (no vcs_info" in evidence(nocommit)
    assert nocommit["details"]["version_ok"] is True
    assert run.host("prod-nocommit")["vllm"]["commit"] is None
    assert run.results["summary"]["warnings"] == []
    first = tmp_path / "out" / "first.json"
    os.replace(tmp_path / "out" / "results.json", first)

    # HTML: the builds table marks the expected builds and the hosts off them
    assert 'class="expected-build"' in run.html and 'class="off-build"' in run.html
    assert "off the expected build: <b>canary-2</b> (expected version ==%s, commit 3cfc8f8b7)" \
        % DEV in run.html
    assert "expected build (version ==0.33.0, commit 4ba787e) for 1: prod-1" in run.html
    # JUnit: one build-expected testcase per host, a failure where it is off
    cases = {suite.get("name"): c for suite in ET.parse(tmp_path / "junit.xml").iter("testsuite")
             for c in suite.iter("testcase") if c.get("name") == CHECK}
    assert set(cases) == set(statuses(run))
    assert cases["canary-2"].find("failure") is not None
    assert cases["canary-1"].find("failure") is None
    assert "this build records no commit" in cases["prod-nocommit"].find("failure").text
    assert cases["prod-down"].find("error") is not None  # a CI gate cannot miss it
    assert "build-expected" in run.stdout

    # the gate as CI runs it: only hosts on their expected builds -> exit 0
    ok = run_fleetcheck(tmp_path, inv, "--known-hosts", fleet.known_hosts,
                        "--limit", "canary-1,prod-1")
    assert ok.code == 0, ok.stdout

    # a rollout step switches canary-2 and (by mistake) prod-1 to the new build's venv:
    # `fleetcheck diff` says who moved onto and who moved off the expected build
    inv["all"]["children"]["canary"]["hosts"]["canary-2"]["venv"] = NEXT
    inv["all"]["children"]["prod"]["hosts"]["prod-1"]["venv"] = NEXT
    rolled = run_fleetcheck(tmp_path, inv, "--known-hosts", fleet.known_hosts,
                            "--limit", "canary-2,prod-1")
    assert statuses(rolled) == {"canary-2": "pass", "prod-1": "fail"}
    diff = fleetcheck_diff(tmp_path, first)
    assert diff.returncode == 1, diff.stdout
    assert diff.stdout.count("moved ") == 2, diff.stdout
    assert ("prod-1  WORSE" in diff.stdout and "moved off the expected build: version %s is "
            "not ==0.33.0; commit %s is not 4ba787e  (worse)" % (DEV, DEV_SHA)) in diff.stdout
    assert "moved onto the expected build: version %s matches ==%s" % (DEV, DEV) in diff.stdout

    # the command line wins over the inventory; when only the expectation changed, diff
    # says so rather than claim the host moved
    cli = run_fleetcheck(tmp_path, inv, "--known-hosts", fleet.known_hosts, "--limit",
                         "canary-1", "--expect-version", "==0.33.0", "--expect-commit",
                         "4ba787ec9")
    assert statuses(cli) == {"canary-1": "fail"}
    assert "version: expected ==0.33.0 (from --expect-version)" in evidence(
        cli.check("canary-1", CHECK))
    diff = fleetcheck_diff(tmp_path, first)
    assert ("now off the expected build, which changed from version ==%s, commit 3cfc8f8b7 to "
            "version ==0.33.0, commit 4ba787ec9" % DEV) in diff.stdout, diff.stdout

    # a version no host holds is a warning in the summary
    del inv["all"]["children"]["prod"]["hosts"]["prod-1"]["venv"]  # back on 0.33.0
    nobody = run_fleetcheck(tmp_path, inv, "--known-hosts", fleet.known_hosts,
                            "--limit", "prod-1", "--expect-version", ">=0.34")
    assert nobody.code == 1
    warning = ("expected version >=0.34 (from --expect-version) matches none of the 1 host(s) "
               "it applies to: prod-1")
    assert nobody.results["summary"]["warnings"] == [warning]
    assert "Warning: " + warning in nobody.stdout
    assert html.escape(warning, quote=False) in nobody.html


def test_same_build_across_three_hosts_one_rebuilt(tmp_path, gate_fleet, builds):
    """Same version, same commit, different files: only RECORD's sha256 tells them apart."""
    fleet, hosts = gate_fleet
    playbook = tmp_path / "gate.yaml"
    packaged = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "playbooks",
                                                "dflash.yaml"), encoding="utf-8"))
    packaged["expect"] = {"version": ">=0.33,<0.34", "same_build": True}
    playbook.write_text(yaml.safe_dump(packaged, sort_keys=False))
    inv = inventory(fleet, {"prod": ({}, [hosts["prod-1"], hosts["prod-rebuilt"],
                                          hosts["prod-2"]])})
    run = run_fleetcheck(tmp_path, inv, "--known-hosts", fleet.known_hosts,
                         "--playbook", str(playbook))
    assert run.code == 1, run.stderr
    assert statuses(run) == {"prod-1": "pass", "prod-rebuilt": "fail", "prod-2": "pass"}
    records = {h["name"]: h["vllm"]["record_sha256"] for h in run.results["hosts"]}
    assert records["prod-1"] == records["prod-2"] != records["prod-rebuilt"]
    record = os.path.join(site_packages(builds["0.33.0"]), "vllm-0.33.0.dist-info", "RECORD")
    with open(record, "rb") as handle:  # what `sha256sum RECORD` on the host says
        assert records["prod-1"] == hashlib.sha256(handle.read()).hexdigest()
    assert "RECORD sha256 %s" % records["prod-rebuilt"] in run.html
    rebuilt = run.check("prod-rebuilt", CHECK)
    assert rebuilt["message"] == (
        "off the expected build: same_build: not the majority build of the hosts expected on "
        "version >=0.33,<0.34 (differs in RECORD sha256)")
    assert ("same_build (from playbook %s: expect.same_build): holds 0.33.0 @ 4ba787ec9, RECORD "
            "sha256 %s; the majority build of the hosts expected on version >=0.33,<0.34 (2 of "
            "3 hosts) is 0.33.0 @ 4ba787ec9, RECORD sha256 %s; differs in RECORD sha256; hosts "
            "off it: prod-rebuilt" % (playbook, records["prod-rebuilt"][:12],
                                      records["prod-1"][:12])) in evidence(rebuilt)
    assert "(differing: prod-rebuilt)" in run.check("prod-1", CHECK)["message"]
    # the rebuilt install is whole: only the gate tells it apart
    others = [c for c in run.host("prod-rebuilt")["checks"] if c["id"] != CHECK]
    assert {c["status"] for c in others} <= {"pass", "skip"}, others
    assert "same version and commit, different files" in run.html


def test_bad_expectations_exit_2_naming_where(tmp_path):
    dead = "127.0.0.1"
    hosts = {"h1": {"ansible_host": dead, "port": free_loopback_port(dead)}}
    base = {"all": {"hosts": hosts}}
    cases = [
        ((), {"fleetcheck_expect_version": "=0.33"},
         ["group 'canary'", "field 'fleetcheck_expect_version'",
          "not a PEP 440 version specifier"]),
        ((), {"fleetcheck_expect_commit": "4ba78"},
         ["group 'canary'", "field 'fleetcheck_expect_commit'", "shorter than 7"]),
        ((), {"fleetcheck_expect_commit": "zzzzzzz"}, ["not hexadecimal"]),
        (("--expect-version", "0.33.0"), {},
         ["command line: field '--expect-version'", "did you mean '==0.33.0'"]),
        (("--expect-commit", "4ba787g"), {},
         ["command line: field '--expect-commit'", "not hexadecimal"]),
    ]
    for args, group_vars, needles in cases:
        inv = {"all": {"children": {"canary": {"vars": group_vars, "hosts": hosts}}}}
        run = run_fleetcheck(tmp_path, inv, *args)
        assert run.code == 2, (args, group_vars, run.stderr)
        for needle in needles:
            assert needle in run.stderr, (needle, run.stderr)
        assert run.results is None
    for expect, needle in (({"version": ">>0.33"}, "expect: field 'version'"),
                           ({"commit": "4ba7"}, "expect: field 'commit'"),
                           ({"same_build": "yes"}, "expect: field 'same_build'")):
        playbook = tmp_path / "bad.yaml"
        packaged = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..",
                                                    "playbooks", "dflash.yaml")))
        packaged["expect"] = expect
        playbook.write_text(yaml.safe_dump(packaged))
        run = run_fleetcheck(tmp_path, base, "--playbook", str(playbook))
        assert run.code == 2 and "%s: %s" % (playbook, needle) in run.stderr, run.stderr
