"""Warm gates: the controller keeps each build's fix analysis, so a re-run ships no bytes
and every host only proves by sha256 that it holds what the cached analysis read.

Over real sshd with real 0.33.0 and 0.20.1 installs: cold, then warm (no host leads, so
none ships), then warm after one host's fix file was edited (only that host analyses its
own files); every run's verdicts are exactly those of a run without sharing or cache."""

from __future__ import annotations

import json
import os

import pytest

from fleet_helpers import run_fleetcheck, ssh_hosts
from fleetcheck.analysis_cache import SUFFIX, AnalysisCache
from fleetcheck.playbook import load_playbook
from probe_helpers import (ENV, FIXED_LINE, RUNNER, UNFIXED_LINE, comparable, linked_copy,
                           rewrite, site_packages)

pytestmark = pytest.mark.unit

CACHED = "fix analysis from the controller's cache"


def verdicts(run) -> dict:
    return {h["name"]: comparable(h) for h in run.results["hosts"]}


def notes(run) -> dict:
    return {h["name"]: h["analysis"] or "" for h in run.results["hosts"]}


@pytest.fixture
def cached_fleet(tmp_path, fleet, real_venvs):
    editable = linked_copy(real_venvs["0.33.0"], str(tmp_path / "to-edit"))
    mounts = [("a1", real_venvs["0.33.0"]), ("a2", real_venvs["0.33.0"]), ("e", editable),
              ("old", real_venvs["0.20.1"])]
    hosts = [fleet.add(name, mounts={ENV: source + ":ro"}) for name, source in mounts]
    fleet.start()
    inventory = {"all": {"vars": {"venv": ENV}, "hosts": ssh_hosts(fleet, hosts)}}
    return fleet, inventory, editable


def test_cold_warm_and_an_edited_host(tmp_path, cached_fleet):
    fleet, inventory, editable = cached_fleet
    home = str(tmp_path / "xdg")
    analyses = os.path.join(home, "fleetcheck", "analyses")
    common = ("--known-hosts", fleet.known_hosts, "--no-smoke", "-j", "4")

    def run(label: str, *args: str, cache: bool = True):
        directory = tmp_path / label
        directory.mkdir()
        result = run_fleetcheck(directory, inventory, *common, *args,
                                cache_home=home if cache else None)
        assert result.results is not None, result.stderr
        return result

    own = run("own", "--no-shared-analysis", cache=False)
    cold = run("cold")
    assert verdicts(cold) == verdicts(own)
    assert not any(CACHED in n for n in notes(cold).values())
    assert sorted(n for n in os.listdir(analyses) if n.endswith(SUFFIX)).__len__() == 2

    warm = run("warm")
    assert verdicts(warm) == verdicts(own)
    # every host verified against the cache: none led its build, so none shipped bytes
    assert all(note.startswith(CACHED) for note in notes(warm).values()), notes(warm)
    assert len(os.listdir(analyses)) == 2

    path = os.path.join(site_packages(editable), RUNNER)
    with open(path, "rb") as handle:
        data = handle.read()
    assert FIXED_LINE in data
    rewrite(path, data.replace(FIXED_LINE, UNFIXED_LINE))
    edited_own = run("edited-own", "--no-shared-analysis", cache=False)
    edited = run("edited-warm")
    assert verdicts(edited) == verdicts(edited_own)
    assert edited.check("e", "dflash-layer-offset")["status"] == "fail"
    assert own.results["hosts"][2]["status"] == "pass"
    found = notes(edited)
    assert "fix analysis run on this host" in found["e"] and "differs" in found["e"], found
    assert all(found[name].startswith(CACHED) for name in ("a1", "a2", "old")), found

    off = run("no-cache", "--no-cache")
    assert verdicts(off) == verdicts(edited_own)
    assert not any(CACHED in n for n in notes(off).values())


def test_cache_is_bounded_least_recently_used_first(tmp_path):
    signatures = load_playbook().probe_signatures()
    cache = AnalysisCache(str(tmp_path / "c"), signatures, max_entries=3, max_bytes=1 << 20)
    reply = b'{"role": "verify", "files": {}, "walks": {}}\n'
    builds = ["%064x" % n for n in range(5)]
    for index, build in enumerate(builds):
        cache.put(build, "{}", reply)
        os.utime(cache.path(build), (1000 + index, 1000 + index))
        if index == 2:
            assert cache.get(builds[0]) is not None  # a hit makes it recent again
    assert len(os.listdir(tmp_path / "c")) == 3
    assert cache.get(builds[0]) is not None and cache.get(builds[4]) is not None
    assert cache.get(builds[1]) is None
    small = AnalysisCache(str(tmp_path / "s"), signatures, max_bytes=300)
    small.put(builds[0], json.dumps({"x": "y" * 400}), reply)
    assert small.get(builds[0]) is None  # an entry over the byte bound is not kept


def test_an_unreadable_or_foreign_entry_is_a_miss(tmp_path):
    signatures = load_playbook().probe_signatures()
    cache = AnalysisCache(str(tmp_path / "c"), signatures)
    build = "ab" * 32
    cache.put(build, "{}", b'{"role": "verify", "files": {}, "walks": {}}\n')
    assert cache.get(build) is not None
    with open(cache.path(build), "w") as handle:
        handle.write("{not json")
    assert cache.get(build) is None
    other = AnalysisCache(str(tmp_path / "c"), signatures + [{"id": "x"}])
    assert other.path(build) != cache.path(build)  # another playbook, another entry
    assert not os.path.exists(tmp_path / "never")
    AnalysisCache(str(tmp_path / "never"), signatures).get(build)
    assert not os.path.exists(tmp_path / "never")  # reading never creates the directory
