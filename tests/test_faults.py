"""No single host, fleet check, output or crash costs the run its results (real sshd).

A fleetcheck bug cannot be shown by a real part on demand, so it is injected with the
test-only FLEETCHECK_INJECT_FAULT (see fleetcheck/faults.py); an output that cannot be
written and a controller killed with SIGKILL are real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET

import pytest
import yaml

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from probe_helpers import ENV, STANDIN, wait_listening
from waits import wait_for

# faults injected on purpose: their results hold internal errors (tests/internal_errors.py)
pytestmark = [pytest.mark.unit, pytest.mark.internal_errors]



def run_with_faults(tmp_path, inventory: dict, faults: str, *args: str):
    os.environ["FLEETCHECK_INJECT_FAULT"] = faults
    try:
        return run_fleetcheck(tmp_path, inventory, *args)
    finally:
        del os.environ["FLEETCHECK_INJECT_FAULT"]


def junit_hosts(path) -> dict[str, list[str]]:
    """host -> the outcome tag of each of its testcases ('' when it passed)."""
    hosts: dict[str, list[str]] = {}
    for suite in ET.parse(str(path)).getroot().iter("testsuite"):  # one per host
        for case in suite.iter("testcase"):
            tags = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            hosts.setdefault(suite.get("name"), []).append(tags[0] if tags else "")
    return hosts


def test_a_bug_in_one_hosts_handling_is_that_hosts_internal_error(tmp_path, fleet):
    env, stale = str(tmp_path / "env"), str(tmp_path / "stale")
    write_install(env, "0.33.0", FIXED)
    write_install(stale, "0.20.1", UNFIXED)
    names = ["ok-1", "bad-plan", "bad-shared", "bad-judge", "ok-2", "stale"]
    for name in names:
        fleet.add(name, mounts={ENV: stale if name == "stale" else env})
    fleet.start()
    junit = tmp_path / "out" / "junit.xml"
    run = run_with_faults(tmp_path, {"all": {"hosts": ssh_hosts(fleet, fleet.hosts, venv=ENV)}},
                          "plan:bad-plan,shared:bad-shared,judge:bad-judge",
                          "--known-hosts", fleet.known_hosts, "--junit", str(junit))
    assert run.code == 1, run.stderr  # a check failed elsewhere (stale); else it would be 3
    assert run.results["complete"] is True
    assert run.host("stale")["status"] == "fail"
    where = {"bad-plan": " probe_target)", "bad-shared": " asked)", "bad-judge": " probe_target)"}
    for name in names:
        host = run.host(name)
        assert name in run.html
        if name == "stale":
            continue
        if name.startswith("ok"):
            assert host["status"] == "pass", host
            continue
        assert host["status"] == "error"
        if name == "bad-shared":
            # the bug in answering its question is recorded, and the host analyses alone
            assert host["error"] is None and len(host["internal_errors"]) == 1
            error = host["internal_errors"][0]
            assert [c["status"] for c in host["checks"][:3]] == ["pass"] * 3
            assert not any(c["message"].startswith("not run") for c in host["checks"])
        else:
            error = host["error"]
            assert all(c["status"] == "skip" for c in host["checks"])
        assert error["kind"] == "internal"
        assert "InjectedFault: fault injected at stage %s for host %s" % (
            name[4:], name) in error["message"]
        assert "(at fleetcheck/runner.py:" in error["message"]
        assert where[name] in error["message"]
        assert "please report it" in error["message"]
    outcomes = junit_hosts(junit)
    assert set(outcomes) == set(names)
    assert outcomes["bad-shared"].count("error") == 1  # its fleetcheck-internal testcase
    assert all(tag in ("", "skipped") for tag in outcomes["ok-1"])  # install-running: no server
    assert all(tag == "error" for tag in outcomes["bad-judge"])
    assert "internal" in run.stdout  # the terminal recap names the kind


def test_a_bug_in_the_controllers_shared_analysis_is_an_internal_error_beside_verdicts(
        tmp_path, fleet):
    """The controller's analysis of a lead's shipment raising is never silence: the
    lead keeps the verdicts of its own analysis with the bug beside them (status error,
    exit 3), and the build's other host analyses its own files and says why."""
    env = str(tmp_path / "env")
    write_install(env, "0.33.0", FIXED)
    names = ["share-1", "share-2"]
    for name in names:
        fleet.add(name, mounts={ENV: env})
    fleet.start()
    junit = tmp_path / "out" / "junit.xml"
    # whichever host leads the build trips the fault (the other never ships bytes)
    run = run_with_faults(tmp_path, {"all": {"hosts": ssh_hosts(fleet, fleet.hosts, venv=ENV)}},
                          ",".join("shared-analysis:%s" % n for n in names),
                          "--known-hosts", fleet.known_hosts, "--junit", str(junit), "-j", "1")
    assert run.code == 3, run.stderr
    lead, other = sorted((run.host(n) for n in names), key=lambda h: not h["internal_errors"])
    assert len(lead["internal_errors"]) == 1 and other["internal_errors"] == []
    bug = lead["internal_errors"][0]
    assert bug["kind"] == "internal"
    assert "fault injected at stage shared-analysis for host %s" % lead["name"] in bug["message"]
    assert "(at fleetcheck/shared_analysis.py:" in bug["message"]
    for host in (lead, other):
        assert host["error"] is None
        assert [c["status"] for c in host["checks"][:3]] == ["pass"] * 3
    assert lead["status"] == "error" and other["status"] == "pass"
    assert "not shared: internal error on the controller" in lead["analysis"]
    assert other["analysis"].startswith("fix analysis run on this host: its build's analysis "
                                        "could not be shared (internal error")
    assert "fleetcheck errors beside the verdicts" in run.stdout
    assert bug["message"][:60] in run.html
    assert junit_hosts(junit)[lead["name"]].count("error") == 1


def test_fleet_check_and_renderer_failures_leave_every_other_output(tmp_path, fleet):
    env = str(tmp_path / "env")
    write_install(env, "0.33.0", FIXED)
    hosts = [fleet.add(name, mounts={ENV: env}) for name in ("measured-1", "measured-2")]
    fleet.start()
    servers = [fleet.spawn_on(host, "exec %s %s --bind %s --port 8000 --scenario healthy "
                              "--state %s" % (sys.executable, STANDIN, host.address,
                                              tmp_path / ("%s.state" % host.name)))
               for host in hosts]
    try:
        for host in hosts:
            wait_listening(host.address, 8000)
        inventory = ssh_hosts(fleet, hosts, venv=ENV)
        for host in hosts:
            inventory[host.name]["vllm_url"] = "http://%s:8000" % host.address
            inventory[host.name]["smoke"] = {"requests": 2, "max_tokens": 16}
        blocker = tmp_path / "not-a-directory"
        blocker.write_text("")
        junit = tmp_path / "out" / "junit.xml"
        run = run_with_faults(tmp_path, {"all": {"hosts": inventory}}, "smoke-fleet:measured-1",
                              "--known-hosts", fleet.known_hosts, "--smoke", "--no-import-check",
                              "--junit", str(junit), "--html", str(blocker / "report.html"))
    finally:
        for server in servers:
            server.kill()
    assert run.code == 3, run.stderr
    # the HTML could not be written (a real fault: its directory is a file); JSON and JUnit were
    assert "fleetcheck: error: %s: the HTML report could not be written" % (
        blocker / "report.html") in run.stderr
    assert "FileExistsError" in run.stderr or "NotADirectoryError" in run.stderr
    assert run.results["complete"] is True
    broken = next(c for c in run.host("measured-1")["checks"] if c["id"] == "smoke-fleet")
    assert broken["status"] == "error" and "internal error while comparing" in broken["message"]
    assert run.host("measured-1")["status"] == "error"
    assert run.host("measured-1")["error"] is None  # its own checks stand
    # judged on its own numbers (two requests: too few to decide, so inconclusive)
    own = run.check("measured-1", "smoke-acceptance")
    assert own["status"] == "warn" and "inconclusive: 2 requests" in own["message"], own
    # two hosts measured: too few for a fleet median, so the fleet comparison is a skip
    assert run.check("measured-2", "smoke-fleet")["status"] == "skip"
    assert set(junit_hosts(junit)) == {"measured-1", "measured-2"}


def test_report_names_a_renderer_that_failed_and_writes_the_rest(tmp_path):
    from results_factory import make_run
    from fleetcheck.results import dump_json
    results = tmp_path / "results.json"
    dump_json(make_run(5, hostile=False), str(results))
    env = dict(os.environ, FLEETCHECK_INJECT_FAULT="html:gpu002.dc3")
    proc = subprocess.run([sys.executable, "-m", "fleetcheck", "report", str(results), "--html",
                           str(tmp_path / "r.html"), "--junit", str(tmp_path / "r.xml")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1  # a check failed in the results; the HTML failure is named
    assert "fleetcheck: error: %s: the HTML report could not be written" % (
        tmp_path / "r.html") in proc.stderr
    assert "InjectedFault" in proc.stderr and "fleetcheck/report/html.py" in proc.stderr
    assert not (tmp_path / "r.html").exists()
    assert len(junit_hosts(tmp_path / "r.xml")) == 5


def test_an_internal_error_names_the_innermost_fleetcheck_frame():
    from fleetcheck.checks.acceptance import percentile
    from fleetcheck.faults import internal_error
    try:
        percentile([1.0, None], 0.5)  # a shape no decoded answer can have: a bug
    except TypeError as exc:
        error = internal_error(exc, "checking this host")
    assert error.kind == "internal"
    assert "TypeError: " in error.message
    assert "(at fleetcheck/checks/acceptance.py:" in error.message
    assert " percentile)" in error.message and "please report it" in error.message


def test_the_hook_is_inert_unless_it_names_a_stage_and_a_host():
    code = ("import fleetcheck.faults as f\n"
            "for stage in f.STAGES: f.inject(stage, 'gpu1')\n"
            "print('inert')\n")
    for value in ("", "judge", "judge:", "gpu1", "nonsense:gpu1", "judge:gpu2"):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=dict(os.environ, FLEETCHECK_INJECT_FAULT=value))
        assert proc.stdout.strip() == "inert", (value, proc.stderr)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, FLEETCHECK_INJECT_FAULT="judge:gpu1"))
    assert "InjectedFault" in proc.stderr


# kill -9 of the controller --------------------------------------------------------------

KILL_HOSTS = 20


@pytest.fixture(scope="module")
def twenty(tmp_path_factory, fleet_factory):
    tmp = tmp_path_factory.mktemp("kill")
    fixed, stale = str(tmp / "fixed"), str(tmp / "stale")
    write_install(fixed, "0.33.0", FIXED)
    write_install(stale, "0.20.1", UNFIXED)
    fleet = fleet_factory(str(tmp / "fleet"))
    for i in range(KILL_HOSTS):
        fleet.add("gpu%02d" % i, mounts={ENV: stale if i % 7 == 3 else fixed})
    fleet.start()
    inventory = tmp / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(
        {"all": {"hosts": ssh_hosts(fleet, fleet.hosts, venv=ENV)}}, sort_keys=False))
    try:
        yield fleet, inventory
    finally:
        fleet.stop()


def hosts_written(out) -> int | None:
    """How many hosts the results file holds a result for (None while there is none)."""
    try:
        partial = json.loads(out.read_text())
    except (OSError, ValueError):
        return None
    return len(partial["hosts"]) - len(partial["not_finished"])


def run_and_kill(tmp_path, fleet, inventory, after_done: int | None) -> tuple[list[str], str]:
    """Start a run and SIGKILL the controller once the results file holds `after_done`
    hosts' results (None: as soon as it exists). Returns the hosts the progress reported
    done by then."""
    out = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, "-m", "fleetcheck", "run", str(inventory),
                             "--known-hosts", fleet.known_hosts, "--json", str(out),
                             "--html", str(tmp_path / "report.html"), "-j", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path))
    reported: list[str] = []
    lines = []

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("[") and "] " in line:
                reported.append(line.split("] ", 1)[1].split()[0])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    def due() -> bool:  # asked often: the kill should land mid-run, not after it
        if proc.poll() is not None:
            return True
        written = hosts_written(out)
        return written is not None and (after_done is None or written >= after_done)
    wait_for(due, 120, "the results file holding %s hosts" % after_done, interval=0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(timeout=10)
    return list(reported), "".join(lines)


@pytest.mark.parametrize("after_done", [None, 1, 7, 14, KILL_HOSTS])
def test_kill_9_leaves_a_readable_results_file(tmp_path, twenty, after_done):
    fleet, inventory = twenty
    reported, stderr = run_and_kill(tmp_path, fleet, inventory, after_done)
    results = json.loads((tmp_path / "results.json").read_text())  # valid JSON, whole
    # the file only grows: what it held when the kill was sent, it holds after
    assert after_done is None or hosts_written(tmp_path / "results.json") >= after_done, stderr
    names = [h["name"] for h in results["hosts"]]
    assert names == ["gpu%02d" % i for i in range(KILL_HOSTS)]  # every host, in order
    by_name = {h["name"]: h for h in results["hosts"]}
    # every host the progress reported done is in the file with its own result
    for name in reported:
        assert name not in results["not_finished"]
        assert by_name[name]["status"] == ("fail" if int(name[3:]) % 7 == 3 else "pass")
    if not results["complete"]:
        for name in results["not_finished"]:
            assert (by_name[name]["error"] or {}).get("kind") == "interrupted"
    else:  # the kill landed after the final write (progress lines can lag the run)
        assert results["not_finished"] == []
        for name in names:
            assert by_name[name]["status"] == ("fail" if int(name[3:]) % 7 == 3 else "pass")
    report = subprocess.run([sys.executable, "-m", "fleetcheck", "report",
                             str(tmp_path / "results.json"), "--html", str(tmp_path / "r.html")],
                            capture_output=True, text=True, timeout=120)
    html = (tmp_path / "r.html").read_text()
    failed = any(h["status"] == "fail" for h in results["hosts"])
    if results["complete"]:
        assert report.returncode == 1
    else:
        assert report.returncode == (1 if failed else 3), report.stderr
        assert "RUN INCOMPLETE" in html and "incomplete" in report.stderr
    for name in names:
        assert name in html
