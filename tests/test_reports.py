"""Reports as people and CI read them: HTML in real headless Chromium (Debian's), JUnit,
`report` (re-render, merge), `diff`, and Ctrl-C leaving complete-but-marked outputs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.results import Evidence, dump_json, load_json
from fleetcheck.text import xml_safe
from fleetcheck.lab.synthetic import FIXED, UNFIXED, write_install
from results_factory import (HOSTILE_MESSAGE, HOSTILE_PATH, HOSTILE_SERVED, HOSTILE_VERSION,
                             make_run)
from probe_helpers import ENV
from waits import wait_for

pytestmark = pytest.mark.unit

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def fleetcheck(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetcheck", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def browser():
    """Imported here: the tests that need no browser run where playwright is not installed."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                              args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def rendered(tmp_path, hosts: int) -> str:
    results = tmp_path / "results.json"
    dump_json(make_run(hosts), str(results))
    proc = fleetcheck("report", str(results), "--html", str(tmp_path / "report.html"),
                      cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr  # the fleet has failing hosts
    return str(tmp_path / "report.html")


def open_page(browser, path: str):
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto("file://" + path)
    return page, requests


def visible_rows(page) -> int:
    return page.eval_on_selector_all("#matrix tbody tr", "rs => rs.filter(r => !r.hidden).length")


@pytest.mark.parametrize("hosts", [12, 500])
def test_every_host_in_the_dom_filters_work_nothing_leaves_the_file(tmp_path, browser, hosts):
    path = rendered(tmp_path, hosts)
    size = os.path.getsize(path)
    assert size < 6 * 2**20, size  # a few MB at 500 hosts
    run = load_json(str(tmp_path / "results.json"))
    page, requests = open_page(browser, path)
    names = page.eval_on_selector_all("#matrix tbody tr td:first-child", "t => t.map(e => e.textContent)")
    assert sorted(names) == sorted(h.name for h in run.hosts)
    # opened on the hosts that need action; "all" shows every one
    assert visible_rows(page) == sum(h.status not in ("pass", "warn") for h in run.hosts) > 0
    page.select_option("#f-status", "")
    assert visible_rows(page) == hosts
    failing = sum(h.status == "fail" for h in run.hosts)
    page.select_option("#f-status", "fail")
    assert visible_rows(page) == failing > 0
    page.select_option("#f-status", "")
    page.select_option("#f-group", "canary")
    assert visible_rows(page) == sum("canary" in h.groups for h in run.hosts)
    page.select_option("#f-group", "")
    page.fill("#f-text", "gpu007")
    assert visible_rows(page) == 1
    page.goto("file://" + path + "#status=unreachable")
    page.reload()
    assert visible_rows(page) == sum(h.status == "unreachable" for h in run.hosts)
    assert all(url.startswith("file://") for url in requests), requests
    page.close()


def test_a_200_host_report_half_failing_shows_the_failing_hosts_first(tmp_path, browser):
    """Without scrolling, on an ordinary laptop screen: the matrix opens on the hosts that
    need action, worst first; every build says its verdict; an unreachable host's checks
    read 'not run', not skip, and its details say it once."""
    results = tmp_path / "results.json"
    run = make_run(200, hostile=False, broken_every=2)
    dump_json(run, str(results))
    proc = fleetcheck("report", str(results), "--html", str(tmp_path / "report.html"),
                      cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    failing = {h.name for h in run.hosts if h.status == "fail"}
    action = {h.name for h in run.hosts if h.status not in ("pass", "warn")}
    assert len(failing) >= 90
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto("file://" + str(tmp_path / "report.html"))
    rows = page.eval_on_selector_all(
        "#matrix tbody tr", "rs => rs.filter(r => !r.hidden).map(r => [r.cells[0].textContent, "
        "r.getBoundingClientRect().top, r.getBoundingClientRect().bottom])")
    assert {name for name, _, _ in rows} == action
    on_screen = [name for name, top, bottom in rows if bottom <= 800]
    assert len(on_screen) >= 10 and set(on_screen) <= failing  # worst first: fail
    page.screenshot(path=str(tmp_path / "report-200.png"))
    verdicts = page.eval_on_selector_all("#builds td.build-verdict", "t => t.map(e => e.innerText)")
    builds = {(h.vllm.version, h.vllm.commit) for h in run.hosts if h.vllm}
    assert len(verdicts) == len(builds) and all(v.split()[1] in ("pass", "fail") for v in verdicts)
    assert any(v.startswith("✗ fail") for v in verdicts) and any(v.startswith("✓ pass")
                                                                  for v in verdicts)
    down = next(h for h in run.hosts if h.status == "unreachable")
    cells = page.eval_on_selector_all(
        "#matrix tbody tr", "(rs, name) => rs.find(r => r.cells[0].textContent === name)"
        ".querySelectorAll('td.s-notrun').length", down.name)
    assert cells == len(down.checks)
    details = page.inner_text("#host-%d" % (run.hosts.index(down) + 1))
    assert details.count("not run") == 0 and "None of its 9 checks ran" in details
    page.close()
    summary = load_json(str(results)).summary()
    assert summary["checks"]["dflash-swa"]["not_run"] == sum(h.status == "unreachable"
                                                             for h in run.hosts)


def test_hostile_strings_from_hosts_come_out_escaped(tmp_path, browser):
    path = rendered(tmp_path, 12)
    page, requests = open_page(browser, path)
    assert page.evaluate("window.pwned") is None
    assert page.locator("img").count() == 0 and page.locator("iframe").count() == 0
    assert page.locator("script").count() == 1  # fleetcheck's own
    text = page.text_content("body")  # closed <details> included
    assert HOSTILE_VERSION in text and HOSTILE_PATH in text and HOSTILE_MESSAGE in text
    assert HOSTILE_SERVED in page.text_content("#served")  # the served panel, as text
    assert all(url.startswith("file://") for url in requests)
    page.close()


LONG_CODE = ('return tuple(sorted(int(layer_id) + 1 for layer_id in dflash_config.get('
             '"target_layer_ids") or default_target_layer_ids(config.num_hidden_layers, '
             'speculative_config.num_speculative_tokens)))')
WORD = re.compile(r"\w")


def line_breaks(page, selector: str) -> list[tuple[str, str]]:
    """Each place where a line of the elements' text wraps: (the character before, the
    one after), read from where the browser laid out every character."""
    rows = page.eval_on_selector_all(selector, """els => els.map(el => {
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        const chars = [];
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let i = 0; i < node.data.length; i++) {
                const range = document.createRange();
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                const rect = range.getClientRects()[0];
                if (rect) chars.push([node.data[i], rect.top]);
            }
        }
        return chars;
    })""")
    return [(chars[i - 1][0], chars[i][0]) for chars in rows for i in range(1, len(chars))
            if chars[i][1] > chars[i - 1][1] + 2]


def test_code_in_the_evidence_wraps_between_tokens_never_inside_a_word(tmp_path, browser):
    run = make_run(3, hostile=False, broken_every=3)
    host = run.hosts[1]
    check = replace(host.checks[0], evidence=[
        Evidence("vllm/model_executor/models/qwen3_dflash_speculative_decoding.py", 412,
                 LONG_CODE, step="return")])
    run = replace(run, hosts=[run.hosts[0], replace(host, checks=(check, *host.checks[1:])),
                              run.hosts[2]])
    dump_json(run, str(tmp_path / "results.json"))
    proc = fleetcheck("report", str(tmp_path / "results.json"), "--html",
                      str(tmp_path / "report.html"), cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    page = browser.new_page(viewport={"width": 700, "height": 900})
    page.goto("file://" + str(tmp_path / "report.html"))
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    evidence = "#host-2 div.ev"
    assert LONG_CODE in page.inner_text(evidence)  # the text is whole, markers aside
    breaks = line_breaks(page, evidence)
    assert len(breaks) >= 2, breaks  # it does wrap, at this width
    inside_words = [pair for pair in breaks if WORD.match(pair[0]) and WORD.match(pair[1])]
    assert inside_words == [], breaks
    page.close()


def test_report_without_javascript_is_a_plain_complete_table(tmp_path, browser):
    path = rendered(tmp_path, 12)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto("file://" + path)
    assert page.locator("#controls").is_hidden()
    assert page.locator("#matrix tbody tr:visible").count() == 12
    context.close()


def test_screenshot_of_a_real_demo_report_is_readable(tmp_path, browser):
    proc = fleetcheck("demo", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    page.goto("file://" + str(tmp_path / "reports" / "demo" / "report.html"))
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    assert "Fleet NOT READY" in page.inner_text(".verdict")
    assert page.locator("#state-bar rect").count() == 3
    page.close()


def test_junit_has_one_testsuite_per_host_and_one_testcase_per_check(tmp_path):
    results = tmp_path / "results.json"
    run = make_run(30)
    dump_json(run, str(results))
    junit = tmp_path / "junit.xml"
    proc = fleetcheck("report", str(results), "--junit", str(junit), cwd=str(tmp_path))
    assert proc.returncode == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [xml_safe(h.name) for h in run.hosts]
    for suite, host in zip(suites, run.hosts):
        assert len(suite.findall("testcase")) == len(host.checks) + len(host.internal_errors)
    cases = [case for suite in suites for case in suite.findall("testcase")]
    assert len(cases) == sum(len(h.checks) for h in run.hosts)
    for case in cases:
        assert set(case.attrib) >= {"classname", "name", "time"}
        float(case.get("time"))
        children = [c.tag for c in case]
        assert len([t for t in children if t in ("failure", "error", "skipped")]) <= 1
    counted = {tag: sum(1 for c in cases if c.find(tag) is not None)
               for tag in ("failure", "error", "skipped")}
    assert int(root.get("tests")) == len(cases)
    assert int(root.get("failures")) == counted["failure"] == sum(
        c.status == "fail" for h in run.hosts if not h.error for c in h.checks)
    assert int(root.get("errors")) == counted["error"] == sum(
        len(h.checks) for h in run.hosts if h.error)
    assert int(root.get("skipped")) == counted["skipped"]
    for suite in suites:
        assert int(suite.get("tests")) == len(suite.findall("testcase"))
        assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
    failure = next(c for c in cases if c.find("failure") is not None)
    assert failure.find("failure").get("message")
    assert "gpu_model_runner.py:" in failure.find("failure").text


def test_report_merges_runs_from_several_controllers(tmp_path):
    a, b = make_run(10, hostile=False), make_run(20, hostile=False)
    b = replace(b, hosts=b.hosts[10:])
    dump_json(a, str(tmp_path / "a.json"))
    dump_json(b, str(tmp_path / "b.json"))
    proc = fleetcheck("report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json",
                      str(tmp_path / "merged.json"), cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert [h["name"] for h in merged["hosts"]] == [h.name for h in a.hosts + b.hosts]
    assert merged["summary"]["hosts"] == 20


def test_diff_on_a_host_that_changed_its_install(tmp_path, fleet):
    good, bad = str(tmp_path / "good"), str(tmp_path / "bad")
    write_install(good, "0.33.0", FIXED, commit="g4ba787ec9")
    write_install(bad, "0.20.1", UNFIXED, commit="g132765e35")
    stable = fleet.add("stable", mounts={ENV: good})
    moving = fleet.add("moving", mounts={ENV: good})
    leaving = fleet.add("leaving", mounts={ENV: good})
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV},
                         "hosts": ssh_hosts(fleet, [stable, moving, leaving])}}
    first = run_fleetcheck(tmp_path / "1", inventory, "--known-hosts", fleet.known_hosts) \
        if (tmp_path / "1").mkdir() is None else None
    fleet.stop()
    moving.mounts[ENV] = bad  # the host is re-installed with an old build
    fleet.start()
    fleet.kill(leaving)  # and another goes down
    (tmp_path / "2").mkdir()
    second = run_fleetcheck(tmp_path / "2", inventory, "--known-hosts", fleet.known_hosts)
    assert first.code == 0 and second.code == 1
    old, new = tmp_path / "1" / "out" / "results.json", tmp_path / "2" / "out" / "results.json"
    text = fleetcheck("diff", str(old), str(new), cwd=str(tmp_path))
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert "moving  WORSE" in lines and "leaving  WORSE" in lines
    assert "  version: 0.33.0 -> 0.20.1" in lines
    assert "  commit: 4ba787ec9 -> 132765e35" in lines
    # the three fix checks changed the same way: one line, then why each failed
    fixes = lines.index("  checks dflash-layer-offset, dflash-swa, dflash-cache-drop: pass -> "
                        "fail  (worse)")
    new_messages = {c["id"]: c["message"] for c in second.host("moving")["checks"]}
    assert lines[fixes + 1] == "      dflash-layer-offset: " + new_messages["dflash-layer-offset"]
    assert "Fixed in 0.22.0 (vLLM PR #40727)." in lines[fixes + 1]
    assert lines[fixes + 3].startswith("      dflash-cache-drop: ")
    # the host that went down: its error once, its checks not run on one line
    down = lines.index("leaving  WORSE")
    assert lines[down + 1] == "  status: pass -> unreachable  (worse)"
    assert lines[down + 2].startswith("      unreachable: ") and "refused" in lines[down + 2]
    assert lines[down + 3].startswith("  checks dflash-layer-offset, dflash-swa, ")
    assert lines[down + 3].endswith(": pass -> not run")
    assert "stable" not in text.stdout.split("verdict")[0]
    usage = fleetcheck("diff", "--help", cwd=str(tmp_path)).stdout
    assert "results JSON of the earlier run" in usage and "Exit 1 when anything got worse" in usage
    machine = json.loads(fleetcheck("diff", str(old), str(new), "--json", cwd=str(tmp_path)).stdout)
    assert machine["worse"] is True
    assert [h["name"] for h in machine["hosts"]] == ["moving", "leaving"]
    back = fleetcheck("diff", str(new), str(old), cwd=str(tmp_path))
    assert back.returncode == 0 and "verdict: not worse" in back.stdout


def test_ctrl_c_writes_incomplete_outputs_and_exits_130(tmp_path, fleet):
    env = str(tmp_path / "env")
    write_install(env, "0.33.0", FIXED)
    quick = fleet.add("quick", mounts={ENV: env})
    stuck = [fleet.add("stuck-%d" % i, sshd_options={"ForceCommand": "sleep 3600"})
             for i in range(2)]
    fleet.start()
    inventory = tmp_path / "inv.yaml"
    import yaml
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(
        fleet, [quick] + stuck)}}, sort_keys=False))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "fleetcheck", "run", str(inventory),
                             "--known-hosts", fleet.known_hosts, "--timeout", "600",
                             "--json", str(out / "r.json"), "--html", str(out / "r.html")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a shell's background job inherits SIGINT ignored (as CI
                            # launched from a script may be); Ctrl-C in a terminal is not
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def quick_host_done() -> dict | None:  # the incremental JSON shows the quick host done
        try:
            partial = json.loads((out / "r.json").read_text())
            return partial if partial["hosts"][0]["status"] == "pass" else None
        except (OSError, ValueError, KeyError, IndexError):
            return None
    partial = wait_for(quick_host_done, 60, "the quick host's result written to r.json",
                       interval=0.2)
    assert partial["complete"] is False and partial["not_finished"] == ["stuck-0", "stuck-1"]
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    results = json.loads((out / "r.json").read_text())
    assert results["complete"] is False
    assert results["not_finished"] == ["stuck-0", "stuck-1"]
    assert [h["status"] for h in results["hosts"]] == ["pass", "error", "error"]
    assert results["hosts"][1]["error"]["kind"] == "interrupted"
    html = (out / "r.html").read_text()
    assert "RUN INCOMPLETE" in html and "stuck-0, stuck-1" in html


def test_terminal_evidence_names_hosts_with_the_same_finding_once(tmp_path):
    """Hosts of one bad build share one evidence entry that names them; a host whose
    finding differs (another line) keeps an entry of its own; nothing is dropped."""
    import io

    from fleetcheck.report.terminal import Progress, render_summary
    from fleetcheck.results import Evidence

    run = make_run(100, hostile=False)
    failing = [i for i, h in enumerate(run.hosts) if h.checks[0].status == "fail"]
    assert len(failing) >= 8
    same = Evidence("vllm/v1/worker/gpu_model_runner.py", 4965, "layer_ids = x")
    hosts = list(run.hosts)
    for i in failing:
        found = same if i != failing[-1] else Evidence(same.file, 4999, same.text)
        hosts[i] = replace(hosts[i], checks=(replace(hosts[i].checks[0], evidence=[found],
                                                     message="one layer off"),
                                             *hosts[i].checks[1:]))
    run = replace(run, hosts=hosts)
    broken = [run.hosts[i] for i in failing]
    out = io.StringIO()
    render_summary(run, stream=out)
    text = out.getvalue()
    entries = [line for line in text.splitlines() if " dflash-layer-offset fail: " in line]
    assert len(entries) == 2, text
    group = len(broken) - 1
    named = ", ".join(h.name for h in broken[:5])
    assert entries[0].startswith("  " + named + " and %d more (%d hosts)" % (group - 5, group))
    assert entries[1].startswith("  %s dflash-layer-offset" % broken[-1].name)
    assert text.count("gpu_model_runner.py:4965: layer_ids = x") == 1
    assert text.count("gpu_model_runner.py:4999: layer_ids = x") == 1

    stream = io.StringIO()  # not a terminal: one plain line per finished host
    progress = Progress(2, stream)
    progress.finished(run.hosts[0])
    progress.finished(run.hosts[7])
    lines = stream.getvalue().splitlines()
    # a checked host's status can still change (fleet checks, waivers): only the table says it
    assert lines[0] == "[1/2] %s checked" % run.hosts[0].name
    assert lines[1].startswith("[2/2] %s unreachable: " % run.hosts[7].name)
    assert "unreachable: unreachable" not in lines[1]
    # and once more at the end of the summary, for a judge run that prints no progress
    unreachable = [h for h in run.hosts if h.error is not None]
    assert unreachable and "Hosts without verdicts:" in text
    for host in unreachable[:20]:
        assert "  %s (unreachable): %s" % (host.name, host.error.message) in text


def test_one_finding_under_every_check_of_a_host_is_said_once():
    """A host with no install has every check say so: one entry, not one per check;
    checks of a host that differ keep their own entries."""
    import io

    from fleetcheck.report.terminal import render_summary

    run = make_run(3, hostile=False)
    bare, partly = run.hosts[0], run.hosts[1]
    bare = replace(bare, status="error", checks=[
        replace(c, status="error", message="no vllm install found", evidence=())
        for c in bare.checks])
    partly = replace(partly, status="error", checks=[
        replace(c, status="error", message="cannot read it", evidence=())
        for c in partly.checks[:2]] + list(partly.checks[2:]))
    run = replace(run, hosts=(bare, partly, *run.hosts[2:]))
    out = io.StringIO()
    render_summary(run, stream=out)
    text = out.getvalue()
    assert text.count("no vllm install found") == 1, text
    assert "  %s every check error: no vllm install found" % bare.name in text
    assert "  %s %s, %s error: cannot read it" % (partly.name, partly.checks[0].id,
                                                   partly.checks[1].id) in text
    assert "error: every check (1): %s" % bare.name in text


def test_a_host_with_no_install_and_an_expected_build_reads_as_what_it_is():
    """No install (every fleetcheck check: error) and an expected build (fail): the recap
    names the failure first and the rest as 'every check but', never one kind for both."""
    import io

    from fleetcheck.report.terminal import render_summary
    from fleetcheck.results import CheckResult, Evidence

    run = make_run(2, hostile=False)
    bare = run.hosts[0]
    bare = replace(bare, status="fail", checks=[
        replace(c, status="error", message="no vllm install found", evidence=())
        for c in bare.checks] + [CheckResult("build-expected", "Expected build", "fail",
                                             "expected ==0.33.0, found no install",
                                             [Evidence(None, None,
                                                       "version: expected ==0.33.0")])])
    other = run.hosts[1]
    run = replace(run, hosts=[bare, replace(other, checks=(*other.checks, CheckResult(
        "build-expected", "Expected build", "pass", "ok")))])
    out = io.StringIO()
    render_summary(run, stream=out)
    text = out.getvalue()
    assert "fail: build-expected; error: every check but build-expected (1): %s" % bare.name \
        in text, text
    assert "  %s every check but build-expected error: no vllm install found" % bare.name in text
    assert "\n      version: expected ==0.33.0\n" in text  # no file: no ': ' before it


def test_html_never_prints_none_for_what_a_host_did_not_have(tmp_path):
    """A host with no install knows no version, commit or site-packages: the report says
    so in words and prints no 'None' anywhere."""
    from fleetcheck.report.html import render_html
    from fleetcheck.results import VllmInfo

    run = make_run(3, hostile=False)
    run = replace(run, hosts=(replace(run.hosts[0], vllm=VllmInfo(python="/opt/env/bin/python")),
                              *run.hosts[1:]))
    path = tmp_path / "report.html"
    render_html(run, str(path))
    html = path.read_text()
    assert "None" not in html
    assert "no vLLM version found, no commit recorded" in html and "no vllm install found" in html


def test_a_terminal_shows_a_progress_bar_with_elapsed_and_left():
    import io

    from rich.console import Console
    from fleetcheck.report.terminal import Progress
    run = make_run(3, hostile=False)
    stream = io.StringIO()
    progress = Progress(3, stream)
    progress.console, progress.live = Console(file=stream, force_terminal=True, width=140), True
    with progress:
        progress.started(run.hosts[0])
        progress.finished(run.hosts[0])
    drawn = stream.getvalue()
    assert "━" in drawn and "1/3" in drawn and "running 0" in drawn
    assert "0:00:0" in drawn and " left " in drawn  # elapsed, and the estimate of what is left


def test_a_wide_matrix_names_the_failing_checks_first_and_keeps_the_host_column_in_view(
        tmp_path, browser):
    """A --smoke run's matrix at 1400 px: the checks that fail are named above it, host
    names never wrap, and scrolled all the way right the host column is still in view."""
    results = tmp_path / "results.json"
    run = make_run(30, hostile=False, broken_every=3)
    long_name = "gpu-%s.dc1.example.com" % ("x" * 60)  # wider than 1400 px with the checks
    first_failing = next(i for i, h in enumerate(run.hosts) if h.status == "fail")
    hosts = list(run.hosts)
    hosts[first_failing] = replace(hosts[first_failing], name=long_name)
    run = replace(run, hosts=hosts)
    dump_json(run, str(results))
    fleetcheck("report", str(results), "--html", str(tmp_path / "report.html"),
               cwd=str(tmp_path))
    failing = sorted({c.id for h in run.hosts for c in h.checks if c.status in ("fail",
                                                                               "error")})
    assert failing
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto("file://" + str(tmp_path / "report.html"))
    said = page.inner_text("#failing")
    assert said.startswith("Failing: ") and all(cid in said for cid in failing), said
    assert page.eval_on_selector("#failing", "e => e.getBoundingClientRect().bottom") < 900
    scrolled = page.eval_on_selector(".matrix-wrap", "w => { w.scrollLeft = w.scrollWidth; "
                                     "return w.scrollLeft; }")
    assert scrolled > 0  # the matrix is wider than the screen: it scrolls, not the page
    page.screenshot(path=str(tmp_path / "matrix-1400.png"), full_page=False)
    cell = page.eval_on_selector_all(
        "#matrix tbody tr", "(rs, name) => { const c = rs.find(r => r.cells[0].textContent"
        " === name).cells[0]; const b = c.getBoundingClientRect(); const s = getComputedStyle(c);"
        " return [b.left, b.height, parseFloat(s.lineHeight) || 16]; }", long_name)
    left, height, line = cell
    assert 0 <= left < 40, cell  # still at the left edge after scrolling right
    assert 0 < height < 2 * line + 8, cell  # shown, on one line: the name does not wrap
    page.close()


def test_verbose_prints_every_skips_reason():
    import io
    from fleetcheck.report.terminal import render_summary
    from fleetcheck.status import Status
    run = make_run(3, hostile=False)
    first = run.hosts[0]
    skipped = replace(first.checks[0], status=Status.SKIP, message="no DFlash path in this build")
    run = replace(run, hosts=[replace(first, checks=(skipped, *first.checks[1:]))]
                  + list(run.hosts[1:]))
    quiet, loud = io.StringIO(), io.StringIO()
    render_summary(run, stream=quiet)
    render_summary(run, stream=loud, verbose=True)
    assert "no DFlash path in this build" not in quiet.getvalue()
    assert "no DFlash path in this build" in " ".join(loud.getvalue().split())


def jenkins_class(classname: str) -> tuple[str, str]:
    """(package, class) as Jenkins' JUnit plugin files a testcase: split at the last dot."""
    package, _, name = classname.rpartition(".")
    return package, name


def test_junit_read_back_as_jenkins_reads_it_names_each_host_whole(tmp_path):
    """junitparser reads the file as CI reporters do; Jenkins' split of each classname at
    its last dot leaves a class that names the host whole, so hosts of one domain are not
    filed together under `com`."""
    from junitparser import JUnitXml
    results = tmp_path / "results.json"
    run = make_run(6, hostile=False)
    names = ["gpu01.dc1.example.com", "gpu02.dc1.example.com", "gpu01.dc2.example.com"]
    run = replace(run, hosts=[replace(h, name=n) for h, n in zip(run.hosts, names)])
    dump_json(run, str(results))
    junit = tmp_path / "junit.xml"
    fleetcheck("report", str(results), "--junit", str(junit), cwd=str(tmp_path))
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [suite.name for suite in suites] == names  # one testsuite per host
    classes = {}
    for suite in suites:
        for case in suite:
            package, name = jenkins_class(case.classname)
            classes.setdefault(suite.name, set()).add((package, name))
    assert classes == {host: {("fleetcheck", host.replace(".", "_"))} for host in names}
    assert len({name for found in classes.values() for _, name in found}) == len(names)
    assert xml.tests == sum(len(h.checks) for h in run.hosts)


@pytest.mark.parametrize("command", [["diff", "--json"], ["diff"], ["report", "--json", "-"]])
def test_a_closed_stdout_is_a_quiet_exit(tmp_path, command):
    """`fleetcheck diff --json a b | head`: the reader is gone before fleetcheck writes."""
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    dump_json(make_run(40, hostile=False), str(old))
    dump_json(make_run(40, hostile=False, broken_every=2), str(new))
    read, write = os.pipe()
    os.close(read)
    try:
        files = [str(old), str(new)] if command[0] == "diff" else [str(new)]
        proc = subprocess.run([sys.executable, "-m", "fleetcheck", command[0], *files,
                               *command[1:]], stdout=write, stderr=subprocess.PIPE, text=True,
                              cwd=str(tmp_path), timeout=60,
                              env=dict(os.environ, PYTHONPATH=os.path.dirname(
                                  os.path.dirname(os.path.abspath(__file__)))))
    finally:
        os.close(write)
    # nothing said of it (`report --json -` puts its summary on stderr, as always)
    assert "Traceback" not in proc.stderr and "fleetcheck: error" not in proc.stderr, proc.stderr
    assert proc.returncode == 141  # as a program killed by SIGPIPE


def test_the_acceptance_line_says_the_checks_status_the_table_has():
    from fleetcheck.report.terminal import smoke_line
    smoke = {"acceptance_rate": 0.31, "mean_acceptance_length": 4.2, "per_position": [0.8],
             "requests": {"measured": 6}, "verdict": "inconclusive", "intervals": {}}
    line = smoke_line(smoke, "warn")
    assert line.endswith("over 6 requests: warn (inconclusive)"), line
    assert smoke_line(dict(smoke, verdict="pass"), "pass").endswith(": pass")
