"""An operator's first hour, through the installed package (a wheel in a fresh venv, run
outside the checkout) against real sshd hosts: one box on 0.33.0 with the fixes, one
still on 0.20.1. Each test is one thing a new user meets."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import xml.etree.ElementTree as ET

import pytest
import yaml

from fleet_helpers import clean_env, installed_fleetcheck, ssh_hosts
from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from fleetcheck.lab.testhosts import LoopbackFleet, banner_ready
from probe_helpers import ENV

HEALTHY_ENV = "/opt/ml-env-healthy"  # a second path on gpu02: its earlier, healthy build


@pytest.fixture(scope="module")
def boxes(tmp_path_factory, fleet_factory):
    """gpu01: 0.33.0 with the fixes; gpu02: 0.20.1 at ENV (and 0.33.0 at HEALTHY_ENV)."""
    tmp = tmp_path_factory.mktemp("first-hour")
    good, stale = str(tmp / "good"), str(tmp / "stale")
    write_install(good, "0.33.0", FIXED, commit="g4ba787ec9")
    write_install(stale, "0.20.1", UNFIXED, commit="g132765e35")
    fleet = fleet_factory(str(tmp / "fleet"))
    fleet.add("gpu01", mounts={ENV: good})
    fleet.add("gpu02", mounts={ENV: stale, HEALTHY_ENV: good})
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


def inventory(tmp_path, fleet: LoopbackFleet, **per_host: dict) -> str:
    hosts = ssh_hosts(fleet, fleet.hosts, venv=ENV)
    for name, extra in per_host.items():
        hosts[name].update(extra)
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}, sort_keys=False))
    return str(path)


def results(path) -> dict[str, dict]:
    return {h["name"]: h for h in json.loads(open(path).read())["hosts"]}


def test_the_canary_recipe_fails_only_the_host_off_the_expected_version(installed, tmp_path,
                                                                         boxes):
    run = installed_fleetcheck(installed, tmp_path, "run", inventory(tmp_path, boxes),
                               "--known-hosts", boxes.known_hosts, "--no-import-check",
                               "--expect-version", "==0.33.0", "--expect-same-build",
                               "--json", "r.json", "--html", "r.html")
    assert run.returncode == 1, run.stderr
    hosts = results(tmp_path / "r.json")
    build = {name: next(c for c in h["checks"] if c["id"] == "build-expected")
             for name, h in hosts.items()}
    assert build["gpu01"]["status"] == "pass", build["gpu01"]
    assert build["gpu02"]["status"] == "fail"
    assert build["gpu02"]["message"] == "off the expected build: version 0.20.1 is not ==0.33.0"


def test_a_failed_fix_says_what_fixes_it_in_terminal_html_and_junit(installed, tmp_path, boxes):
    run = installed_fleetcheck(installed, tmp_path, "run", inventory(tmp_path, boxes),
                               "--known-hosts", boxes.known_hosts, "--no-import-check",
                               "--json", "r.json", "--html", "r.html", "--junit", "r.xml")
    assert run.returncode == 1, run.stderr
    remedy = "Fixed in 0.22.0 (vLLM PR #40727)."
    offset = next(c for c in results(tmp_path / "r.json")["gpu02"]["checks"]
                  if c["id"] == "dflash-layer-offset")
    assert offset["status"] == "fail" and offset["message"].endswith(remedy)
    assert offset["details"]["reference"] == "vLLM PR #40727"
    assert remedy in " ".join(run.stdout.split())  # the terminal may wrap it
    assert remedy in (tmp_path / "r.html").read_text()
    failures = [case.find("failure") for case in ET.parse(str(tmp_path / "r.xml")).iter("testcase")
                if case.get("classname") == "fleetcheck.gpu02"
                and case.get("name") == "dflash-layer-offset"]
    assert remedy in failures[0].get("message")
    assert "Fixed in 0.26.0 (vLLM PR #40898 (unmerged)" in " ".join(run.stdout.split())


def test_diff_says_why_a_host_got_worse(installed, tmp_path, boxes):
    before = installed_fleetcheck(installed, tmp_path, "run",
                                  inventory(tmp_path, boxes, gpu02={"venv": HEALTHY_ENV}),
                                  "--known-hosts", boxes.known_hosts, "--no-import-check",
                                  "--json", "before.json", "--html", "before.html")
    after = installed_fleetcheck(installed, tmp_path, "run", inventory(tmp_path, boxes),
                                 "--known-hosts", boxes.known_hosts, "--no-import-check",
                                 "--json", "after.json", "--html", "after.html")
    assert (before.returncode, after.returncode) == (0, 1), before.stderr + after.stderr
    diff = installed_fleetcheck(installed, tmp_path, "diff", "before.json", "after.json")
    assert diff.returncode == 1
    lines = diff.stdout.splitlines()
    assert "gpu02  WORSE" in lines and "gpu01" not in diff.stdout.split("verdict")[0]
    fixes = lines.index("  checks dflash-layer-offset, dflash-swa, dflash-cache-drop: pass -> "
                        "fail  (worse)")
    assert lines[fixes + 1].startswith("      dflash-layer-offset: ")
    assert lines[fixes + 1].endswith("Fixed in 0.22.0 (vLLM PR #40727).")
    usage = installed_fleetcheck(installed, tmp_path, "diff", "--help").stdout
    assert "results JSON of the earlier run" in usage
    # a host the earlier run did not have says why it does not pass, too
    only_gpu01 = installed_fleetcheck(installed, tmp_path, "run", inventory(tmp_path, boxes),
                                      "--limit", "gpu01", "--known-hosts", boxes.known_hosts,
                                      "--no-import-check", "--json", "one.json", "--no-html")
    assert only_gpu01.returncode == 0, only_gpu01.stderr
    grown = installed_fleetcheck(installed, tmp_path, "diff", "one.json", "after.json")
    assert grown.returncode == 1
    lines = grown.stdout.splitlines()
    at = lines.index("gpu02  (added)  WORSE")
    assert lines[at + 1] == "  status: - -> fail  (worse)"
    assert lines[at + 2] == "  checks dflash-layer-offset, dflash-swa, dflash-cache-drop: - -> " \
        "fail  (worse)"
    assert lines[at + 3].endswith("Fixed in 0.22.0 (vLLM PR #40727).")


def test_the_demo_checks_itself_keeps_its_inventory_and_says_what_to_try_next(installed,
                                                                              tmp_path):
    demo = installed_fleetcheck(installed, tmp_path, "demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "demo: every host came out as it should" in demo.stderr
    assert "  gpu-stale: fail; dflash-layer-offset fail, dflash-swa fail, dflash-cache-drop " \
        "fail (its vLLM 0.20.1 lacks the three fixes)\n" in demo.stderr
    assert "Next: `fleetcheck demo --keep`" in demo.stderr
    ran = json.loads((tmp_path / "reports" / "demo" / "results.json").read_text())
    assert os.path.isfile(os.path.join(str(tmp_path), ran["inventory"]))


def ready_lines(demo: subprocess.Popen) -> list[str]:
    """The demo's lines up to the one saying its fleet is up ("Try:"): the event itself,
    read as it comes (pytest-timeout bounds a demo that never says it); a demo that exits
    first fails the test with what it said."""
    lines: list[str] = []
    while not any("Try:" in line for line in lines):
        line = demo.stderr.readline()
        assert line, "the demo ended before its fleet was up:\n" + "".join(lines)
        lines.append(line)
    return lines


def test_demo_keep_leaves_a_fleet_to_try_commands_on_until_ctrl_c(installed, tmp_path):
    """Started with SIGINT ignored, as a shell's background job (a CI step, `... &`)
    inherits it: Ctrl-C still stops the demo. PYTHONFAULTHANDLER: a demo that does not
    stop prints every thread's stack on SIGABRT."""
    demo = subprocess.Popen([os.path.join(installed, "fleetcheck"), "demo", "--keep"],
                            cwd=str(tmp_path), env=clean_env(PYTHONFAULTHANDLER="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        lines = ready_lines(demo)
        command = demo.stderr.readline().split()  # fleetcheck run INV --known-hosts KH
        assert command[:2] == ["fleetcheck", "run"], lines
        again = installed_fleetcheck(installed, tmp_path, *command[1:], "--json", "again.json",
                                     "--html", "again.html")
        assert again.returncode == 1, again.stderr  # the stale host fails, on a live fleet
        assert {n: h["status"] for n, h in results(tmp_path / "again.json").items()} == {
            "gpu-healthy": "pass", "gpu-stale": "fail", "gpu-down": "unreachable"}
        address = yaml.safe_load(open(command[2]))["all"]["children"]["demo"]["hosts"][
            "gpu-healthy"]["ansible_host"]
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            code = demo.wait(timeout=60)
        except subprocess.TimeoutExpired:  # where it is stuck: its threads' stacks
            demo.send_signal(signal.SIGABRT)
            demo.wait(timeout=30)
            raise AssertionError("the demo did not stop within 60 s of Ctrl-C; it said "
                                 "after its fleet was up (stacks last):\n%s\nstdout:\n%s"
                                 % (demo.stderr.read()[-12000:], demo.stdout.read()[-2000:]))
    assert code == 0
    assert not banner_ready(address, 22)  # Ctrl-C stopped the fleet


def test_the_example_inventories_ship_with_the_package(installed, tmp_path):
    shown = installed_fleetcheck(installed, tmp_path, "examples")
    assert shown.returncode == 0 and "example.yaml" in shown.stdout
    assert "ini-example/group_vars/all.yml" in shown.stdout
    copied = installed_fleetcheck(installed, tmp_path, "examples", "--copy", "mine")
    assert copied.returncode == 0, copied.stderr
    assert (tmp_path / "mine" / "ini-example" / "hosts.ini").read_text() == open(os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "inventories",
        "ini-example", "hosts.ini")).read()
    again = installed_fleetcheck(installed, tmp_path, "examples", "--copy", "mine")
    assert again.returncode == 2 and "exists already" in again.stderr


def on_a_terminal(bin_dir: str, cwd, *args: str, columns: int = 100) -> str:
    """The command's output on a real pseudo-terminal `columns` wide (colours on)."""
    import fcntl
    import pty
    import struct
    import termios
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([os.path.join(bin_dir, "fleetcheck"), *args], cwd=str(cwd),
                            env=clean_env(TERM="xterm-256color"), stdin=child, stdout=child,
                            stderr=subprocess.DEVNULL)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(parent, 65536)
        except OSError:  # EIO: the command exited and closed its end
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(parent)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_terminal_output_styles_only_titles_and_wraps_evidence_with_its_indent(installed,
                                                                              tmp_path, boxes):
    run = installed_fleetcheck(installed, tmp_path, "run", inventory(tmp_path, boxes),
                               "--known-hosts", boxes.known_hosts, "--no-import-check",
                               "--json", "r.json", "--html", "r.html")
    assert run.returncode == 1
    shown = on_a_terminal(installed, tmp_path, "report", "r.json", "--html", "again.html")
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    # italic (3) and bold (1) are switched on only for title lines, never left on for rows
    for line in shown.splitlines():
        plain = ansi.sub("", line)
        if "\x1b[3m" in line or "\x1b[3;" in line:
            assert plain.startswith("fleetcheck: "), line
        if re.search(r"\x1b\[1m", line):
            assert plain.rstrip().endswith(":") or plain.startswith(("Fleet:", "host ")), line
    plain = ansi.sub("", shown).splitlines()
    assert all(len(line) <= 100 for line in plain)
    start = plain.index("Evidence:")
    entries = plain[start + 1:]
    wrapped = [line for line in entries[:40] if line.startswith("          ")]
    assert wrapped, "\n".join(entries[:40])  # some evidence is longer than 100 columns ...
    assert all(not line.startswith(" ") or line.startswith("  ") for line in entries[:40])
    # ... and piped, nothing is wrapped: the legend is one line, each evidence line whole
    piped = run.stdout.splitlines()
    legend = [line for line in piped if line.startswith("checks: 1 ")]
    assert len(legend) == 1 and legend[0].endswith("install-running")
    assert any(len(line) > 160 for line in piped)


def test_run_help_has_exit_codes_and_examples_and_bad_numbers_say_why(installed, tmp_path):
    usage = installed_fleetcheck(installed, tmp_path, "run", "--help").stdout
    assert "exit codes:" in usage and "130  interrupted" in usage
    assert "fleetcheck run hosts.ini --expect-version '==0.33.0' --expect-same-build" in usage
    bad = installed_fleetcheck(installed, tmp_path, "run", "x.ini", "--timeout", "abc")
    assert bad.returncode == 2
    assert bad.stderr.endswith("fleetcheck: error: command line: field '--timeout': 'abc' is "
                               "not a number (seconds)\n"), bad.stderr
    assert "positive_float" not in bad.stderr
    page = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "docs", "cli.md")).read()
    options = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", usage)) - {"--help"})
    missing = [option for option in options if "`%s" % option not in page]
    assert missing == [], "options of run --help docs/cli.md does not describe"


def test_a_limit_matching_nothing_suggests_from_the_inventory(installed, tmp_path, boxes):
    hosts = inventory(tmp_path, boxes)
    bad = installed_fleetcheck(installed, tmp_path, "run", hosts, "--limit", "gpu",
                               "--known-hosts", boxes.known_hosts)
    assert bad.returncode == 2
    assert "fleetcheck: error: command line: field '--limit': pattern 'gpu' matches no host " \
        "or group of %s; did you " \
        "mean gpu* (a glob: gpu01, gpu02)?" % hosts in bad.stderr


def test_outputs_go_where_asked_and_json_dash_is_stdout(installed, tmp_path, boxes):
    hosts = inventory(tmp_path, boxes)
    common = ("--known-hosts", boxes.known_hosts, "--no-import-check")
    # --json alone: the HTML beside it, nothing in reports/
    alone = installed_fleetcheck(installed, tmp_path, "run", hosts, *common, "--json",
                                 "out/dc1.json")
    assert alone.returncode == 1, alone.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["dc1.html", "dc1.json"]
    assert not (tmp_path / "reports").exists()
    # --no-html: no HTML anywhere
    bare = installed_fleetcheck(installed, tmp_path, "run", hosts, *common, "--json",
                                "bare/r.json", "--no-html")
    assert bare.returncode == 1 and os.listdir(tmp_path / "bare") == ["r.json"]
    # --json -: the results on stdout, whole JSON, the summary on stderr, no file written
    piped = installed_fleetcheck(installed, tmp_path, "run", hosts, *common, "--json", "-")
    assert piped.returncode == 1, piped.stderr
    document = json.loads(piped.stdout)
    assert {h["name"]: h["status"] for h in document["hosts"]} == {"gpu01": "pass",
                                                                   "gpu02": "fail"}
    assert "Fleet: NOT READY" in piped.stderr and "results: stdout" in piped.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(["bare", "hosts.yaml", "out"])
    # report never writes beside its inputs unless asked
    (tmp_path / "out" / "dc2.json").write_text((tmp_path / "out" / "dc1.json").read_text())
    before = sorted(os.listdir(tmp_path / "out"))
    (tmp_path / "out" / "dc1.html").write_text("the first input's own report")
    merged = installed_fleetcheck(installed, tmp_path, "report", "out/dc1.json", "out/dc2.json")
    assert merged.returncode == 1
    assert "nothing written" in merged.stderr
    assert sorted(os.listdir(tmp_path / "out")) == before
    assert (tmp_path / "out" / "dc1.html").read_text() == "the first input's own report"
    shown = installed_fleetcheck(installed, tmp_path, "report", "out/dc1.json", "--json", "-")
    assert json.loads(shown.stdout)["hosts"][0]["name"] == "gpu01"


@pytest.mark.parametrize("typo, meant", [
    ("ansible_prot", "ansible_port"), ("ansible_usr", "ansible_user"),
    ("ansible_ssh_private_keyfile", "ansible_ssh_private_key_file"),
    ("pyton", "python"), ("containr", "container"),
])
def test_a_typo_of_a_connection_variable_is_exit_2_before_connecting(installed, tmp_path, boxes,
                                                                      typo, meant):
    hosts = inventory(tmp_path, boxes, gpu02={typo: "x"})
    bad = installed_fleetcheck(installed, tmp_path, "run", hosts, "--known-hosts",
                               boxes.known_hosts, "--json", "r.json")
    assert bad.returncode == 2, bad.stderr
    assert "%s: host 'gpu02': field '%s': unknown variable: did you mean %s?" % (
        hosts, typo, meant) in bad.stderr
    assert not (tmp_path / "r.json").exists()


def test_other_playbooks_and_ansibles_other_variables_still_pass(installed, tmp_path, boxes):
    hosts = inventory(tmp_path, boxes, gpu01={"containers": ["web"], "ansible_password": "s3",
                                              "ansible_become_pass": "s3", "app_port": 80})
    ok = installed_fleetcheck(installed, tmp_path, "run", hosts, "--known-hosts",
                              boxes.known_hosts, "--no-import-check", "--json", "r.json")
    assert ok.returncode == 1, ok.stderr  # gpu02's old build fails, as it should
    assert "fleetcheck: note: password auth is not supported: ansible_password ignored " \
        "(set in %s host 'gpu01')" % hosts in ok.stderr
    assert "ansible_become_pass ignored" in ok.stderr


def test_controller_side_mistakes_are_said_before_connecting(installed, tmp_path, boxes):
    hosts = inventory(tmp_path, boxes, gpu02={"key": str(tmp_path / "no-such-key")})
    missing_key = installed_fleetcheck(installed, tmp_path, "run", hosts, "--known-hosts",
                                       boxes.known_hosts, "--json", "r.json")
    assert missing_key.returncode == 2
    assert "host 'gpu02': field 'key': no such key file on this machine: %s" % (
        tmp_path / "no-such-key") in missing_key.stderr
    assert missing_key.stderr.count(str(tmp_path / "no-such-key")) == 1
    assert not (tmp_path / "r.json").exists()
    hosts = inventory(tmp_path, boxes)
    nope = installed_fleetcheck(installed, tmp_path, "run", hosts, "--known-hosts", "./nope")
    assert nope.returncode == 2 and "./nope: field '--known-hosts': no such file" in nope.stderr
    # accept-new starts the file and says each key it adds
    fresh = installed_fleetcheck(installed, tmp_path, "run", hosts, "--known-hosts", "./new_kh",
                                 "--host-key-policy", "accept-new", "--no-import-check",
                                 "--json", "r.json")
    assert fresh.returncode == 1, fresh.stderr
    for host in boxes.hosts:
        assert "fleetcheck: added host key for %s (" % host.address in fresh.stderr
        assert host.address in (tmp_path / "new_kh").read_text()
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  UserKnownHostsFile /etc/ssh/ssh_known_hosts_elsewhere\n")
    told = installed_fleetcheck(installed, tmp_path, "run", hosts, "--known-hosts",
                                boxes.known_hosts, "--ssh-config", str(config),
                                "--no-import-check", "--json", "r.json")
    assert told.returncode == 1, told.stderr
    assert told.stderr.count("fleetcheck: note: ssh_config's UserKnownHostsFile "
                             "/etc/ssh/ssh_known_hosts_elsewhere (%s) is not read: host keys "
                             "are checked against %s (--known-hosts)" % (
                                 config, boxes.known_hosts)) == 1


def test_evidence_shows_the_traced_argument_on_its_own_line(installed, tmp_path, fleet,
                                                           real_venvs):
    """The real 0.20.1 scheduler's KVCacheManager(...) call spans lines and its evidence
    elides the middle, where `use_eagle=` is: that argument is shown with its own line."""
    fleet.add("gpu-old", mounts={ENV: real_venvs["0.20.1"]})
    fleet.start()
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({"all": {"hosts": ssh_hosts(fleet, fleet.hosts, venv=ENV)}}))
    run = installed_fleetcheck(installed, tmp_path, "run", str(hosts), "--known-hosts",
                               fleet.known_hosts, "--no-integrity", "--json", "r.json")
    assert run.returncode == 1, run.stderr
    drop = next(c for c in results(tmp_path / "r.json")["gpu-old"]["checks"]
                if c["id"] == "dflash-cache-drop")
    argument = [e for e in drop["evidence"] if e.get("step") == "argument"]
    assert argument and argument[0]["text"] == "use_eagle=self.use_eagle,"
    call = next(e for e in drop["evidence"] if e.get("step") == "built")  # the call's line
    assert argument[0]["file"] == call["file"] and argument[0]["line"] > call["line"]
    assert "vllm/v1/core/sched/scheduler.py:%d: [argument] use_eagle=self.use_eagle," % (
        argument[0]["line"]) in run.stdout


def test_demo_keep_stopped_by_sigterm_leaves_no_fleet_and_no_files(installed, tmp_path):
    demo = subprocess.Popen([os.path.join(installed, "fleetcheck"), "demo", "--keep"],
                            cwd=str(tmp_path), env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ready_lines(demo)
    inventory = yaml.safe_load((tmp_path / "reports" / "demo" / "inventory.yaml").read_text())
    hosts = inventory["all"]["children"]["demo"]["hosts"]
    address = hosts["gpu-healthy"]["ansible_host"]
    workdir = os.path.dirname(os.path.dirname(hosts["gpu-healthy"]["key"]))
    assert banner_ready(address, 22) and os.path.isdir(workdir)
    demo.send_signal(signal.SIGTERM)
    assert demo.wait(timeout=60) == 0
    assert not banner_ready(address, 22) and not os.path.exists(workdir)
