"""A PR build's origin, as PEP 610 direct_url.json records a `pip install
git+https://github.com/vllm-project/vllm@refs/pull/40898/head`: the repository URL, the
revision asked for and the commit it resolved to, in the JSON, the HTML and (with -v) the
terminal."""

from __future__ import annotations

import glob
import json
import os

import pytest

from fleet_helpers import run_fleetcheck
from fleetcheck.lab.synthetic import FIXED, write_install

pytestmark = pytest.mark.unit

SHA = "3cfc8f8b7e2d4c6a8b0f1e3d5c7a9b2d4f6e8a0c"
SOURCE = {"url": "https://github.com/vllm-project/vllm", "requested_revision":
          "refs/pull/40898/head", "commit": SHA, "vcs": "git"}


def test_a_pr_builds_repository_revision_and_commit_are_in_every_output(tmp_path):
    venv = str(tmp_path / "pr-env")
    site = write_install(venv, "0.33.0", FIXED, commit="g3cfc8f8b7")
    (dist,) = glob.glob(os.path.join(site, "vllm-*.dist-info"))
    with open(os.path.join(dist, "direct_url.json"), "w", encoding="utf-8") as handle:
        json.dump({"url": SOURCE["url"], "vcs_info": {
            "vcs": "git", "commit_id": SHA, "requested_revision": SOURCE["requested_revision"]}},
            handle)
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"pr-canary": {
        "connection": "local", "venv": venv}}}}, "--no-smoke", "--no-import-check", "-v")
    assert run.results is not None, run.stderr
    assert run.host("pr-canary")["vllm"]["source"] == SOURCE
    words = "git https://github.com/vllm-project/vllm @ refs/pull/40898/head (commit %s)" % SHA
    assert "Built from (direct_url.json):" in run.stdout
    assert "pr-canary: " + words in " ".join(run.stdout.split())
    assert ("built from git https://github.com/vllm-project/vllm @ <b>refs/pull/40898/head</b> "
            "(commit %s)" % SHA) in run.html


def test_an_index_install_has_no_source(tmp_path):
    venv = str(tmp_path / "env")
    write_install(venv, "0.33.0", FIXED, commit="g4ba787ec9")
    run = run_fleetcheck(tmp_path, {"all": {"hosts": {"gpu": {
        "connection": "local", "venv": venv}}}}, "--no-smoke", "--no-import-check", "-v")
    assert run.host("gpu")["vllm"]["source"] is None
    assert "Built from" not in run.stdout
