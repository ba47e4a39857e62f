"""Playbooks as people write them: `extends: dflash` keeps the packaged checks and adds
or drops some; a repeated --playbook adds the next file's checks, and an id two files
define is exit 2 naming both; a playbook of one's own without `extends:` says which
packaged checks it leaves out."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from fleet_helpers import ROOT
from fleetcheck.input_error import InputError
from fleetcheck.playbook import PACKAGED_PLAYBOOK, load_playbook, load_playbooks

pytestmark = pytest.mark.unit

PACKAGED_IDS = ["dflash-layer-offset", "dflash-swa", "dflash-cache-drop"]


def packaged_check(check_id: str, new_id: str) -> dict:
    """One of the packaged checks under another id: a real check to add."""
    with open(PACKAGED_PLAYBOOK, encoding="utf-8") as handle:
        checks = yaml.safe_load(handle)["checks"]
    return dict(next(c for c in checks if c["id"] == check_id), id=new_id)


def write(path, data: dict) -> str:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_extends_keeps_the_packaged_checks_and_adds_and_drops(tmp_path):
    mine = write(tmp_path / "mine.yaml", {
        "extends": "dflash", "drop": ["dflash-cache-drop"],
        "checks": [packaged_check("dflash-swa", "swa-again")]})
    playbook = load_playbook(mine)
    assert [c.id for c in playbook.checks] == ["dflash-layer-offset", "dflash-swa", "swa-again"]
    assert playbook.check_sources == {"dflash-layer-offset": PACKAGED_PLAYBOOK,
                                      "dflash-swa": PACKAGED_PLAYBOOK, "swa-again": mine}
    packaged = load_playbook()
    assert playbook.integrity == packaged.integrity and playbook.smoke == packaged.smoke


def test_extends_may_only_drop_checks_it_has_and_names_a_packaged_playbook(tmp_path):
    with pytest.raises(InputError) as raised:
        load_playbook(write(tmp_path / "a.yaml", {"extends": "dflash", "drop": ["nope"]}))
    assert str(raised.value).startswith("%s: drop: field 'nope': is not a check of dflash"
                                        % (tmp_path / "a.yaml"))
    with pytest.raises(InputError) as raised:
        load_playbook(write(tmp_path / "b.yaml", {"extends": "eagle"}))
    assert "field 'extends': names a packaged playbook: one of dflash, got 'eagle'" \
        in str(raised.value)
    with pytest.raises(InputError) as raised:
        load_playbook(write(tmp_path / "c.yaml", {"extends": "dflash",
                                                  "checks": [packaged_check("dflash-swa",
                                                                            "dflash-swa")]}))
    assert "check 'dflash-swa': field 'id': defined twice: also in %s" % PACKAGED_PLAYBOOK \
        in str(raised.value)


def test_a_repeated_playbook_adds_its_checks(tmp_path):
    more = write(tmp_path / "more.yaml", {"checks": [packaged_check("dflash-swa", "swa-2")]})
    playbook = load_playbooks([PACKAGED_PLAYBOOK, more])
    assert [c.id for c in playbook.checks] == PACKAGED_IDS + ["swa-2"]
    assert playbook.source == "%s + %s" % (PACKAGED_PLAYBOOK, more)


def run_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    inventory = write(tmp_path / "hosts.yaml", {"all": {"hosts": {"gpu1": {
        "ansible_host": "127.0.0.1"}}}})
    return subprocess.run([sys.executable, "-m", "fleetcheck", "run", inventory, "--json",
                           str(tmp_path / "r.json"), *args], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=60, env={"PYTHONPATH": ROOT,
                                                              "PATH": "/usr/bin:/bin"})


def test_an_id_two_playbooks_define_is_exit_2_naming_both_files(tmp_path):
    first = write(tmp_path / "first.yaml", {"extends": "dflash",
                                            "checks": [packaged_check("dflash-swa", "mine")]})
    second = write(tmp_path / "second.yaml", {"checks": [packaged_check("dflash-swa", "mine")]})
    run = run_cli(tmp_path, "--playbook", first, "--playbook", second)
    assert run.returncode == 2, run.stderr
    assert run.stderr == ("fleetcheck: error: %s: check 'mine': field 'id': defined twice: "
                          "also in %s\n" % (second, first))
    assert not (tmp_path / "r.json").exists()


def test_a_later_playbook_sets_nothing_but_checks(tmp_path):
    second = write(tmp_path / "second.yaml", {"smoke": {"requests": 4},
                                              "checks": [packaged_check("dflash-swa", "x")]})
    run = run_cli(tmp_path, "--playbook", PACKAGED_PLAYBOOK, "--playbook", second)
    assert run.returncode == 2
    assert "%s: field 'smoke': only the first --playbook" % second in run.stderr


def test_a_playbook_of_ones_own_says_which_packaged_checks_it_leaves_out(tmp_path):
    mine = write(tmp_path / "mine.yaml", {"checks": [packaged_check("dflash-swa", "only")]})
    run = subprocess.run([sys.executable, "-m", "fleetcheck", "probe-bundle", "--playbook",
                          mine], capture_output=True, text=True, cwd=str(tmp_path), timeout=60,
                         env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and "only" in run.stdout, run.stderr
    assert ("fleetcheck: note: %s replaces the packaged checks (dflash-layer-offset, "
            "dflash-swa, dflash-cache-drop are not run); `extends: dflash` in it adds its "
            "checks to them instead" % mine) in run.stderr, run.stderr
