"""`--patch PR.diff`: a pull request's diff checked hunk by hunk on every host. The diffs
are cut from the real differences between real vLLM release wheels (or written as the
DFlash +1 fix's pull request), checked over real sshd on real release installs and on
linked copies of them edited the way a fork or a backport edits them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.cli import main
from fleetcheck.lab.release_diffs import hunk_lines, keep_hunks, release_diff, sections, site_of
from fleetcheck.patches import parse_diff, read_patch
from fleetcheck.playbook import load_playbook
from fleetcheck.probe.patch_presence import installed_path, significant_tokens
from fleetcheck.lab.wheels import real_install
from probe_helpers import ENV, edited_copy, rewrite, site_packages

pytestmark = pytest.mark.unit

RUNNER = "vllm/v1/worker/gpu_model_runner.py"

# The DFlash target-layer +1 fix as its pull request's diff shows it (the runner's hunk,
# a test and a CUDA source the wheel does not ship as Python)
DFLASH_PR = """\
diff --git a/vllm/v1/worker/gpu_model_runner.py b/vllm/v1/worker/gpu_model_runner.py
index 5c0ffee..badcafe 100644
--- a/vllm/v1/worker/gpu_model_runner.py
+++ b/vllm/v1/worker/gpu_model_runner.py
@@ -5041,7 +5041,10 @@ class GPUModelRunner(
         layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
         if not layer_ids:
             dflash_config = getattr(hf_config, "dflash_config", None)
             if dflash_config and isinstance(dflash_config, dict):
-                layer_ids = dflash_config.get("target_layer_ids")
+                # Add 1 to convert DFlash's aux layer id semantics
+                layer_ids = [
+                    i + 1 for i in (dflash_config.get("target_layer_ids") or [])
+                ]
 
         if layer_ids and isinstance(layer_ids, (list, tuple)):
             return tuple(layer_ids)
diff --git a/tests/v1/spec_decode/test_dflash.py b/tests/v1/spec_decode/test_dflash.py
index 1234567..89abcde 100644
--- a/tests/v1/spec_decode/test_dflash.py
+++ b/tests/v1/spec_decode/test_dflash.py
@@ -10,3 +10,4 @@ def test_aux_layers():
     config = make_config()
     ids = aux_layers(config)
+    assert ids == (2, 3)
     return ids
diff --git a/csrc/attention/merge_attn_states.cu b/csrc/attention/merge_attn_states.cu
index 1111111..2222222 100644
--- a/csrc/attention/merge_attn_states.cu
+++ b/csrc/attention/merge_attn_states.cu
@@ -1,3 +1,4 @@
 #include <cuda.h>
+#include <optional>
 
 namespace vllm {
"""


# --- parsing (unit lane) ------------------------------------------------------------

def test_git_diff_becomes_files_hunks_and_signatures(tmp_path):
    path = tmp_path / "PR-40727.diff"
    path.write_text(DFLASH_PR)
    patch = read_patch(str(path))
    assert patch.id == "pr-40727"
    assert [f.path for f in patch.files] == [RUNNER, "tests/v1/spec_decode/test_dflash.py",
                                              "csrc/attention/merge_attn_states.cu"]
    runner = patch.files[0]
    assert (runner.pre, runner.post) == ("5c0ffee", "badcafe")
    (hunk,) = patch.signature()["files"][0]["hunks"]
    assert hunk["defs"] == ["GPUModelRunner"]
    (group,) = hunk["groups"]
    assert group["removed"] == ["layer_ids", "=", "dflash_config", ".", "get", "(",
                                "'target_layer_ids", ")"]
    assert group["before"][:3] == ["if", "not", "layer_ids"]  # three lines of code
    assert "+" in group["added"] and "#" not in "".join(group["added"])


def test_tokens_ignore_layout_comments_quotes_and_trailing_commas():
    black = ["x = foo(", "    'a',  # why", "    b,", ")"]
    joined = ['x = foo("a", b)']
    assert [t for t, _ in significant_tokens(black)] == \
        [t for t, _ in significant_tokens(joined)]
    assert [t for t, _ in significant_tokens(["y = 1 + 2"])] != \
        [t for t, _ in significant_tokens(["y = 1 + 3"])]


def test_repository_paths_map_into_the_install_only_through_its_packages():
    packages = ["vllm"]
    assert installed_path("vllm/v1/x.py", packages) == "vllm/v1/x.py"
    assert installed_path("src/vllm/x.py", packages) == "vllm/x.py"
    for unshipped in ("tests/vllm/x.py", "tests/v1/test_x.py", "docs/x.md",
                      ".github/workflows/ci.yml", "csrc/attention/x.cu", "setup.py"):
        assert installed_path(unshipped, packages) is None, unshipped


def test_plain_diff_u_has_no_blob_ids(tmp_path):
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text("def f():\n    return 1\n")
    new.write_text("def f():\n    return 2\n")
    proc = subprocess.run(["diff", "-u", str(old), str(new)], capture_output=True, text=True)
    (patched,), _ = parse_diff(proc.stdout, "plain.diff")
    assert patched.pre is None and patched.post is None
    assert patched.hunks[0].lines[1:] == (("-", "    return 1"), ("+", "    return 2"))


def test_format_patch_series_composes_a_partial_revert(tmp_path):
    """Commit 1 applies the +1 fix and adds a line; commit 2 takes the line back out:
    only the +1 fix is left to look for."""
    repo = tmp_path / "repo"
    (repo / "vllm").mkdir(parents=True)
    source = (repo / "vllm" / "runner.py")
    source.write_text("def aux(cfg):\n    ids = cfg.get('target_layer_ids')\n"
                      "    return tuple(ids)\n\n\ndef other():\n    return 0\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    source.write_text("def aux(cfg):\n    ids = [i + 1 for i in cfg.get('target_layer_ids')]\n"
                      "    return tuple(ids)\n\n\ndef other():\n    DEBUG = True\n    return 0\n")
    subprocess.run(git + ["commit", "-qam", "Fix the DFlash layer offset"], check=True)
    source.write_text("def aux(cfg):\n    ids = [i + 1 for i in cfg.get('target_layer_ids')]\n"
                      "    return tuple(ids)\n\n\ndef other():\n    return 0\n")
    subprocess.run(git + ["commit", "-qam", "Drop the debug flag"], check=True)
    series = subprocess.run(git + ["format-patch", "-2", "--stdout"], capture_output=True,
                            text=True, check=True).stdout
    path = tmp_path / "backport.patch"
    path.write_text(series)
    patch = read_patch(str(path))
    assert patch.commits == 2 and patch.title == "Fix the DFlash layer offset"
    (patched,) = patch.files
    changed = [line for hunk in patched.hunks for line in hunk.lines if line[0] != " "]
    assert changed == [("-", "    ids = cfg.get('target_layer_ids')"),
                       ("+", "    ids = [i + 1 for i in cfg.get('target_layer_ids')]")]


def test_a_file_that_is_not_a_diff_is_exit_2_naming_it(tmp_path, capsys):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("gpu1 ansible_host=127.0.0.1\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("this PR fixes the DFlash offset\n")
    assert main(["run", str(inventory), "--patch", str(notes)]) == 2
    err = capsys.readouterr().err
    assert str(notes) in err and "not a unified diff" in err


def test_playbook_patches_relative_to_the_playbook(tmp_path):
    (tmp_path / "prs").mkdir()
    (tmp_path / "prs" / "dflash.diff").write_text(DFLASH_PR)
    playbook = tmp_path / "pb.yaml"
    playbook.write_text("name: prs\npatches:\n  - prs/dflash.diff\n"
                        "  - {file: prs/dflash.diff, id: pr-40727, title: DFlash +1, "
                        "reference: 'vLLM PR #40727'}\n")
    loaded = load_playbook(str(playbook))
    assert [p.id for p in loaded.patches] == ["dflash", "pr-40727"]
    assert loaded.patches[1].reference == "vLLM PR #40727" and loaded.checks == []
    (tmp_path / "dup.yaml").write_text("name: d\npatches: [prs/dflash.diff, prs/dflash.diff]\n")
    with pytest.raises(Exception, match="taken already"):
        load_playbook(str(tmp_path / "dup.yaml"))


# --- real releases over sshd ----------------------------------------------------------

def first_hunk(section: str, wanted) -> int:
    for number, lines in enumerate(hunk_lines(section)):
        if wanted(lines):
            return number
    raise AssertionError("no such hunk in the release diff")


def long_lines(lines, kind: str) -> list[str]:
    return [t.strip() for k, t in lines if k == kind and len(t.strip()) >= 25 and
            not t.strip().startswith("#")]


def cut_diffs(tmp_path) -> dict[str, str]:
    """The test's diffs, cut from 0.20.1 -> 0.22.1 (and written as the DFlash PR)."""
    runner = sections(release_diff("0.20.1", "0.22.1", [RUNNER]))[RUNNER]
    newest = open(os.path.join(site_of("0.33.0"), RUNNER), encoding="utf-8").read()

    def context_code(lines) -> int:
        return sum(1 for k, t in lines if k == " " and t.strip())

    addition = first_hunk(runner, lambda ls: {k for k, _ in ls} == {" ", "+"} and
                          context_code(ls) >= 4 and len(long_lines(ls, "+")) >= 2)
    deletion = first_hunk(runner, lambda ls: {k for k, _ in ls} == {" ", "-"} and
                          context_code(ls) >= 4 and len(long_lines(ls, "-")) >= 2)
    # neither side's lines are in 0.33.0's file any more: later releases rewrote them
    rewritten = first_hunk(runner, lambda ls: long_lines(ls, "+") and long_lines(ls, "-") and
                           not any(t in newest for t in long_lines(ls, "+") +
                                   long_lines(ls, "-")))
    diffs = {"blob-exact": runner,
             "pure-addition": keep_hunks(runner, [addition], index_line=False),
             "pure-deletion": keep_hunks(runner, [deletion], index_line=False),
             "rewritten": keep_hunks(runner, [rewritten], index_line=False),
             "dflash-plus-one": DFLASH_PR}
    paths = {}
    for name, text in diffs.items():
        path = tmp_path / (name + ".diff")
        path.write_text(text)
        paths[name] = str(path)
    return paths


MOVED_HELPER = '''

def dflash_aux_layer_ids(hf_config):
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        dflash_config = getattr(hf_config, "dflash_config", None)
        if dflash_config and isinstance(dflash_config, dict):
            # Add 1 to convert DFlash's aux layer id semantics
            layer_ids = [
                i + 1 for i in (dflash_config.get("target_layer_ids") or [])
            ]

    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
'''


def edited_installs(tmp_path, real_venvs) -> dict[str, str]:
    """0.22.1 reformatted (black's line join, other quotes, a comment), and 0.22.1 with
    the fixed code moved into another module (the runner calls it there)."""
    fixed = open(os.path.join(site_packages(real_venvs["0.22.1"]), RUNNER),
                 encoding="utf-8").read()
    start = fixed.index("        layer_ids = getattr(hf_config, \"eagle_aux_hidden_state_layer_ids\"")
    end = fixed.index("            return tuple(layer_ids)\n", start) + \
        len("            return tuple(layer_ids)\n")
    block = fixed[start:end]
    reformatted = edited_copy(real_venvs["0.22.1"], str(tmp_path / "reformatted"), {RUNNER: [(
        "                layer_ids = [\n"
        "                    i + 1 for i in (dflash_config.get(\"target_layer_ids\") or [])\n"
        "                ]\n",
        "                layer_ids = [i + 1 for i in (dflash_config.get('target_layer_ids') or [])]"
        "  # +1: aux ids\n")]})
    moved = edited_copy(real_venvs["0.22.1"], str(tmp_path / "moved"), {
        RUNNER: [(block, "        layer_ids = dflash_aux_layer_ids(hf_config)\n"
                         "        if layer_ids:\n            return layer_ids\n")]})
    utils = os.path.join(site_packages(moved), "vllm/v1/worker/utils.py")
    with open(utils, "rb") as handle:
        rewrite(utils, handle.read() + MOVED_HELPER.encode("utf-8"))
    return {"reformatted": reformatted, "moved": moved}


@pytest.fixture
def patch_fleet(fleet, real_venvs, tmp_path):
    installs = {"gpu-0201": real_venvs["0.20.1"], "gpu-0221": real_install("0.22.1"),
                "gpu-0330": real_venvs["0.33.0"]}
    installs.update({"gpu-" + k: v for k, v in edited_installs(
        tmp_path, dict(real_venvs, **{"0.22.1": installs["gpu-0221"]})).items()})
    hosts = [fleet.add(name, mounts={ENV: venv}) for name, venv in installs.items()]
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, hosts)}}
    return fleet, inventory


def hunk_states(run, host: str, check_id: str) -> list[str]:
    return [h["state"] for h in run.check(host, check_id)["details"]["hunks"]]


def test_pull_request_diffs_on_real_releases(tmp_path, patch_fleet):
    fleet, inventory = patch_fleet
    diffs = cut_diffs(tmp_path)
    args = [a for name in diffs for a in ("--patch", diffs[name])]
    run = run_fleetcheck(tmp_path, inventory, "--known-hosts", fleet.known_hosts,
                         "--no-integrity", *args)
    assert run.results is not None, run.stderr
    status = {(h["name"], c["id"]): c["status"] for h in run.results["hosts"]
              for c in h["checks"]}

    # blob ids: the whole runner section of 0.20.1 -> 0.22.1 is exactly 0.22.1's file
    exact = run.check("gpu-0221", "blob-exact")
    assert exact["status"] == "pass" and exact["details"]["blob_matches"] == {RUNNER: "post"}
    old = run.check("gpu-0201", "blob-exact")
    assert old["status"] == "fail" and old["details"]["blob_matches"] == {RUNNER: "pre"}
    assert "not applied" in old["message"]

    # per hunk, without blob ids: applied on the newer release, not on the older
    for name in ("pure-addition", "pure-deletion", "rewritten"):
        assert hunk_states(run, "gpu-0221", name) == ["applied"], name
        assert hunk_states(run, "gpu-0201", name) == ["not applied"], name
        assert status[("gpu-0221", name)] == "pass" and status[("gpu-0201", name)] == "fail"
    # later releases rewrote those lines: superseded, a warning naming the hunk
    rewritten = run.check("gpu-0330", "rewritten")
    assert hunk_states(run, "gpu-0330", "rewritten") == ["superseded"]
    assert rewritten["status"] == "warn" and RUNNER + "#1" in rewritten["message"]

    # the DFlash +1 pull request: 0.20.1 lacks it, 0.22.1 and 0.33.0 have it (0.33.0's
    # context was rewritten around it), whatever the version says
    dflash = {h: run.check(h, "dflash-plus-one") for h in
              ("gpu-0201", "gpu-0221", "gpu-0330", "gpu-reformatted", "gpu-moved")}
    assert dflash["gpu-0201"]["status"] == "fail"
    assert "not applied" in dflash["gpu-0201"]["message"]
    assert "0.20.1 at commit 132765e35" in dflash["gpu-0201"]["message"]
    assert any('dflash_config.get("target_layer_ids")' in e["text"]
               for e in dflash["gpu-0201"]["evidence"])
    for host in ("gpu-0221", "gpu-0330", "gpu-reformatted", "gpu-moved"):
        assert dflash[host]["status"] == "pass", (host, dflash[host]["message"])
    assert "0.33.0 at commit 4ba787ec9" in dflash["gpu-0330"]["message"]
    assert dflash["gpu-0330"]["details"]["hunks"][0]["how"] == "inside its def"
    assert dflash["gpu-moved"]["details"]["hunks"][0]["how"] == \
        "moved to vllm/v1/worker/utils.py"
    assert dflash["gpu-moved"]["evidence"][0]["file"] == "vllm/v1/worker/utils.py"
    # the test and the CUDA source are named as not checkable, never counted
    for check in dflash.values():
        assert check["details"]["not_checkable"] == ["tests/v1/spec_decode/test_dflash.py",
                                                     "csrc/attention/merge_attn_states.cu"]
        assert len(check["details"]["hunks"]) == 1
    assert "not checkable from the install" in dflash["gpu-0330"]["message"]

    # evidence can be re-checked by hand on the host's files
    for item in dflash["gpu-0221"]["evidence"]:
        line = open(os.path.join(site_packages(real_install("0.22.1")), item["file"]),
                    encoding="utf-8").read().splitlines()
        assert line[item["line"] - 1].strip() == item["text"]

    # reports: JUnit has one testcase per pull request and host; the terminal and HTML
    # name each PR's hunks per host
    assert run.code == 1
    assert "dflash-plus-one" in run.html and "not applied" in run.html
    junit = tmp_path / "junit.xml"
    assert main(["report", str(tmp_path / "out" / "results.json"), "--junit",
                 str(junit)]) == 1
    cases = re.findall(r'<testcase [^>]*name="([^"]+)"', junit.read_text())
    assert sum(1 for c in cases if "dflash-plus-one" in c) == 5


    # `fleetcheck diff`: the same host, rolled back to a build without the PR, is worse
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    lines = (tmp_path / "out" / "results.json").read_text()
    rolled = json.loads(lines)
    old_build = next(h for h in rolled["hosts"] if h["name"] == "gpu-0201")
    rolled["hosts"] = [dict(old_build, name="gpu-0221") if h["name"] == "gpu-0221" else h
                       for h in rolled["hosts"] if h["name"] != "gpu-0201"]
    results["hosts"] = [h for h in results["hosts"] if h["name"] != "gpu-0201"]
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(results))
    after.write_text(json.dumps(rolled))
    diff = subprocess.run([sys.executable, "-m", "fleetcheck", "diff", str(before), str(after)],
                          capture_output=True, text=True, cwd=str(tmp_path))
    assert diff.returncode == 1, diff.stderr
    assert "dflash-plus-one" in diff.stdout and "not applied" in diff.stdout


def test_probe_bundle_and_judge_carry_patches(tmp_path, real_venvs):
    """Another engine carries the probe: the bundle's plan holds the diff, and judge
    judges the facts it brings back with the same check."""
    diff = tmp_path / "dflash-plus-one.diff"
    diff.write_text(DFLASH_PR)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    facts = []
    for version in ("0.20.1", "0.33.0"):
        bundle = subprocess.run([sys.executable, "-m", "fleetcheck", "probe-bundle", "--venv",
                                 real_venvs[version], "--host", "gpu-" + version,
                                 "--no-integrity", "--patch", str(diff)],
                                capture_output=True, text=True, timeout=120, env=env)
        assert bundle.returncode == 0, bundle.stderr
        script = tmp_path / ("probe-%s.py" % version)
        script.write_text(bundle.stdout)
        proc = subprocess.run(["python3", str(script)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        facts.append(proc.stdout)
    (tmp_path / "facts.jsonl").write_text("\n".join(f.strip() for f in facts) + "\n")
    out = tmp_path / "judged.json"
    judged = subprocess.run([sys.executable, "-m", "fleetcheck", "judge",
                             str(tmp_path / "facts.jsonl"), "--no-integrity", "--patch",
                             str(diff), "--json", str(out), "--no-html"],
                            capture_output=True, text=True, timeout=120, env=env,
                            cwd=str(tmp_path))
    assert judged.returncode == 1, judged.stderr
    results = json.loads(out.read_text())
    status = {h["name"]: next(c["status"] for c in h["checks"] if c["id"] == "dflash-plus-one")
              for h in results["hosts"]}
    assert status == {"gpu-0.20.1": "fail", "gpu-0.33.0": "pass"}
    # without --patch, judge refuses nothing but has no such check
    plain = subprocess.run([sys.executable, "-m", "fleetcheck", "judge",
                            str(tmp_path / "facts.jsonl"), "--no-integrity", "--json", "-"],
                           capture_output=True, text=True, timeout=120, env=env,
                           cwd=str(tmp_path))
    assert "dflash-plus-one" not in plain.stdout


def test_a_diff_not_finished_in_the_time_budget_says_so(tmp_path):
    from fleetcheck.probe.patch_presence import check_patches
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    diff = tmp_path / "late.diff"
    diff.write_text("--- a/pkg/__init__.py\n+++ b/pkg/__init__.py\n@@ -1,2 +1,2 @@\n"
                    " def f():\n-    return 1\n+    return 2\n")
    patch = read_patch(str(diff))
    (done,) = check_patches(str(site), None, [patch.signature()]).values()
    assert [h["state"] for h in done["hunks"]] == ["not applied"]
    (late,) = check_patches(str(site), None, [patch.signature()], deadline=0.0).values()
    assert late["hunks"] == [] and "time budget ran out after 0 of" in late["error"]
