"""The product split at its seam: `fleetcheck probe-bundle` writes the probe as one script
that another engine runs on every node, `fleetcheck judge` turns what it printed into
results. Over a real sshd fleet, real Ansible (`ansible all -m script`) carries the
script, and judge gives the verdicts, reports and exit code of `fleetcheck run` on the
same hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
import yaml

from fleet_helpers import run_fleetcheck
from fleetcheck.lab.testhosts import free_loopback_port
from probe_helpers import ENV, edited_copy, recorded

pytestmark = pytest.mark.unit

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
FIXED = 'i + 1 for i in (dflash_config.get("target_layer_ids") or [])'
UNFIXED = 'i for i in (dflash_config.get("target_layer_ids") or [])'


def fleetcheck(*args: str, stdin: str | None = None, cwd: str | None = None,
               timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetcheck", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def ansible_executable() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "ansible")
    assert os.path.exists(beside), "ansible-core must be installed (test extra)"
    return beside


def verdicts(results: dict) -> dict:
    """Per host: its status and every check's id, status and message."""
    return {h["name"]: (h["status"], [(c["id"], c["status"], c["message"])
                                      for c in h["checks"]])
            for h in results["hosts"]}


@pytest.fixture
def ansible_fleet(tmp_path, fleet, real_venvs):
    edited = edited_copy(real_venvs["0.33.0"], str(tmp_path / "edited"),
                         {RUNNER: [(FIXED, UNFIXED)]})
    hosts = [fleet.add("gpu-old", mounts={ENV: real_venvs["0.20.1"] + ":ro"}),
             fleet.add("gpu-new", mounts={ENV: real_venvs["0.33.0"] + ":ro"}),
             fleet.add("gpu-new2", mounts={ENV: real_venvs["0.33.0"] + ":ro"}),
             fleet.add("gpu-edited", mounts={ENV: edited + ":ro"})]
    fleet.start()
    common = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % fleet.known_hosts
    entries = {h.name: {"ansible_host": h.address, "ansible_user": "root"} for h in hosts}
    dead = fleet.next_address()
    entries["gpu-down"] = {"ansible_host": dead, "ansible_port": free_loopback_port(dead),
                           "ansible_user": "root"}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {
        "venv": ENV, "ansible_ssh_private_key_file": fleet.client_key,
        "ansible_ssh_common_args": common}, "hosts": entries}}))
    return fleet, str(inventory)


def test_ansible_carries_the_probe_and_judge_gives_runs_verdicts(tmp_path, ansible_fleet):
    fleet, inventory = ansible_fleet
    (tmp_path / "run").mkdir()
    run = run_fleetcheck(tmp_path / "run", inventory, "--known-hosts", fleet.known_hosts,
                         "-j", "4")
    assert run.code == 1, run.stderr
    ran = verdicts(run.results)
    assert ran["gpu-edited"][0] == "fail" and ran["gpu-new"][0] == "pass"

    bundle = fleetcheck("probe-bundle", "--venv", ENV)
    assert bundle.returncode == 0, bundle.stderr
    probe = tmp_path / "probe.py"
    probe.write_text(bundle.stdout)
    tree = tmp_path / "facts"
    home = tmp_path / "ansible-home"
    env = dict(os.environ, ANSIBLE_HOME=str(home), ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
               # a short directory: ssh's control sockets must fit a Unix socket path's
               # 108 bytes, which pytest's tmp_path under an xdist worker outgrows
               ANSIBLE_SSH_CONTROL_PATH_DIR=tempfile.mkdtemp(prefix="fc-cp-"),
               ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOST_KEY_CHECKING="true", ANSIBLE_TIMEOUT="20")
    ansible = subprocess.run(
        [ansible_executable(), "all", "-i", inventory, "-m", "script",
         "-a", "%s --host {{ inventory_hostname }}" % probe, "--tree", str(tree), "-f", "5"],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert sorted(os.listdir(tree)) == sorted(ran), (ansible.stdout, ansible.stderr)

    out = tmp_path / "judged"
    judged = fleetcheck("judge", *sorted(str(tree / n) for n in os.listdir(tree)),
                        "--json", str(out / "results.json"), "--html", str(out / "report.html"),
                        "--junit", str(out / "junit.xml"), cwd=str(tmp_path))
    assert judged.returncode == run.code, judged.stderr
    results = json.loads((out / "results.json").read_text())
    got = verdicts(results)
    assert got["gpu-down"][0] == ran["gpu-down"][0] == "unreachable"
    assert "Ansible" in next(h for h in results["hosts"]
                             if h["name"] == "gpu-down")["error"]["message"]
    for name in ("gpu-old", "gpu-new", "gpu-new2", "gpu-edited"):
        assert got[name] == ran[name], name
    assert "gpu-edited" in (out / "report.html").read_text()
    assert (out / "junit.xml").read_text().count("<testcase") == \
        sum(len(h["checks"]) for h in results["hosts"])

    # a gate on the expected build, as run has it
    gated = fleetcheck("judge", *sorted(str(tree / n) for n in os.listdir(tree)),
                       "--expect-version", "==0.33.0", "--json", str(tmp_path / "gated.json"),
                       "--html", str(tmp_path / "gated.html"), cwd=str(tmp_path))
    assert gated.returncode == 1, gated.stderr
    build = {h["name"]: next(c["status"] for c in h["checks"] if c["id"] == "build-expected")
             for h in json.loads((tmp_path / "gated.json").read_text())["hosts"]}
    assert build == {"gpu-old": "fail", "gpu-new": "pass", "gpu-new2": "pass",
                     "gpu-edited": "pass", "gpu-down": "skip"}, build

    # the same facts as a JSON-lines stream on stdin (each document names its host)
    stream = "".join(json.loads((tree / name).read_text())["stdout"].strip() + "\n"
                     for name in ("gpu-old", "gpu-new", "gpu-edited"))
    piped = fleetcheck("judge", "--json", str(tmp_path / "piped.json"), "--html",
                       str(tmp_path / "piped.html"), stdin=stream, cwd=str(tmp_path))
    assert piped.returncode == 1, piped.stderr
    piped_verdicts = verdicts(json.loads((tmp_path / "piped.json").read_text()))
    assert piped_verdicts == {n: ran[n] for n in ("gpu-old", "gpu-new", "gpu-edited")}


def test_bundle_runs_as_python3_probe_py_and_names_its_host(tmp_path, real_venvs):
    bundle = fleetcheck("probe-bundle", "--venv", real_venvs["0.33.0"], "--host", "gpu7")
    assert bundle.returncode == 0, bundle.stderr
    probe = tmp_path / "probe.py"
    probe.write_text(bundle.stdout)
    # an empty environment and a hostile directory on the path change nothing
    (tmp_path / "fleetcheck").mkdir()
    (tmp_path / "fleetcheck" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    before = sorted(os.listdir(tmp_path))
    proc = subprocess.run(["python3", str(probe)], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path), env={"PATH": "/usr/bin:/bin",
                                                  "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["host"] == "gpu7" and facts["install"]["dist_infos"][0]["version"] == "0.33.0"
    assert sorted(os.listdir(tmp_path)) == before  # nothing written
    renamed = subprocess.run(["python3", str(probe), "--host", "other"], capture_output=True,
                             text=True, timeout=120)
    assert json.loads(renamed.stdout)["host"] == "other"
    unnamed = fleetcheck("probe-bundle", "--venv", real_venvs["0.33.0"])
    (tmp_path / "p2.py").write_text(unnamed.stdout)
    plain = subprocess.run(["python3", str(tmp_path / "p2.py")], capture_output=True,
                           text=True, timeout=120)
    assert json.loads(plain.stdout)["host"] == os.uname().nodename


def test_judge_refuses_what_names_no_host_and_keeps_bad_answers_as_errors(tmp_path):
    nameless = tmp_path / "nameless.json"
    nameless.write_text(json.dumps({"probe_version": 1, "errors": []}))
    proc = fleetcheck("judge", str(nameless), "--json", str(tmp_path / "r.json"),
                      "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 2 and "nameless.json" in proc.stderr and "host" in proc.stderr
    twice = tmp_path / "twice.jsonl"
    doc = json.dumps({"probe_version": 1, "host": "a", "errors": []})
    twice.write_text(doc + "\n" + doc + "\n")
    proc = fleetcheck("judge", str(twice), "--json", str(tmp_path / "r.json"),
                      "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 2 and "twice.jsonl line 2" in proc.stderr, proc.stderr
    garbage = tmp_path / "gpu9.example.json"
    garbage.write_text("Traceback (most recent call last):\n  oops\n")
    shaped = tmp_path / "gpu8"
    shaped.write_text(json.dumps({"probe_version": 1, "host": "gpu8",
                                  "install": {"dist_infos": "nope"}}))
    proc = fleetcheck("judge", str(garbage), str(shaped), "--json", str(tmp_path / "r.json"),
                      "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 3, proc.stderr
    hosts = {h["name"]: h for h in json.loads((tmp_path / "r.json").read_text())["hosts"]}
    assert hosts["gpu9.example"]["error"]["kind"] == "protocol"
    assert "gpu9.example.json" in hosts["gpu9.example"]["error"]["message"]
    assert hosts["gpu8"]["error"]["kind"] == "protocol"
    assert "install.dist_infos" in hosts["gpu8"]["error"]["message"]
    assert all(c["status"] == "skip" for h in hosts.values() for c in h["checks"])


def test_judge_and_report_each_name_the_other_for_the_others_files(tmp_path):
    """Results handed to judge, or facts (a document, JSON lines, Ansible's --tree
    result) handed to report or diff: exit 2 naming the command that reads them, never
    a made-up host with a protocol error."""
    facts = tmp_path / "gpu1.json"
    facts.write_text(json.dumps({"probe_version": 1, "host": "gpu1", "errors": []}))
    judged = fleetcheck("judge", str(facts), "--json", str(tmp_path / "my results.json"))
    assert judged.returncode == 3, judged.stderr
    results = str(tmp_path / "my results.json")
    again = fleetcheck("judge", str(facts), results, "--json", str(tmp_path / "r2.json"))
    assert (again.returncode, again.stderr) == (2, (
        "fleetcheck: error: %s: this is fleetcheck results (what `run` and `judge` write), "
        "not facts: `fleetcheck report '%s'` renders them\n" % (results, results)))
    assert not (tmp_path / "r2.json").exists()
    lines = tmp_path / "facts.jsonl"
    lines.write_text(facts.read_text() + "\n" + facts.read_text().replace("gpu1", "gpu2"))
    tree = tmp_path / "gpu3"
    tree.write_text(json.dumps({"changed": True, "rc": 0, "stdout": facts.read_text()}))
    for path in (facts, lines, tree):
        for command in (["report", str(path), "--html", str(tmp_path / "r.html")],
                        ["diff", results, str(path)]):
            proc = fleetcheck(*command)
            assert (proc.returncode, proc.stderr) == (2, (
                "fleetcheck: error: %s: this is probe facts (what a `fleetcheck probe-bundle` "
                "script prints), not results: `fleetcheck judge %s` judges them\n"
                % (path, path))), command
    assert not (tmp_path / "r.html").exists()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hosts": []}))
    proc = fleetcheck("report", str(other))
    assert (proc.returncode, proc.stderr) == (2, (
        "fleetcheck: error: %s: not a fleetcheck results file (schema_version missing; this "
        "fleetcheck reads schema 1)\n" % other))


@pytest.mark.internal_errors
def test_judge_keeps_a_null_entry_and_a_fleetcheck_bug_to_their_own_hosts(tmp_path):
    """A null where the probe always sends an object is the host's protocol error naming
    the field (read as empty it would be a verdict: an empty signature fails its check);
    a bug while judging one host is that host's internal error; the others are judged."""
    good = dict(recorded("0.33.0"), host="good")
    null_signature = dict(recorded("0.33.0"), host="null-sig")
    null_signature["signatures"] = dict(null_signature["signatures"], **{"dflash-swa": None})
    null_dist = dict(recorded("0.33.0"), host="null-dist")
    null_dist["install"] = dict(null_dist["install"], dist_infos=[None])
    buggy = dict(recorded("0.33.0"), host="buggy")
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(doc) + "\n" for doc in
                             (good, null_signature, null_dist, buggy)))
    proc = fleetcheck("judge", str(facts), "--no-integrity", "--json", str(tmp_path / "r.json"),
                      "--html", str(tmp_path / "r.html"),
                      env=dict(os.environ, FLEETCHECK_INJECT_FAULT="judge:buggy"))
    assert proc.returncode == 3, proc.stderr
    hosts = {h["name"]: h for h in json.loads((tmp_path / "r.json").read_text())["hosts"]}
    assert hosts["good"]["error"] is None and hosts["good"]["status"] == "pass"
    assert hosts["null-sig"]["error"]["kind"] == "protocol"
    assert "signatures.dflash-swa: null where an object belongs" in \
        hosts["null-sig"]["error"]["message"]
    assert hosts["null-dist"]["error"]["kind"] == "protocol"
    assert "install.dist_infos[0]: null where an object belongs" in \
        hosts["null-dist"]["error"]["message"]
    assert hosts["buggy"]["error"]["kind"] == "internal"
    assert "fault injected at stage judge" in hosts["buggy"]["error"]["message"]


def test_judge_refuses_facts_without_a_family_its_plan_needs_and_keeps_the_row(tmp_path):
    """The same check plan as `run`'s: a real probe's answer gathered without integrity,
    judged with the default playbook (which has the install-* checks), is that host's
    protocol error naming the family, its row every planned check; judged with the switch
    it was gathered with, it passes."""
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps(dict(recorded("0.33.0"), host="partial")) + "\n")
    out = tmp_path / "r.json"
    proc = fleetcheck("judge", str(facts), "--json", str(out), "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 3, proc.stderr
    host = json.loads(out.read_text())["hosts"][0]
    assert host["error"]["kind"] == "protocol"
    assert "no `integrity` facts, which this host's plan asked for" in host["error"]["message"]
    assert "--no-integrity" in host["error"]["message"] and str(facts) in host["error"]["message"]
    assert [c["id"] for c in host["checks"]] == [
        "dflash-layer-offset", "dflash-swa", "dflash-cache-drop", "install-record",
        "install-leftovers", "install-metadata", "install-import", "install-in-progress",
        "install-running"]
    assert all(c["status"] == "skip" for c in host["checks"])
    proc = fleetcheck("judge", str(facts), "--no-integrity", "--json", str(out),
                      "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    assert [c["status"] for c in json.loads(out.read_text())["hosts"][0]["checks"]] == ["pass"] * 3


def test_facts_without_the_version_file_family_are_a_protocol_error(tmp_path):
    """The version and commit come from it: facts that lack it cannot pass install-metadata
    or an expected version."""
    facts = tmp_path / "facts.jsonl"
    partial = dict(recorded("0.33.0"), host="no-version")
    del partial["version_file"]
    facts.write_text(json.dumps(partial) + "\n")
    out = tmp_path / "r.json"
    proc = fleetcheck("judge", str(facts), "--no-integrity", "--json", str(out), "--no-html")
    assert proc.returncode == 3, proc.stderr
    host = json.loads(out.read_text())["hosts"][0]
    assert host["error"]["kind"] == "protocol"
    assert "no `version_file` facts" in host["error"]["message"]


def test_judge_loads_no_ssh_library_and_no_scheduler(tmp_path):
    """judge takes the check plan, not the runner: facts gathered by another engine are
    judged without paramiko ever being imported, and the judge module needs no
    scheduler."""
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps(dict(recorded("0.33.0"), host="h")) + "\n")
    script = ("import sys\nfrom fleetcheck.cli import main\ncode = main(['judge', %r, "
              "'--no-integrity', '--json', %r, '--no-html'])\nprint(code, sorted(m for m in "
              "sys.modules if m.split('.')[0] == 'paramiko'))"
              % (str(facts), str(tmp_path / "r.json")))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=str(tmp_path))
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stdout + proc.stderr
    alone = subprocess.run([sys.executable, "-c", "import sys, fleetcheck.judge; print("
                            "'fleetcheck.runner' in sys.modules)"], capture_output=True,
                           text=True, timeout=60)
    assert alone.stdout.strip() == "False", alone.stderr
