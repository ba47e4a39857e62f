"""The command line as a user meets it: the demo, default output paths, playbook errors."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
import yaml

from fleetcheck.input_error import InputError
from fleetcheck.playbook import PACKAGED_PLAYBOOK, load_playbook
from fleetcheck.lab.synthetic import FIXED, write_install
from fleetcheck.lab.testhosts import LOOPBACK_NET

pytestmark = pytest.mark.unit


def fleetcheck(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetcheck", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


DEMO_SAW = [
    "demo: every host came out as it should (fleetcheck run exit code 1: a check failed, "
    "on gpu-stale):",
    "  gpu-healthy: pass; dflash-layer-offset pass, dflash-swa pass, dflash-cache-drop pass "
    "(its vLLM 0.33.0 has the three fixes)",
    "  gpu-stale: fail; dflash-layer-offset fail, dflash-swa fail, dflash-cache-drop fail "
    "(its vLLM 0.20.1 lacks the three fixes)",
    "  gpu-down: unreachable (nothing listens on its port)"]


@pytest.mark.sshd
def test_demo_runs_real_sshd_hosts_and_writes_the_report(tmp_path):
    proc = fleetcheck("demo", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "reports" / "demo" / "results.json").read_text())
    status = {h["name"]: h["status"] for h in results["hosts"]}
    assert status == {"gpu-healthy": "pass", "gpu-stale": "fail", "gpu-down": "unreachable"}
    assert (tmp_path / "reports" / "demo" / "report.html").exists()
    lines = proc.stderr.splitlines()
    at = lines.index(DEMO_SAW[0])
    assert lines[at:at + len(DEMO_SAW)] == DEMO_SAW, proc.stderr
    assert lines[at + len(DEMO_SAW)].startswith("report: ") and \
        lines[at + len(DEMO_SAW)].endswith("reports/demo/report.html")
    assert "NOT as expected" not in proc.stderr


@pytest.mark.sshd
def test_demo_says_which_addresses_are_taken_and_uses_free_ones(tmp_path):
    """Something listens where the demo's hosts would go (another demo's fleet): the demo
    says so and its own hosts answer, never the other fleet's sshd ("host key CHANGED")."""
    block = os.environ["FLEETCHECK_LOOPBACK_BLOCK"]
    taken = ["127.%d.%s.%d" % (LOOPBACK_NET, block, index) for index in (10, 11)]
    held = []
    try:
        for address in taken:
            held.append(socket.socket())
            held[-1].bind((address, 22))
            held[-1].listen(1)
        proc = fleetcheck("demo", cwd=str(tmp_path))
    finally:
        for sock in held:
            sock.close()
    assert proc.returncode == 0, proc.stderr
    free = ["127.%d.%s.%d" % (LOOPBACK_NET, block, index) for index in (12, 13, 14)]
    assert "demo: something already listens on %s (another `fleetcheck demo --keep`?): its " \
        "hosts take the next free addresses, %s\n" % (", ".join(taken), ", ".join(free)) \
        in proc.stderr
    hosts = yaml.safe_load((tmp_path / "reports" / "demo" / "inventory.yaml").read_text())[
        "all"]["children"]["demo"]["hosts"]
    assert [spec["ansible_host"] for spec in hosts.values()] == free
    assert "\n".join(DEMO_SAW) in proc.stderr


def demo_with_stale_host_serving(files: dict[str, str], version: str, tmp_path, monkeypatch,
                                 capsys) -> tuple[int, list[str]]:
    """The real demo (real sshd hosts, the real check), its stale host serving another
    tree: (exit code, the lines after 'what differed')."""
    import fleetcheck.demo as demo
    from fleetcheck.cli import main
    monkeypatch.chdir(tmp_path)
    installs = dict(demo.INSTALLS,
                    **{"gpu-stale": demo.DemoInstall(version, files, "g132765e35")})
    code = demo.run_demo(main, installs=installs)
    err = capsys.readouterr().err
    assert "came out as it should" not in err and "lacks the three fixes" not in err, err
    lines = err.splitlines()
    at = lines.index("demo: NOT as expected; what differed (host, expected, got):")
    end = next(i for i in range(at, len(lines)) if lines[i].startswith("report: "))
    return code, lines[at + 1:end]


@pytest.mark.sshd
def test_demo_says_which_fix_check_differed_when_the_stale_host_still_fails(
        tmp_path, monkeypatch, capsys):
    """The stale host has the +1 fix: it still fails (two fixes missing) and the run still
    exits 1, but its dflash-layer-offset passes, so the demo is not as it promises."""
    from fleetcheck.lab.synthetic import UNFIXED
    runner = "vllm/v1/worker/gpu_model_runner.py"
    code, differed = demo_with_stale_host_serving(dict(UNFIXED, **{runner: FIXED[runner]}),
                                                  "0.20.1", tmp_path, monkeypatch, capsys)
    assert code == 1
    assert differed == ["  gpu-stale dflash-layer-offset: expected fail, got pass"]


@pytest.mark.sshd
def test_demo_never_says_the_stale_host_fails_when_it_passes(tmp_path, monkeypatch, capsys):
    code, differed = demo_with_stale_host_serving(FIXED, "0.33.0", tmp_path, monkeypatch,
                                                  capsys)
    assert code == 1
    assert differed == ["  fleetcheck run exit code: expected 1, got 3",
                        "  gpu-stale status: expected fail, got pass",
                        "  gpu-stale dflash-layer-offset: expected fail, got pass",
                        "  gpu-stale dflash-swa: expected fail, got pass",
                        "  gpu-stale dflash-cache-drop: expected fail, got pass"]


def test_demo_without_results_says_so_and_fails():
    """A run that wrote no results (a bad option, a crash) is a difference, never a pass."""
    from fleetcheck.demo import compare
    differed = compare("reports/demo/results.json (no such file)", ["gpu-healthy"],
                       ["dflash-swa"], 2)
    assert [str(d) for d in differed] == [
        "fleetcheck run exit code: expected 1, got 2",
        "results file: expected the run's results, got none readable: "
        "reports/demo/results.json (no such file)"]


def test_demo_help_documents_its_exit_codes(tmp_path):
    text = fleetcheck("demo", "--help", cwd=str(tmp_path)).stdout
    assert "exit codes:\n  0    every host came out as it should" in text
    assert "\n  1    something differed: each difference is printed as host" in text


def test_demo_that_cannot_write_its_outputs_says_where_before_starting_hosts(tmp_path):
    (tmp_path / "reports").write_text("a file where the demo's directory would go")
    proc = fleetcheck("demo", cwd=str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "fleetcheck: error: %s: cannot write the demo's outputs: " % (
        tmp_path / "reports" / "demo") in proc.stderr


def test_default_outputs_go_to_reports_timestamp(tmp_path):
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED)
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(yaml.safe_dump(
        {"all": {"hosts": {"here": {"connection": "local", "venv": venv}}}}))
    proc = fleetcheck("run", str(inventory), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    runs = os.listdir(tmp_path / "reports")
    assert len(runs) == 1
    assert sorted(os.listdir(tmp_path / "reports" / runs[0])) == ["report.html", "results.json"]
    again = fleetcheck("run", str(inventory), cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr + again.stdout
    assert len(os.listdir(tmp_path / "reports")) == 2


def test_a_host_vars_file_of_no_host_is_a_warning_with_the_near_miss(tmp_path):
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED)
    (tmp_path / "hosts.ini").write_text("[gpus]\ngpu-healthy connection=local venv=%s\n" % venv)
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu-helthy.yml").write_text("fleetcheck_expect_commit: 0abc\n")
    proc = fleetcheck("run", "hosts.ini", "--json", "out.json", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr  # the commit it expects is not applied
    assert proc.stderr.startswith(
        "fleetcheck: warning: %s matches no host of the inventory, so nothing in it is read "
        "(did you mean gpu-healthy?)\n" % (tmp_path / "host_vars" / "gpu-helthy.yml")), \
        proc.stderr


def test_a_missing_key_file_names_the_file_group_and_variable_that_set_it(tmp_path):
    (tmp_path / "hosts.ini").write_text("[gpus]\ngpu1 ansible_host=127.0.0.1\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpus.yml").write_text(
        "ansible_ssh_private_key_file: %s\n" % (tmp_path / "no-such-key"))
    (tmp_path / "known_hosts").write_text("")
    proc = fleetcheck("run", "hosts.ini", "--known-hosts", "known_hosts", "--json", "r.json",
                      cwd=str(tmp_path))
    assert (proc.returncode, proc.stderr) == (2, (
        "fleetcheck: error: %s: group 'gpus': field 'ansible_ssh_private_key_file': no such "
        "key file on this machine: %s (for host 'gpu1')\n" % (
            tmp_path / "group_vars" / "gpus.yml", tmp_path / "no-such-key")))
    assert not (tmp_path / "r.json").exists()


def test_every_inventory_mistake_is_its_own_error_line_in_one_run(tmp_path):
    (tmp_path / "hosts.ini").write_text("[gpus]\ngpu1 venvv=/x ansible_prot=22\n"
                                        "gpu2 ansible_port=nope\n")
    proc = fleetcheck("run", "hosts.ini", cwd=str(tmp_path))
    assert (proc.returncode, proc.stderr.splitlines()) == (2, [
        "fleetcheck: error: hosts.ini:2: host 'gpu1': field 'venvv': unknown variable: did "
        "you mean venv?",
        "fleetcheck: error: hosts.ini:2: host 'gpu1': field 'ansible_prot': unknown variable: "
        "did you mean ansible_port?",
        "fleetcheck: error: hosts.ini:3: host 'gpu2': field 'ansible_port': must be a port "
        "number 1-65535, got 'nope'"]), proc.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("args, line", [
    (["run", "x.ini", "-j", "0"],
     "command line: field '--parallel': must be at least 1, got 0"),
    (["run", "x.ini", "--timeout", "abc"],
     "command line: field '--timeout': 'abc' is not a number (seconds)"),
    (["run", "x.ini", "--bogus"], "command line: unrecognized arguments: --bogus"),
    (["run"], "command line: field 'inventory': give an inventory (positional or -i SOURCE)"),
    (["report"], "command line: the following arguments are required: results"),
])
def test_every_command_line_error_has_the_one_error_format(tmp_path, args, line):
    proc = fleetcheck(*args, cwd=str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "fleetcheck: error: " + line, proc.stderr


def test_default_outputs_in_a_second_already_used_never_overwrite_its_results(tmp_path):
    """Every second these calls can start in already has a run's results: each call
    writes a directory of its own beside them (reports/<time>-N/)."""
    start = datetime.now()
    earlier = []
    for offset in range(-1, 300):
        directory = tmp_path / "reports" / (start + timedelta(seconds=offset)).strftime(
            "%Y%m%d-%H%M%S")
        directory.mkdir(parents=True)
        (directory / "results.json").write_text("an earlier run's results")
        earlier.append(directory / "results.json")
    facts = tmp_path / "gpu1.json"
    facts.write_text(json.dumps({"probe_version": 1, "host": "gpu1", "errors": []}))
    written = []
    for _ in range(3):
        proc = fleetcheck("judge", str(facts), cwd=str(tmp_path))
        assert proc.returncode == 3, proc.stderr  # gpu1 sent no install facts
        (line,) = [line for line in proc.stdout.splitlines() if line.startswith("results:")]
        written.append(line.split()[1])
    assert len(set(written)) == 3, written
    for path in written:
        assert re.fullmatch(r"reports/\d{8}-\d{6}-\d+/results\.json", path), path
        assert json.loads((tmp_path / path).read_text())["hosts"][0]["name"] == "gpu1"
    assert {path.read_text() for path in earlier} == {"an earlier run's results"}


def test_packaged_playbook_checks_the_three_fixes():
    assert [c.id for c in load_playbook().checks] == [
        "dflash-layer-offset", "dflash-swa", "dflash-cache-drop"]


@pytest.mark.parametrize("mutate, needles", [
    (lambda p: p["checks"][0]["outcomes"][0].update(when=["nope"]), ["unknown finding 'nope'"]),
    (lambda p: p["checks"][1]["find"]["windows"].update(kind="regex"), ["field 'kind'"]),
    (lambda p: p["checks"][2].update(id="Bad Id"), ["field 'id'"]),
    (lambda p: p["checks"][0]["find"]["aux_ids"].update(files=["/etc/passwd"]),
     ["inside site-packages"]),
    (lambda p: p["checks"][2]["find"]["block_drop"].update(question="nope"),
     ["field 'question'", "drop, offset, window"]),
    (lambda p: p["checks"][0]["find"]["aux_ids"].update(key="not a name"),
     ["field 'key'", "identifier"]),
])
def test_playbook_errors_name_the_check_and_field(tmp_path, mutate, needles):
    data = yaml.safe_load(open(PACKAGED_PLAYBOOK))
    mutate(data)
    path = tmp_path / "pb.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as info:
        load_playbook(str(path))
    assert str(info.value).startswith(str(path))
    for needle in needles:
        assert needle in str(info.value)


def test_packaged_playbook_keeps_its_pr_numbers_and_a_comment_cut_reference_is_refused(
        tmp_path):
    references = [c.reference for c in load_playbook().checks]
    assert references[0] == "vLLM PR #40727" and references[1].startswith("vLLM PR #40898")
    original = open(PACKAGED_PLAYBOOK).read()
    line = original.splitlines().index('    reference: "vLLM PR #40727"') + 1
    text = original.replace('reference: "vLLM PR #40727"', "reference: vLLM PR #40727")
    path = tmp_path / "pb.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_playbook(str(path))
    assert str(info.value).startswith(str(path))
    assert "line %d: field 'reference'" % line in str(info.value)
    assert "reads 'vLLM PR': the '#40727' after it is a YAML comment; quote the whole " \
        "value (reference: \"vLLM PR #40727\")" in str(info.value)


def test_a_pattern_without_anything_to_search_for_is_refused(tmp_path):
    data = yaml.safe_load(open(PACKAGED_PLAYBOOK))
    data["checks"][1]["find"]["shape"] = {"kind": "pattern", "files": ["vllm/a.py"],
                                          "patterns": ["( ... ) = $x"]}
    path = tmp_path / "pb.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="no name or word to search for"):
        load_playbook(str(path))


def test_demo_without_sshd_says_what_to_install_and_runs_locally(tmp_path, monkeypatch, capsys):
    import fleetcheck.demo as demo
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "missing_requirements",
                        lambda: ["OpenSSH server: apt-get install -y openssh-server"])
    from fleetcheck.cli import main
    assert demo.run_demo(main) == 0
    out = capsys.readouterr().out
    assert "apt-get install -y openssh-server" in out and "connection: local" in out
    results = json.loads((tmp_path / "reports" / "demo" / "results.json").read_text())
    assert {h["name"]: h["status"] for h in results["hosts"]} == {
        "gpu-healthy": "pass", "gpu-stale": "fail"}


def test_several_inventory_sources_and_an_ansible_limit(tmp_path):
    """The positional inventory and -i sources merge (INI + YAML + a dynamic inventory);
    --limit takes Ansible's patterns; results keep inventory order."""
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED)
    (tmp_path / "hosts.ini").write_text(
        "[gpus]\nhere[1:3] ansible_connection=local ntp_server=ntp.example\n"
        "[gpus:vars]\nvenv=%s\n" % venv)
    (tmp_path / "extra.yml").write_text(yaml.safe_dump(
        {"canary": {"hosts": {"here2": None}}}))
    script = tmp_path / "cmdb.py"
    script.write_text("#!%s\nimport json\nprint(json.dumps({'late': {'hosts': ['here3']},"
                      " '_meta': {'hostvars': {}}}))\n" % sys.executable)
    script.chmod(0o755)
    common = ["--json", "out.json", "--html", "out.html"]
    proc = fleetcheck("run", "hosts.ini", "-i", "extra.yml", "-i", str(script),
                      "--limit", "gpus:!canary", *common, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    results = json.loads((tmp_path / "out.json").read_text())
    assert [h["name"] for h in results["hosts"]] == ["here1", "here3"]
    assert results["inventory"] == "hosts.ini + extra.yml + %s" % script
    assert "hosts.ini + extra.yml + cmdb.py" in (tmp_path / "out.html").read_text()
    assert [h["groups"] for h in results["hosts"]] == [["gpus"], ["gpus", "late"]]
    proc = fleetcheck("run", "-i", "hosts.ini", "--limit", "~here[12]", *common,
                      cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert [h["name"] for h in json.loads((tmp_path / "out.json").read_text())["hosts"]] == \
        ["here1", "here2"]


@pytest.mark.parametrize("args, needles", [
    (["run", "hosts.ini", "--limit", "gpus,dc9"], ["'dc9' matches no host or group"]),
    (["run"], ["give an inventory"]),
    (["run", "-i", "cmdb.sh"], ["cmdb.sh", "exited with status 2", "CMDB is down"]),
    (["run", "hosts.ini", "-i", "bad.ini"], ["bad.ini:2: ", "expected key=value"]),
])
def test_inventory_and_limit_errors_exit_2(tmp_path, args, needles):
    (tmp_path / "hosts.ini").write_text("[gpus]\nhere ansible_connection=local\n")
    (tmp_path / "bad.ini").write_text("[gpus]\nhere venv\n")
    script = tmp_path / "cmdb.sh"
    script.write_text("#!/bin/sh\necho 'CMDB is down' >&2\nexit 2\n")
    script.chmod(0o755)
    proc = fleetcheck(*args, cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr + proc.stdout
    for needle in needles:
        assert needle in proc.stderr


@pytest.mark.parametrize("host_vars, ssh_config, needles", [
    ({"proxy_jump": "ops@gate:22x"}, None,
     ["inv.yaml: host 'gpu1': field 'proxy_jump': ProxyJump 'ops@gate:22x'", "1-65535"]),
    ({"ansible_ssh_common_args": "-J gate1,,gate2"}, None,
     ["inv.yaml: host 'gpu1': field 'ansible_ssh_common_args'", "'gate1,,gate2'"]),
    ({"vllm_url": "http://h:99999"}, None,
     ["inv.yaml: host 'gpu1': field 'vllm_url': 'http://h:99999'", "1-65535"]),
    ({}, "Host gpu1\n    ProxyJump ops@gate:22x\n",
     ["ssh_config: host 'gpu1': field 'ProxyJump': 'ops@gate:22x'", "1-65535"]),
    ({}, "Host gpu1\n    ProxyJump gate\nHost gate\n    Port 99999\n",
     ["ssh_config: host 'gate' (bastion of gpu1): field 'Port'", "'99999'"]),
])
def test_a_bad_route_port_or_url_exits_2_before_any_host_is_contacted(
        tmp_path, host_vars, ssh_config, needles):
    """gpu1 has no sshd: had the run started it would end unreachable (exit 3)."""
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu1": host_vars}}}))
    config = tmp_path / "ssh_config"
    config.write_text(ssh_config or "")
    proc = fleetcheck("run", str(inventory), "--ssh-config", str(config), "--json", "out.json",
                      "--timeout", "5", cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr + proc.stdout
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("name, content, message", [
    ("missing.json", None, "missing.json: cannot read: No such file or directory"),
    ("empty.json", "{}", "empty.json: not a fleetcheck results file (schema_version missing; "
                         "this fleetcheck reads schema 1)"),
    ("list.json", "[1]", "list.json: not a fleetcheck results file (not a JSON object)"),
    ("text.json", "nope", "text.json: not a fleetcheck results file (not JSON: Expecting value "
                          "at line 1, column 1)"),
    ("broken.yaml", "all:\n  hosts:\n   - x\n  : y\n", "broken.yaml: not valid YAML: line 4, "
                                                      "column 3: did not find expected key"),
    ("typo.yaml", "all:\n  hosts:\n    a: {connection: lokal}\n",
     "typo.yaml: host 'a': field 'connection': must be one of kubectl, local, ssh, got 'lokal'"),
])
def test_bad_files_are_named_with_what_is_wrong_in_words(tmp_path, name, content, message):
    """What the user gave is named, with the problem in words: no Python reprs, no
    '<unicode string>', no path said twice."""
    if content is not None:
        (tmp_path / name).write_text(content)
    command = ["report", name] if name.endswith(".json") else ["run", name]
    proc = fleetcheck(*command, cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert "fleetcheck: error: " + message in proc.stderr, proc.stderr
    assert "<unicode string>" not in proc.stderr and proc.stderr.count(name) == 1


def test_a_bare_version_as_a_specifier_gets_the_one_hint_that_fixes_it(tmp_path):
    (tmp_path / "hosts.ini").write_text("[gpus]\nhere ansible_connection=local\n")
    proc = fleetcheck("run", "hosts.ini", "--expect-version", "0.33.0", cwd=str(tmp_path))
    assert proc.returncode == 2
    assert "not a PEP 440 version specifier: '0.33.0' (a bare version: did you mean " \
        "'==0.33.0'?)" in proc.stderr, proc.stderr
